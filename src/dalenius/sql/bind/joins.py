"""Binding joins: which shapes of join are answered, and how the joined source is built.

A private table joins public tables as lookups (on one equality each, in any written order of
inner joins) and other private tables only on the privacy unit; every other shape is refused
with its fix. The sources joined are built by the caller (:mod:`.relations`), which hands a
builder in, so this floor needs nothing above it. Name lookup and the expression converter of
a source live here too: every floor above resolves names through them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Literal

from sqlglot import exp

from dalenius.core.errors import QueryError
from dalenius.core.unit import IdUnit
from dalenius.plan.derive import FieldInfo
from dalenius.plan.nodes import (
    Field,
    Filter,
    Join,
    ReachedUnit,
    Scan,
    Truncation,
    UnitSpec,
    scans,
    with_fields,
)
from dalenius.sql.bind.aggregates import _Aggregates
from dalenius.sql.bind.base import _info, _Source
from dalenius.sql.expressions import Converter
from dalenius.sql.hints import unknown_column_fix


class _Joins(_Aggregates):
    """The joins of a FROM clause, and name lookup in a source."""

    lookup_depth = 0
    """How many EXISTS / IN subqueries enclose the FROM being bound (public joins allowed there)."""

    def join(
        self,
        left: _Source,
        join: exp.Join,
        build: Callable[[exp.Expr], _Source],
        lifted: list[exp.Expr],
    ) -> _Source:
        """The source ``left`` joined with the table or subquery of ``join``, which ``build``
        binds (refusing unsupported shapes).

        An inner join's ON conditions other than its key equality are appended to ``lifted``:
        they only filter the joined rows (``R ⋈_{k ∧ c} S = σ_c(R ⋈_k S)``), so the key alone
        bounds how rows multiply.

        Long because it is the allow-list of join shapes: each refusal (join kind, shared
        qualifiers, two private tables not on their unit, the public side's shape) carries its own
        message and fix, checked in the order that gives the most useful one.
        """
        side = (join.args.get("side") or "").upper()
        kind = (join.args.get("kind") or "").upper()
        # An allow-list: a kind the planner does not implement (SEMI, ANTI, CROSS, ...) is refused,
        # never run as an inner join.
        if (
            side not in ("", "LEFT")
            or kind not in ("", "INNER", "OUTER")
            or (kind, side)
            == (
                "OUTER",
                "",
            )
        ):
            written = (side + " " + kind).strip()
            raise self.error(
                f"{written} JOIN is not supported.",
                join,
                clause="JOIN",
                why="only inner and left joins are planned; another kind would be answered as a "
                "different question.",
                fix="use JOIN or LEFT JOIN on one equality"
                + (
                    "; to keep rows with a match, filter with IN ('a', 'b') on the public keys."
                    if kind in ("SEMI", "ANTI")
                    else "."
                ),
            )
        right = written = build(join.this)
        self.joinable(left, right, join)
        join_kind: Literal["inner", "left"] = "left" if side == "LEFT" else "inner"
        if join_kind == "left":
            # Rows without a match are extended with NULLs: nothing on the right is non-nullable.
            nullable = [replace(f, nullable=True) for f in right.fields]
            right = _Source(
                with_fields(right.relation, nullable), nullable, right.unit, right.tables
            )  # and its unit's equal fields are dropped: they are NULL where nothing matched
        both = _Source(
            left.relation,
            left.fields + right.fields,
            left.unit,
            left.tables + right.tables,
            also_unit=left.also_unit,
        )
        left_key, right_key, extra = self.join_keys(join, left, right, both)
        if extra and join_kind == "left":
            right = self.filtered_right(join, extra, written, right, both)
            extra = []
        lifted.extend(extra)
        return self.combine(left, right, left_key, right_key, join_kind, join)

    def filtered_right(
        self,
        join: exp.Join,
        extra: list[exp.Expr],
        written: _Source,
        right: _Source,
        both: _Source,
    ) -> _Source:
        """A LEFT JOIN's right side filtered by the ON conditions beside its key that read the
        right side alone: ``L ⟕_{k ∧ c(R)} R = L ⟕_k σ_c(R)`` (a right row failing ``c`` matches
        no left row either way; a left row without a match is kept, extended with NULLs, either
        way). TPC-H Q13: ``customer LEFT JOIN orders ON c_custkey = o_custkey AND o_comment NOT
        LIKE ...``. A condition that reads the left side is refused: it empties a match instead
        of dropping a row, which no filter expresses. Only a private right side is filtered: a
        public one must stay a table (its key multiplicity is measured on the table).
        """
        ids = {f.id for f in written.fields}
        reads_left = any(
            self.lookup(both.fields, c.table or None, c.name, c, "JOIN").id not in ids
            for condition in extra
            for c in condition.find_all(exp.Column)
        )
        if reads_left or not written.private:
            raise self.error(
                "a LEFT JOIN's ON takes one equality here, and other conditions on the right "
                "table alone.",
                join.args.get("on"),
                clause="JOIN",
                why="in a LEFT JOIN another ON condition does not drop rows, it only empties their "
                "match, so it cannot be read as a filter"
                + ("" if reads_left else " of the public table, which joins as a table")
                + ".",
                fix="use JOIN if the condition filters the joined rows, or move it to WHERE.",
            )
        relation = written.relation
        converter = self.converter(written)
        for condition in extra:
            predicate = converter.convert(condition, "JOIN")
            if converter.type_of(predicate, node=condition, clause="JOIN") not in ("bool", "null"):
                raise self.error(
                    "the condition is not true/false.",
                    condition,
                    clause="JOIN",
                    fix="compare it with something, e.g. AND o_totalprice > 100",
                )
            relation = Filter(relation, predicate)
        return _Source(with_fields(relation, right.fields), right.fields, right.unit, right.tables)

    def public_only(self, source: _Source, node: exp.Expr | None) -> QueryError:
        """The refusal of a query whose rows come from public tables alone while it also reads
        a private table (in a subquery or WITH): a query that reads public tables only never
        reaches the binder (it is answered exactly, :mod:`dalenius.sql.public_sql`).
        """
        names = ", ".join(dict.fromkeys(t.name for t in source.tables))
        private = ", ".join(t.name for t in self.catalog.tables if not t.public)
        return self.error(
            f"the query counts rows of public tables only ({names}), and reads a private table "
            "only inside a subquery or WITH.",
            node,
            clause="FROM",
            why="its rows belong to no privacy unit, so no noise calibrated to one person "
            "bounds what the private table changes in the answer.",
            fix=f"ask about the private table's rows (FROM one of {private}, joined to the public "
            "tables as lookups), or leave the private table out: a query over public tables "
            "alone is answered exactly, free.",
        )

    def joinable(self, left: _Source, right: _Source, join: exp.Expr) -> None:
        """Refuse a join of a per-unit aggregate, or of two sources sharing an alias."""
        for part in (left, right):
            if part.unit is not None and part.unit.kind == "aggregated":
                raise self.error(
                    "a per-unit aggregate (a subquery grouped by the privacy unit) cannot be joined.",
                    join,
                    clause="JOIN",
                    why="the join could repeat each person's row, and their bounded value, many times.",
                    fix="do the join inside the subquery, before grouping by the unit.",
                    privacy=True,
                )
        if not {f.qualifier for f in right.fields}.isdisjoint({f.qualifier for f in left.fields}):
            raise self.error(
                "the same alias is used twice.",
                join,
                clause="JOIN",
                fix="give each table its own alias.",
            )

    def combine(
        self,
        left: _Source,
        right: _Source,
        left_key: str,
        right_key: str,
        join_kind: Literal["inner", "left"],
        join: exp.Expr,
    ) -> _Source:
        """``left ⋈ right`` on ``left_key = right_key``: two private tables on their privacy unit,
        or a private side with a public table (whose key multiplicity is measured later).
        """
        both = _Source(
            left.relation, left.fields + right.fields, left.unit, left.tables + right.tables
        )
        lf, rf = (next(f for f in both.fields if f.id == k) for k in (left_key, right_key))
        if lf.type != rf.type:
            raise self.error(
                f"the join compares a {lf.type} with a {rf.type}.",
                (join.args.get("on") or join) if isinstance(join, exp.Join) else join,
                clause="JOIN",
                why="the engine would convert one side, and converted values can collide (many keys "
                "matching one), multiplying rows beyond what was measured.",
                fix="join columns of the same type.",
            )
        if left.private and right.private:
            return self.on_unit(left, right, left_key, right_key, join_kind, join)
        if not left.private and not right.private and self.lookup_depth:
            # Inside EXISTS / IN: public rows only decide which rows are kept, never counted.
            relation = Join(left.relation, right.relation, left_key, right_key, join_kind)
            return _Source(relation, both.fields, None, both.tables)
        if not left.private and not right.private:
            raise self.error(
                "joining two public tables is not supported here.",
                join,
                clause="JOIN",
                why="a query reads a private table, and public tables join it as lookups: then "
                "the private table's rows, each tied to its unit, are what the answer counts.",
                fix="join the public tables to a private table with inner joins (in any order), "
                "or read the public tables alone.",
            )
        private, public = (left, right) if left.private else (right, left)
        if not isinstance(public.relation, Scan):
            raise self.error(
                "the public side of a join must be a table.",
                join,
                clause="JOIN",
                fix="join the public table itself.",
            )
        if join_kind == "left" and not left.private:
            raise self.error(
                "a LEFT JOIN must keep the private table on the left.",
                join,
                clause="JOIN",
                fix="swap the tables, or use JOIN.",
            )
        # The multiplicity is measured on the public table by the engine before costing (-1: to do).
        pub_key = right_key if public is right else left_key
        priv_key = left_key if public is right else right_key
        relation = Join(
            private.relation, public.relation, priv_key, pub_key, join_kind, multiplicity=-1
        )
        return _Source(
            relation,
            private.fields + public.fields,
            private.unit,
            private.tables + public.tables,
            also_unit=private.also_unit,
        )

    def on_unit(
        self,
        left: _Source,
        right: _Source,
        left_key: str,
        right_key: str,
        join_kind: Literal["inner", "left"],
        join: exp.Expr,
    ) -> _Source:
        """Two private tables joined on their privacy unit, or on another key each side is
        truncated on before joining (:meth:`truncated`).
        """
        assert left.unit is not None and right.unit is not None
        if (
            left.unit.kind != "id"
            or right.unit.kind != "id"
            or left_key not in left.unit_fields
            or right_key not in right.unit_fields
        ):
            return self.truncated(left, right, left_key, right_key, join_kind, join)
        # One unit's rows multiply across the join: up to R_left × R_right joined rows, in
        # at most as many groups as either side allows (the engine enforces both caps). A key
        # equated beside the unit, declared with join_rows_per_key, caps the rows one row
        # meets on that side (an order key: one order per line), so fewer suffice.
        rows = left.unit.max_rows * right.unit.max_rows
        keyed = self.keyed_rows(left, right, join) if join_kind == "inner" else None
        described = f"{left.unit.description}, joined with {right.unit.description}"
        if keyed is not None and keyed[0] < rows:
            rows, key = keyed
            described += f" on {key} (at most {rows} joined row{'s' * (rows != 1)} each)"
        unit = replace(
            left.unit,
            max_rows=rows,
            max_groups=max(left.unit.max_groups, right.unit.max_groups),
            description=described,
        )
        relation = Join(left.relation, right.relation, left_key, right_key, join_kind)
        if join_kind == "inner":
            relation = self.reached(relation, left, right, join)
        if relation.reached is not None:
            text = f"{described}, each row's reached unit taken from the row it joins"
            unit = replace(unit, description=text)
        # After an inner join the right side's unit columns equal the unit on every joined row
        # (a LEFT JOIN leaves them NULL where nothing matched, so they are not carried).
        equal = (right.unit_fields | left.also_unit) if join_kind == "inner" else left.also_unit
        return _Source(
            relation,
            left.fields + right.fields,
            unit,
            left.tables + right.tables,
            also_unit=equal - {unit.field} if unit.field else equal,
        )

    def reached(self, relation: Join, left: _Source, right: _Source, join: exp.Expr) -> Join:
        """``relation`` supplying a side's reached unit itself, where it can (:class:`ReachedUnit`).

        A side that is a table whose unit is reached through another table's key (``lineitem``,
        ``l_orderkey`` → ``orders.o_orderkey``) would have the engine join that other table in
        to find each row's unit, and this inner join reads that table too: where the ON
        condition also equates the two keys and the key is declared ``join_rows_per_key = 1``,
        the joined row is the one that gives the unit, so the side is read as stored and the
        unit taken from the joined row — the same rows, one join fewer. Where the declaration
        does not hold (two rows of the other table share a key and a unit), a row meets each of
        them once here instead of once per pair; the bounding after the join caps each unit's
        joined rows either way (docs/privacy.md, "A unit reached through a key").
        """
        if not isinstance(join, exp.Join):
            return relation
        for mine, other, mine_key, is_left in (
            (left, right, relation.left_key, True),
            (right, left, relation.right_key, False),
        ):
            found = self.reached_by(mine, other, mine_key, join)
            if found is None or not isinstance(mine.relation, Scan):
                continue
            stored = replace(mine.relation, stored=True)
            if is_left:
                return replace(relation, left=stored, reached=found)
            return replace(relation, right=stored, reached=found)
        return relation

    def reached_by(
        self, mine: _Source, other: _Source, mine_key: str, join: exp.Join
    ) -> ReachedUnit | None:
        """How ``other`` supplies the unit of ``mine`` (a table read alone, joined on its unit
        ``mine_key``), or ``None`` (:meth:`reached`).
        """
        scan = mine.relation
        if not isinstance(scan, Scan) or scan.stored:
            return None
        table = next((t for t in mine.tables if t.name == scan.table), None)
        reach = table.reach if table is not None else None
        if reach is None:
            return None
        unit = next((f for f in scan.fields if f.unit), None)
        column = next((f for f in scan.fields if f.name.lower() == reach.column.lower()), None)
        if unit is None or column is None or unit.id != mine_key:
            return None
        exposed = {f.id for f in other.fields}
        equated = self.equated(mine, other, join)
        for referenced in scans(other.relation):
            if referenced.table != reach.table:
                continue
            theirs = {f.name.lower(): f for f in referenced.fields}
            key, source = theirs.get(reach.key.lower()), theirs.get(reach.unit.lower())
            if (
                key is not None
                and source is not None
                and key.join_rows_per_key == 1
                and {key.id, source.id} <= exposed
                and (column.id, key.id) in equated
            ):
                return ReachedUnit(unit.id, source.id, column.id, key.id)
        return None

    def equated(self, mine: _Source, other: _Source, join: exp.Join) -> set[tuple[str, str]]:
        """The pairs (a field of ``mine``, a field of ``other``) the ON condition equates."""
        mine_ids = {f.id for f in mine.fields}
        pairs = set()
        for condition in _conjuncts(join):
            if not _column_equality(condition):
                continue
            try:
                a, b = (
                    self.lookup(mine.fields + other.fields, c.table or None, c.name, c, "JOIN")
                    for c in (condition.this, condition.expression)
                )
            except QueryError:
                continue  # reported where the condition is read as a filter
            if (a.id in mine_ids) != (b.id in mine_ids):
                pairs.add((a.id, b.id) if a.id in mine_ids else (b.id, a.id))
        return pairs

    def keyed_rows(self, left: _Source, right: _Source, join: exp.Expr) -> tuple[int, str] | None:
        """How many joined rows one unit needs when the inner join on the unit also equates a
        key that one side declares ``join_rows_per_key = τ`` for: each of the other side's
        at most ``R`` rows of the unit meets at most ``τ`` rows of it, so ``R·τ`` (the least
        such bound, with the key that gives it as ``a.k = b.k, at most τ per key``; ``None``
        without one).

        The number only chooses the cap the engine enforces on each unit's joined rows (the
        bounding after the join ranks them and keeps that many), so the privacy guarantee
        holds whatever the data; a unit whose rows share a key more than ``τ`` times loses
        the rows past the cap, as truncation on that key would drop them.
        """
        assert left.unit is not None and right.unit is not None
        if not isinstance(join, exp.Join):
            return None
        both = left.fields + right.fields
        left_ids = {f.id for f in left.fields}
        best: tuple[int, str] | None = None
        for condition in _conjuncts(join):
            if not isinstance(condition, exp.EQ) or not _column_equality(condition):
                continue
            try:
                a, b = (
                    self.lookup(both, c.table or None, c.name, c, "JOIN")
                    for c in (condition.this, condition.expression)
                )
            except QueryError:
                continue  # reported where the condition is read as a filter
            if (a.id in left_ids) == (b.id in left_ids):
                continue
            lf, rf = (a, b) if a.id in left_ids else (b, a)
            if lf.id in left.unit_fields and rf.id in right.unit_fields:
                continue
            for field, side, other in ((rf, right, left), (lf, left, right)):
                per_key = _rows_per_key(field, side)
                assert other.unit is not None
                if per_key is not None and (
                    best is None or other.unit.max_rows * per_key < best[0]
                ):
                    text = f"{condition.sql()}, at most {per_key} per {field.name}"
                    best = (other.unit.max_rows * per_key, text)
        return best

    def truncated(
        self,
        left: _Source,
        right: _Source,
        left_key: str,
        right_key: str,
        join_kind: Literal["inner", "left"],
        join: exp.Expr,
    ) -> _Source:
        """Two private tables joined on a key other than their unit, each side truncated first.

        Each side keeps at most its key column's ``join_rows_per_key`` rows per key value (and
        an ``id`` side first at most its unit's row cap), so one unit changes a bounded number of
        joined rows (:class:`~dalenius.plan.nodes.Truncation`); the joined rows have no single
        owner any more, so they are bounded as rows, not per unit, from then on. When a key
        declares no truncation, only the unit caps apply and the join is bounded by elastic
        sensitivity (:mod:`dalenius.plan.elastic`, which refuses what it cannot plan); a LEFT
        JOIN is refused, its unmatched rows not covered by either bound.
        """
        assert left.unit is not None and right.unit is not None
        lf, rf = (
            next(f for f in s.fields if f.id == k)
            for s, k in ((left, left_key), (right, right_key))
        )
        if join_kind != "inner" or "aggregated" in (left.unit.kind, right.unit.kind):
            raise self.error(
                "a LEFT JOIN of two private tables must be on their privacy unit.",
                join,
                clause="JOIN",
                why="one person's rows could meet any number of others' rows; a join on another "
                "key is bounded only for inner joins, whose unmatched rows are dropped",
                fix="use JOIN, or join on the privacy unit.",
                privacy=True,
            )
        # Both keys declared: truncation; otherwise elastic sensitivity (plan/elastic.py),
        # which refuses what it cannot answer once the aggregates and δ are known.
        both = lf.join_rows_per_key is not None and rf.join_rows_per_key is not None
        truncation = Truncation(
            left_unit=left.unit.field if left.unit.kind == "id" else None,
            left_rows=left.unit.max_rows if left.unit.kind == "id" else None,
            left_per_key=lf.join_rows_per_key if both else None,
            right_unit=right.unit.field if right.unit.kind == "id" else None,
            right_rows=right.unit.max_rows if right.unit.kind == "id" else None,
            right_per_key=rf.join_rows_per_key if both else None,
        )
        relation = Join(
            left.relation, right.relation, left_key, right_key, "inner", truncation=truncation
        )
        how = (
            f"at most {lf.join_rows_per_key} and {rf.join_rows_per_key} rows per key"
            if both
            else "bounded by elastic sensitivity"
        )
        unit = UnitSpec(
            "row",
            None,
            1,
            1,
            f"rows of {left.unit.description} joined on {lf.qualifier}.{lf.name} with "
            f"{right.unit.description}, {how}",
        )
        return _Source(relation, left.fields + right.fields, unit, left.tables + right.tables)

    def rooted(
        self,
        first: _Source,
        joins: list[exp.Join],
        build: Callable[[exp.Expr], _Source],
        lifted: list[exp.Expr],
    ) -> _Source:
        """Inner joins written from a public table, re-ordered to start at the first private one.

        Inner joins on equalities commute and associate (``A ⋈ B = B ⋈ A``, and an ON condition
        of an inner join is a filter on the joined rows wherever it is applied), so ``nation ⋈
        supplier ⋈ lineitem`` is ``lineitem ⋈ supplier ⋈ nation``: each public table then joins
        the private rows built so far on one equality, as a lookup whose key multiplicity is
        measured, and the sensitivity is the private table's, as written private-first. Each
        ON condition's columns are resolved where the analyst wrote it (the tables to its
        left); every equality not used as a key, and every other condition, filters the
        joined rows. Without any private table the joins stay as written (and are refused).
        """
        rights = [build(j.this) for j in joins]
        sources = [first, *rights]
        start = next((i for i, s in enumerate(sources) if s.private), None)
        if start is None and self.lookup_depth:
            source = first
            for join, right in zip(joins, rights, strict=True):
                both = _Source(source.relation, source.fields + right.fields, None)
                lk, rk, extra = self.join_keys(join, source, right, both)
                lifted.extend(extra)
                source = self.combine(source, right, lk, rk, "inner", join)
            return source
        if start is None:
            raise self.public_only(
                _Source(first.relation, [], None, [t for s in sources for t in s.tables]), joins[0]
            )
        for n, join in enumerate(joins, start=1):
            written = _Source(first.relation, [f for s in sources[:n] for f in s.fields], None)
            self.joinable(written, sources[n], join)
        pool = self.join_equalities(joins, sources)
        owner = {f.id: i for i, s in enumerate(sources) for f in s.fields}
        joined, source = {start}, sources[start]
        while len(joined) < len(sources):
            step = self.next_lookup(pool, owner, joined, sources)
            if step is None:
                alone = next(i for i in range(len(sources)) if i not in joined)
                raise self.error(
                    "a table is joined to the others by no equality.",
                    joins[alone - 1] if alone else joins[0],
                    clause="JOIN",
                    why="without one, every row would match every row of the other table.",
                    fix="join each table on an equality with a table before it: ON a.key = b.key.",
                )
            i, (node, a, b) = step
            pool.remove((node, a, b))
            key, other = (a, b) if owner[a] in joined else (b, a)
            joined.add(i)
            source = self.combine(source, sources[i], key, other, "inner", node)
        lifted.extend(node for node, _, _ in pool)
        lifted.extend(c for j in joins for c in _conjuncts(j) if not _column_equality(c))
        return source

    def join_equalities(
        self, joins: list[exp.Join], sources: list[_Source]
    ) -> list[tuple[exp.Expr, str, str]]:
        """Every ``a = b`` between two columns in the ON conditions of ``joins``, with the
        field ids of its columns, resolved among the tables written up to its join.
        """
        out = []
        for n, join in enumerate(joins, start=1):
            visible = [f for s in sources[: n + 1] for f in s.fields]
            for c in _conjuncts(join):
                if _column_equality(c):
                    a = self.lookup(visible, c.this.table or None, c.this.name, c.this, "JOIN")
                    b = self.lookup(
                        visible, c.expression.table or None, c.expression.name, c.expression, "JOIN"
                    )
                    out.append((c, a.id, b.id))
        return out

    def next_lookup(
        self,
        pool: list[tuple[exp.Expr, str, str]],
        owner: dict[str, int],
        joined: set[int],
        sources: list[_Source],
    ) -> tuple[int, tuple[exp.Expr, str, str]] | None:
        """The next table to join (in written order, the first an equality links to the joined
        ones) and that equality: between two private tables, the one on their units.
        """
        for i in range(len(sources)):
            if i in joined:
                continue
            links = [
                e
                for e in pool
                if {owner[e[1]], owner[e[2]]} - {i} <= joined
                and i in {owner[e[1]], owner[e[2]]}
                and owner[e[1]] != owner[e[2]]
            ]
            units = {f.id for f in sources[i].fields if f.unit}
            on_unit = [e for e in links if units & {e[1], e[2]}]
            if links:
                return i, (on_unit or links)[0]
        return None

    def join_keys(
        self, join: exp.Join, left: _Source, right: _Source, both: _Source
    ) -> tuple[str, str, list[exp.Expr]]:
        """The key columns of the join (one equality between a column of each side) and the ON
        condition's other conjuncts. With several such equalities, two private tables are
        joined on their privacy unit's; otherwise on the first.
        """
        using = join.args.get("using")
        if using:
            if len(using) != 1:
                raise self.error(
                    "USING takes one column here.", join, clause="JOIN", fix="join on one column."
                )
            name = using[0].name
            lf = self.lookup(left.fields, None, name, using[0], "JOIN")
            rf = self.lookup(right.fields, None, name, using[0], "JOIN")
            return lf.id, rf.id, []
        on = join.args.get("on")
        conjuncts: list[exp.Expr] = []
        if isinstance(on, exp.And):
            conjuncts = list(on.flatten())
        elif on is not None:
            conjuncts = [on]
        candidates = [
            c
            for c in conjuncts
            if isinstance(c, exp.EQ)
            and isinstance(c.this, exp.Column)
            and isinstance(c.expression, exp.Column)
        ]
        if not candidates:
            raise self.error(
                "a join needs one equality between a column of each side.",
                on if on is not None else join,
                clause="JOIN",
                why="other join conditions can match one row with arbitrarily many.",
                fix="write ON a.key = b.key (other conditions may follow with AND).",
            )
        chosen = candidates[0]
        if left.private and right.private and left.unit is not None and right.unit is not None:
            for candidate in candidates:
                lk, rk = self._key_pair(candidate, left, both)
                if lk in left.unit_fields and rk in right.unit_fields:
                    chosen = candidate
                    break
        lk, rk = self._key_pair(chosen, left, both)
        return lk, rk, [c for c in conjuncts if c is not chosen]

    def _key_pair(self, on: exp.EQ, left: _Source, both: _Source) -> tuple[str, str]:
        """The field ids of an equality's two columns, the left side's first (checked)."""
        a = self.lookup(both.fields, on.this.table or None, on.this.name, on.this, "JOIN")
        b = self.lookup(
            both.fields, on.expression.table or None, on.expression.name, on.expression, "JOIN"
        )
        left_ids = {f.id for f in left.fields}
        if (a.id in left_ids) == (b.id in left_ids):
            raise self.error(
                "the join condition must compare a column of each side.",
                on,
                clause="JOIN",
                fix="write ON a.key = b.key.",
            )
        lf, rf = (a, b) if a.id in left_ids else (b, a)
        return lf.id, rf.id

    def lookup(
        self, fields: list[Field], qualifier: str | None, name: str, node: exp.Expr, clause: str
    ) -> Field:
        matches = [
            f
            for f in fields
            if f.name.lower() == name.lower()
            and (qualifier is None or (f.qualifier or "").lower() == qualifier.lower())
        ]
        if not matches:
            if qualifier and not any(
                (f.qualifier or "").lower() == qualifier.lower() for f in fields
            ):
                raise self.error(
                    f"unknown table or alias {qualifier!r}.",
                    node,
                    clause=clause,
                    fix=f"write just {name}.",
                )
            visible = sorted({f.name for f in fields if not _internal(f)})
            raise self.error(
                f"unknown column {name!r}.",
                node,
                clause=clause,
                fix=unknown_column_fix(node, name, visible),
            )
        if len(matches) > 1:
            quals = sorted({m.qualifier or "?" for m in matches})
            raise self.error(
                f"column {name!r} is ambiguous.",
                node,
                clause=clause,
                fix=f"qualify it: {' or '.join(f'{q}.{name}' for q in quals)}.",
            )
        return matches[0]

    def converter(self, source: _Source, extra: dict[str, FieldInfo] | None = None) -> Converter:
        infos = {f.id: _info(f) for f in source.fields}
        if extra:
            infos.update(extra)

        def resolve(node: exp.Column, clause: str) -> str:
            return self.lookup(source.fields, node.table or None, node.name, node, clause).id

        return Converter(self.error, infos, resolve)


def _plain_inner(join: exp.Join) -> bool:
    """Whether ``join`` is an inner join on ON conditions (``JOIN``/``INNER JOIN ... ON``)."""
    return (
        not join.args.get("side")
        and (join.args.get("kind") or "").upper() in ("", "INNER")
        and not join.args.get("using")
        and join.args.get("on") is not None
    )


def _rows_per_key(key: Field, side: _Source) -> int | None:
    """How many of ``side``'s rows of one unit share a value of ``key``: its table's declared
    ``join_rows_per_key``, times what private tables joined on that side multiply each of its
    rows by (the side's joined cap over the table's own; 1 for the table alone, or joined with
    one row per unit). ``None`` when the key declares none.
    """
    if key.join_rows_per_key is None or side.unit is None:
        return None
    caps = [
        t.privacy_unit.max_rows
        for t in side.tables
        if not t.public and isinstance(t.privacy_unit, IdUnit) and t.column(key.name) is not None
    ]
    if not caps:
        return None
    return key.join_rows_per_key * max(1, side.unit.max_rows // min(caps))


def _conjuncts(join: exp.Join) -> list[exp.Expr]:
    """The parts of a join's ON condition joined by AND."""
    on = join.args.get("on")
    if isinstance(on, exp.And):
        return list(on.flatten())
    return [on] if on is not None else []


def _column_equality(node: exp.Expr) -> bool:
    """Whether ``node`` is ``a = b`` between two columns (a candidate join key)."""
    return (
        isinstance(node, exp.EQ)
        and isinstance(node.this, exp.Column)
        and isinstance(node.expression, exp.Column)
    )


def _internal(field: Field) -> bool:
    """Fields Dalenius adds itself (the carried unit id, BigQuery's per-unit values)."""
    return field.name.startswith("__") or (field.qualifier or "").startswith("__")
