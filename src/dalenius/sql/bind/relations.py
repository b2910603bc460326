"""Binding what a query reads: FROM, WITH, joins, subqueries and per-unit subqueries.

Each builds a source (a relation and its privacy unit), refusing every shape whose rows could not
be tied back to a bounded contribution of one privacy unit. It builds on :mod:`.aggregates`
because a per-unit subquery (``GROUP BY pid``) aggregates.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Literal

from sqlglot import exp

from dalenius.core.catalog import Table
from dalenius.core.errors import QueryError
from dalenius.core.unit import IdUnit
from dalenius.plan.derive import FieldInfo, bounds_of, keys_of, per_unit_bounds, type_of
from dalenius.plan.expr import BinOp, Col, Expr, columns
from dalenius.plan.nodes import (
    AggCall,
    Field,
    Filter,
    Join,
    Project,
    Relation,
    Scan,
    SemiJoin,
    UnitAggregate,
    UnitSpec,
    with_fields,
)
from dalenius.sql import aggregates
from dalenius.sql.bind.aggregates import _Aggregates
from dalenius.sql.bind.base import MAX_UNIT_KEYS, _info, _Source
from dalenius.sql.expressions import Converter
from dalenius.sql.hints import did_you_mean, unknown_column_fix
from dalenius.sql.parse import DEFAULT_DIALECT

_SAFE = re.compile(r"[^A-Za-z0-9_]")


class _Relations(_Aggregates):
    """The FROM side of the binder: sources built from tables, joins and subqueries."""

    # -- FROM -----------------------------------------------------------------------------------

    def ctes(self, tree: exp.Select) -> dict[str, exp.Select]:
        with_ = tree.args.get("with_") or tree.args.get("with")
        if with_ is None:
            return {}
        if with_.args.get("recursive"):
            raise self.error(
                "WITH RECURSIVE is not supported.", with_, clause="WITH", fix="remove RECURSIVE."
            )
        out: dict[str, exp.Select] = {}
        for cte in with_.expressions:
            if not isinstance(cte.this, exp.Select):
                raise self.error(
                    "a WITH query must be a SELECT.", cte, clause="WITH", fix="use a plain SELECT."
                )
            out[cte.alias.lower()] = cte.this
        return out

    def from_clause(self, tree: exp.Select, ctes: dict[str, exp.Select]) -> _Source:
        from_ = tree.args.get("from_") or tree.args.get("from")
        if from_ is None:
            raise self.error(
                "the query reads no table.",
                None,
                clause="FROM",
                fix=f"add FROM with one of: {', '.join(self.catalog.table_names)}.",
            )
        source = self.source(from_.this, ctes)
        lifted: list[exp.Expr] = []
        joins: list[exp.Join] = tree.args.get("joins") or []
        if not source.private and joins and all(_plain_inner(j) for j in joins):
            # Public tables written first: the inner joins are re-ordered from the private table.
            source = self.rooted(source, joins, ctes, lifted)
        else:
            for join in joins:
                source = self.join(source, join, ctes, lifted)
        where = tree.args.get("where")
        parts = _and_parts(where.this) if where is not None else []
        tests = [p for p in parts if _subquery_test(p)]
        for test in tests:
            source = self.semi_join(source, test, ctes)
        rest = [p for p in parts if not any(p is t for t in tests)]
        if tests:
            parts = [_all_of(rest)] if rest else []
        else:
            parts = [where.this] if where is not None else []
        # An inner join's other ON conditions filter the joined rows, as WHERE does.
        conditions = [*lifted, *parts]
        for condition in conditions:
            converter = self.converter(source)
            predicate = converter.convert(condition, "WHERE")
            if converter.type_of(predicate, node=condition, clause="WHERE") not in (
                "bool",
                "null",
            ):
                raise self.error(
                    "the condition is not true/false.",
                    condition,
                    clause="WHERE",
                    fix="compare it with something, e.g. WHERE age >= 40",
                )
            source.relation = Filter(source.relation, predicate)
        return source

    def source(self, node: exp.Expr, ctes: dict[str, exp.Select]) -> _Source:
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            if node.args.get("db") or node.args.get("catalog"):
                raise self.error(
                    "qualified table names are not supported.",
                    node,
                    clause="FROM",
                    fix=f"write FROM {node.name}",
                )
            alias = node.alias or node.name
            cte = ctes.get(node.name.lower())
            if cte is not None:
                if node.name.lower() in self.building:
                    raise self.error(
                        f"the WITH query {node.name!r} refers to itself.",
                        node,
                        clause="WITH",
                        fix="read a catalog table inside the WITH query; recursion is not supported.",
                    )
                self.building.add(node.name.lower())
                try:
                    return self.subquery(cte, alias, ctes)
                finally:
                    self.building.discard(node.name.lower())
            table = self.catalog.table(node.name)
            if table is None:
                names = list(self.catalog.table_names) + sorted(ctes)
                raise self.error(
                    f"unknown table {node.name!r}.",
                    node,
                    clause="FROM",
                    fix=did_you_mean(node.name, names) + f"use one of: {', '.join(names)}.",
                )
            return self.scan(table, alias)
        if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select):
            if not node.alias:
                raise self.error(
                    "a subquery in FROM needs an alias.",
                    node,
                    clause="FROM",
                    fix="write (SELECT ...) AS t.",
                )
            return self.subquery(node.this, node.alias, ctes)
        raise self.error(
            "FROM takes a table, a WITH name, or a (SELECT ...) subquery.",
            node,
            clause="FROM",
            fix="select FROM a catalog table.",
        )

    def fresh_id(self, alias: str, name: str) -> str:
        base = _SAFE.sub("_", f"{alias}__{name}")
        candidate, n = base, 2
        while candidate in self.used_ids:
            candidate, n = f"{base}_{n}", n + 1
        self.used_ids.add(candidate)
        return candidate

    def scan(self, table: Table, alias: str) -> _Source:
        unit_col = table.privacy_unit.column if isinstance(table.privacy_unit, IdUnit) else None
        fields = [
            Field(
                id=self.fresh_id(alias, c.name),
                name=c.name,
                qualifier=alias,
                type=c.type,
                bounds=c.bounds,
                keys=c.keys,
                nullable=c.nullable,
                unit=unit_col is not None and c.name.lower() == unit_col.lower(),
            )
            for c in table.columns
        ]
        for f, c in zip(fields, table.columns, strict=True):
            if c.private_bounds is not None and c.bounds is None:
                self.private_bounds[f.id] = (table.name, c.name, c.private_bounds)
        relation = Scan(table=table.name, alias=alias, fields=tuple(fields))
        if table.public:
            return _Source(relation, fields, None, [table])
        unit = table.privacy_unit
        if isinstance(unit, IdUnit):
            unit_field = next(f.id for f in fields if f.unit)
            spec = UnitSpec(
                "id",
                unit_field,
                unit.max_rows,
                unit.max_groups,
                f"each {unit.column} of {table.name} (at most {_plural(unit.max_rows, 'row')} "
                f"in {_plural(unit.max_groups, 'group')} each)",
            )
        else:
            spec = UnitSpec("row", None, 1, 1, f"each row of {table.name}")
        return _Source(relation, fields, spec, [table])

    def join(
        self,
        left: _Source,
        join: exp.Join,
        ctes: dict[str, exp.Select],
        lifted: list[exp.Expr],
    ) -> _Source:
        """The source ``left`` joined with the table or subquery of ``join`` (refusing unsupported shapes).

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
        right = self.source(join.this, ctes)
        self.joinable(left, right, join)
        join_kind: Literal["inner", "left"] = "left" if side == "LEFT" else "inner"
        if join_kind == "left":
            # Rows without a match are extended with NULLs: nothing on the right is non-nullable.
            nullable = [replace(f, nullable=True) for f in right.fields]
            right = _Source(
                with_fields(right.relation, nullable), nullable, right.unit, right.tables
            )
        both = _Source(
            left.relation, left.fields + right.fields, left.unit, left.tables + right.tables
        )
        left_key, right_key, extra = self.join_keys(join, left, right, both)
        if extra and join_kind == "left":
            raise self.error(
                "a LEFT JOIN's ON takes one equality here.",
                join.args.get("on"),
                clause="JOIN",
                why="in a LEFT JOIN another ON condition does not drop rows, it only empties their "
                "match, so it cannot be read as a filter.",
                fix="use JOIN if the condition filters the joined rows, or move it to WHERE.",
            )
        lifted.extend(extra)
        return self.combine(left, right, left_key, right_key, join_kind, join)

    def public_only(self, source: _Source, node: exp.Expr | None) -> QueryError:
        """The refusal of a query that reads public tables alone (no privacy unit anywhere)."""
        names = ", ".join(dict.fromkeys(t.name for t in source.tables))
        return self.error(
            f"the query reads only public tables ({names}).",
            node,
            clause="FROM",
            why="their rows belong to no privacy unit: Dalenius answers questions about private "
            "tables, with noise paid from a budget, and has nothing to protect or charge here; "
            "public tables are read as they are, outside it.",
            fix="read the public tables where the custodian publishes them, or join them to a "
            "private table as lookups (FROM lineitem JOIN supplier ON ...).",
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
            relation, private.fields + public.fields, private.unit, private.tables + public.tables
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
        """Two private tables joined on their privacy unit (refused on anything else)."""
        assert left.unit is not None and right.unit is not None
        if (
            left.unit.kind != "id"
            or right.unit.kind != "id"
            or {left_key, right_key} != {left.unit.field, right.unit.field}
        ):
            raise self.error(
                "two private tables can only be joined on their privacy unit.",
                join,
                clause="JOIN",
                why="any other join can multiply one person's rows without limit.",
                fix="join on the id column both tables declare as privacy_unit, e.g. ON a.pid = b.pid.",
                privacy=True,
            )
        # One unit's rows multiply across the join: up to R_left × R_right joined rows, in
        # at most as many groups as either side allows (the engine enforces both caps).
        unit = replace(
            left.unit,
            max_rows=left.unit.max_rows * right.unit.max_rows,
            max_groups=max(left.unit.max_groups, right.unit.max_groups),
            description=f"{left.unit.description}, joined with {right.unit.description}",
        )
        relation = Join(left.relation, right.relation, left_key, right_key, join_kind)
        return _Source(relation, left.fields + right.fields, unit, left.tables + right.tables)

    def rooted(
        self,
        first: _Source,
        joins: list[exp.Join],
        ctes: dict[str, exp.Select],
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
        rights = [self.source(j.this, ctes) for j in joins]
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
            units = {left.unit.field, right.unit.field}
            for candidate in candidates:
                if set(self._key_pair(candidate, left, both)) == units:
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

    # -- EXISTS / IN (SELECT ...) in WHERE --------------------------------------------------------

    lookup_depth = 0
    """How many EXISTS / IN subqueries enclose the FROM being bound (public joins allowed there)."""

    def semi_join(self, outer: _Source, node: exp.Expr, ctes: dict[str, exp.Select]) -> _Source:
        """``outer`` filtered by ``[NOT] EXISTS (SELECT ...)`` or ``x [NOT] IN (SELECT c ...)``.

        The subquery's conditions that read ``outer``'s columns (correlated) decide, per row of
        ``outer``, whether a matching row exists; the others filter the subquery's rows first.
        Admitted where a row's fate depends on that row and public data (the subquery reads
        public tables only), or on rows of the row's own privacy unit (a private subquery
        correlated by ``inner.unit = outer.unit``): removing one unit then leaves every other
        unit's rows as they were, so the sensitivity is ``outer``'s. Anything else is refused.
        """
        negated, test = _unwrapped(node)
        select = test.this if isinstance(test, exp.Exists) else test.args["query"].this
        self.subquery_shape(select, test)
        self.lookup_depth += 1
        try:
            bare = select.copy()
            bare.set("where", None)
            inner = self.from_clause(bare, ctes)
            where = select.args.get("where")
            local, correlated, nodes = self.split_correlated(
                inner, outer, _and_parts(where.this) if where is not None else [], ctes
            )
        finally:
            self.lookup_depth -= 1
        if local:
            inner.relation = Filter(inner.relation, _conjunction(local))
        operand, column = self.in_column(test, select, inner, outer)
        # pid IN (SELECT pid ...) is the correlation pid = pid, written as IN.
        keys = [BinOp("=", operand, Col(column))] if operand is not None and column else []
        on_unit = self.correlated_on_unit(outer, inner, [*correlated, *keys], test, nodes)
        relation = SemiJoin(
            outer.relation,
            inner.relation,
            _conjunction(correlated) if correlated else None,
            negated,
            operand,
            column,
            on_unit,
        )
        return _Source(relation, outer.fields, outer.unit, outer.tables + inner.tables)

    def subquery_shape(self, select: exp.Expr, test: exp.Expr) -> None:
        """Refuse a subquery of EXISTS / IN that aggregates, sorts, limits or is not a SELECT."""
        if not isinstance(select, exp.Select):
            raise self.error(
                "EXISTS and IN take a SELECT here.", test, clause="WHERE", fix="write (SELECT ...)."
            )
        if not (select.args.get("from_") or select.args.get("from")):
            raise self.error(
                "the subquery reads no table.",
                test,
                clause="WHERE",
                fix="list the values, IN (1, 2), or read a table: IN (SELECT c FROM t).",
            )
        for key, clause in (
            ("group", "GROUP BY"),
            ("having", "HAVING"),
            ("order", "ORDER BY"),
            ("limit", "LIMIT"),
            ("offset", "OFFSET"),
            ("distinct", "DISTINCT"),
            ("with_", "WITH"),
        ):
            if select.args.get(key):
                raise self.error(
                    f"{clause} is not supported in an EXISTS or IN subquery.",
                    select.args[key],
                    clause="WHERE",
                    why="the subquery only says whether a matching row exists; grouped, sorted "
                    "or limited rows would make that depend on other rows.",
                    fix=f"remove {clause} from the subquery.",
                    privacy=key in ("group", "having"),
                )
        if any(
            aggregates.recognise(n) is not None
            for item in select.expressions
            for n in item.walk()
            if isinstance(n, exp.Expr)
        ):
            raise self.error(
                "an EXISTS or IN subquery cannot select an aggregate.",
                select,
                clause="WHERE",
                why="an aggregate over private rows is a value that has to be released first "
                "(EXISTS (SELECT COUNT(*) ...) is also always true).",
                fix="release the aggregate with its own query and write its value as a constant.",
                privacy=True,
            )

    def split_correlated(
        self,
        inner: _Source,
        outer: _Source,
        parts: list[exp.Expr],
        ctes: dict[str, exp.Select],
    ) -> tuple[list[Expr], list[Expr], list[exp.Expr]]:
        """The subquery's WHERE, split at AND: the parts reading only its own rows, and those
        reading ``outer``'s (with their SQL nodes). A name is looked up in the subquery's tables
        first, then in ``outer``'s, as SQL scopes it. A nested EXISTS / IN filters the
        subquery's rows, correlated with them alone.
        """
        local: list[Expr] = []
        correlated: list[Expr] = []
        nodes: list[exp.Expr] = []
        own = {f.id for f in inner.fields}
        infos = {f.id: _info(f) for f in [*inner.fields, *outer.fields]}

        def resolve(node: exp.Column, clause: str) -> str:
            try:
                return self.lookup(inner.fields, node.table or None, node.name, node, clause).id
            except QueryError as missing:
                # Not the subquery's: the outer query's, or the subquery's error stands.
                try:
                    return self.lookup(outer.fields, node.table or None, node.name, node, clause).id
                except QueryError:
                    raise missing from None

        converter = Converter(self.error, infos, resolve)
        for part in parts:
            if _subquery_test(part):
                inner.relation = self.semi_join(inner, part, ctes).relation
                continue
            predicate = converter.convert(part, "WHERE")
            if converter.type_of(predicate, node=part, clause="WHERE") not in ("bool", "null"):
                raise self.error(
                    "the condition is not true/false.",
                    part,
                    clause="WHERE",
                    fix="compare it with something, e.g. WHERE age >= 40",
                )
            if columns(predicate) <= own:
                local.append(predicate)
            else:
                correlated.append(predicate)
                nodes.append(part)
        return local, correlated, nodes

    def in_column(
        self, test: exp.Expr, select: exp.Select, inner: _Source, outer: _Source
    ) -> tuple[Expr | None, str | None]:
        """For ``x IN (SELECT c ...)``: ``x`` over ``outer`` and the field of ``c`` (one column,
        of ``x``'s type); for EXISTS, nothing (its select list only says that a row exists).
        """
        items = select.expressions
        if isinstance(test, exp.Exists):
            for item in items:
                if not isinstance(item, exp.Star | exp.Column | exp.Literal | exp.Alias):
                    raise self.error(
                        "EXISTS selects *, a constant or columns here.",
                        item,
                        clause="WHERE",
                        fix="write EXISTS (SELECT * FROM ...).",
                    )
            return None, None
        item = items[0] if len(items) == 1 else None
        node = item.this if isinstance(item, exp.Alias) else item
        if not isinstance(node, exp.Column):
            raise self.error(
                "IN (SELECT ...) selects one column here.",
                select,
                clause="WHERE",
                fix="write x IN (SELECT column FROM ...).",
            )
        field = self.lookup(inner.fields, node.table or None, node.name, node, "WHERE")
        operand = self.converter(outer).convert(test.this, "WHERE")
        kind = self.converter(outer).type_of(operand, node=test.this, clause="WHERE")
        if kind not in (field.type, "null"):
            raise self.error(
                f"IN compares a {kind} with a {field.type}.",
                test,
                clause="WHERE",
                why="the engine would convert one side, which can fail on some rows.",
                fix="compare values of the same type.",
            )
        return operand, field.id

    def correlated_on_unit(
        self,
        outer: _Source,
        inner: _Source,
        correlated: list[Expr],
        test: exp.Expr,
        nodes: list[exp.Expr],
    ) -> bool:
        """Whether a private subquery is correlated on the privacy unit (refused otherwise);
        ``False`` for a subquery of public tables, which needs no correlation.
        """
        if not inner.private:
            return False
        assert inner.unit is not None
        pair = (
            {inner.unit.field, outer.unit.field}
            if outer.unit is not None and outer.unit.kind == "id" and inner.unit.kind == "id"
            else None
        )
        if pair is not None and any(
            isinstance(c, BinOp)
            and c.op == "="
            and isinstance(c.left, Col)
            and isinstance(c.right, Col)
            and {c.left.name, c.right.name} == pair
            for c in correlated
        ):
            return True
        inner_unit = next((f.name for f in inner.fields if f.id == inner.unit.field), None)
        outer_unit = next(
            (f.name for f in outer.fields if outer.unit and f.id == outer.unit.field), None
        )
        kind = "EXISTS" if isinstance(test, exp.Exists) else "IN"
        raise self.error(
            f"an {kind} subquery over a private table must be correlated on the privacy unit.",
            nodes[0] if nodes else test,
            clause="WHERE",
            why="whether a row is kept would then depend on rows of other people, so removing "
            "one person could change the answer for many.",
            fix=(
                f"add AND {inner_unit} = {outer_unit} to the subquery's WHERE (rows of the same "
                "person), or read a public table in it."
                if inner_unit and outer_unit
                else "read a public table in the subquery, or join the private table on the "
                "privacy unit instead."
            ),
            privacy=True,
        )

    # -- subqueries -----------------------------------------------------------------------------

    def subquery(self, select: exp.Select, alias: str, ctes: dict[str, exp.Select]) -> _Source:
        for key, clause in (
            ("order", "ORDER BY"),
            ("limit", "LIMIT"),
            ("offset", "OFFSET"),
            ("distinct", "SELECT DISTINCT"),
        ):
            if select.args.get(key):
                raise self.error(
                    f"{clause} is not supported inside a subquery.",
                    select.args[key],
                    clause=clause,
                    why="it would make which rows count depend on the data.",
                    fix=f"remove {clause} from the subquery.",
                    privacy=key == "distinct",
                )
        inner_ctes = {**ctes, **self.ctes(select)}
        inner = self.from_clause(select, inner_ctes)
        has_aggregate = any(
            aggregates.recognise(n) is not None
            for item in select.expressions
            for n in item.walk()
            if isinstance(n, exp.Expr)
        )
        if select.args.get("group") is not None or has_aggregate:
            return self.per_unit(select, alias, inner)
        if select.args.get("having") is not None:
            raise self.error(
                "HAVING needs GROUP BY.", select.args["having"], clause="HAVING", fix="use WHERE."
            )
        return self.projection(select, alias, inner)

    def projection(self, select: exp.Select, alias: str, inner: _Source) -> _Source:
        """A non-aggregating SELECT over ``inner``, as a :class:`Project` source named ``alias``.

        Long because it resolves every kind of select item (star, column, expression, alias) and
        carries the privacy unit's field through the projection, refusing each shape that would lose
        it.
        """
        converter = self.converter(inner)
        infos = {f.id: _info(f) for f in inner.fields}
        fields: list[Field] = []
        exprs: list[Expr] = []
        for item in select.expressions:
            if isinstance(item, exp.Star):
                for f in inner.fields:
                    fields.append(replace(f, id=self.fresh_id(alias, f.name), qualifier=alias))
                    exprs.append(Col(f.id))
                continue
            node = item.this if isinstance(item, exp.Alias) else item
            if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
                raise self.error(
                    "t.* is not supported in a subquery.",
                    item,
                    clause="SELECT",
                    fix="list the columns.",
                )
            name = (
                item.alias
                if isinstance(item, exp.Alias)
                else (node.name if isinstance(node, exp.Column) else None)
            )
            if not name:
                raise self.error(
                    "a derived column in a subquery needs a name.",
                    item,
                    clause="SELECT",
                    fix="add AS name.",
                )
            expr = converter.convert(node, "SELECT")
            col_type = type_of(expr, infos)
            if isinstance(expr, Col):
                src = next(f for f in inner.fields if f.id == expr.name)
                fields.append(
                    replace(src, id=self.fresh_id(alias, name), name=name, qualifier=alias)
                )
            else:
                numeric = col_type in ("int", "float")
                fields.append(
                    Field(
                        id=self.fresh_id(alias, name),
                        name=name,
                        qualifier=alias,
                        type=col_type if col_type != "null" else "int",
                        bounds=bounds_of(expr, infos) if numeric else None,
                        keys=keys_of(expr, infos),
                        nullable=True,
                    )
                )
            exprs.append(expr)
        unit = inner.unit
        if (
            unit is not None
            and unit.field is not None
            and not any(isinstance(e, Col) and e.name == unit.field for e in exprs)
        ):
            # Carry the unit id along even when the SELECT list drops it.
            src = next(f for f in inner.fields if f.id == unit.field)
            fields.append(
                replace(src, id=self.fresh_id(alias, "__unit"), name="__unit", qualifier=alias)
            )
            exprs.append(Col(unit.field))
        if unit is not None and unit.field is not None:
            carried = next(
                f
                for f, e in zip(fields, exprs, strict=True)
                if isinstance(e, Col) and e.name == unit.field
            )
            unit = replace(unit, field=carried.id)
        relation = Project(inner.relation, tuple(fields), tuple(exprs))
        return _Source(relation, fields, unit, inner.tables)

    def unit_keys(
        self, items: list[exp.Expr], converter: Converter, inner: _Source, alias: str
    ) -> tuple[list[Expr], list[Field]]:
        """The group keys of a per-(unit, group) subquery, and the fields that expose them (with
        the public keys and bounds derived from the inner fields, as for derived columns).
        """
        infos = {f.id: _info(f) for f in inner.fields}
        exprs = [converter.convert(i, "GROUP BY") for i in items]
        fields = []
        for item, expr in zip(items, exprs, strict=True):
            name = item.name if isinstance(item, exp.Column) else item.sql(dialect=DEFAULT_DIALECT)
            col_type = type_of(expr, infos)
            fields.append(
                Field(
                    id=self.fresh_id(alias, name),
                    name=name,
                    qualifier=alias,
                    type=col_type,
                    bounds=bounds_of(expr, infos) if col_type in ("int", "float") else None,
                    keys=keys_of(expr, infos),
                    nullable=True,
                )
            )
        return exprs, fields

    def per_unit(self, select: exp.Select, alias: str, inner: _Source) -> _Source:
        """An aggregating subquery grouped by the privacy unit, as a :class:`UnitAggregate` source.

        Long because it checks an aggregating subquery's shape refusal by refusal (GROUP BY the unit
        alone, per-unit aggregates only, HAVING, DISTINCT), each with its message and fix, before
        building the UnitAggregate.
        """
        if inner.unit is None or inner.unit.kind != "id":
            raise self.error(
                "an aggregating subquery must group by the privacy unit of a table with an id privacy unit.",
                select,
                clause="GROUP BY",
                why="only a per-unit aggregate has a known bound on what one person contributes.",
                fix="aggregate in the outer query instead.",
                privacy=True,
            )
        group = select.args.get("group")
        unit_id = inner.unit.field
        items = list(group.expressions) if group is not None else []
        converter = self.converter(inner)
        unit_items = [
            i
            for i in items
            if isinstance(i, exp.Column) and converter.convert(i, "GROUP BY") == Col(unit_id or "")
        ]
        if len(unit_items) != 1 or len(items) - 1 > MAX_UNIT_KEYS:
            unit_name = next(f.name for f in inner.fields if f.id == unit_id)
            raise self.error(
                f"an aggregating subquery must GROUP BY the privacy unit ({unit_name}), alone or "
                f"with up to {MAX_UNIT_KEYS} group keys.",
                group or select,
                clause="GROUP BY",
                why="then the outer query sees each person once per group, with bounded values.",
                fix=f"write GROUP BY {unit_name} (or GROUP BY {unit_name}, key).",
                privacy=True,
            )
        key_exprs, key_fields = self.unit_keys(
            [i for i in items if i is not unit_items[0]], converter, inner, alias
        )
        rows = inner.unit.max_rows
        fields: list[Field] = []
        calls: list[AggCall] = []
        unit_src = next(f for f in inner.fields if f.id == unit_id)
        unit_field = replace(unit_src, id=self.fresh_id(alias, unit_src.name), qualifier=alias)
        for item in select.expressions:
            node = item.this if isinstance(item, exp.Alias) else item
            if isinstance(node, exp.Column) and converter.convert(node, "SELECT") == Col(
                unit_id or ""
            ):
                unit_field = replace(
                    unit_field, name=item.alias if isinstance(item, exp.Alias) else unit_src.name
                )
                continue
            if aggregates.recognise(node) is None and key_exprs:
                converted = converter.convert(node, "SELECT")
                if converted in key_exprs:
                    k = key_exprs.index(converted)
                    if isinstance(item, exp.Alias):
                        key_fields[k] = replace(key_fields[k], name=item.alias)
                    continue
            call = aggregates.recognise(node)
            if (
                call is None
                or call.func not in ("count", "sum", "avg", "min", "max")
                or call.distinct
            ):
                raise self.error(
                    "a per-unit subquery may select the unit and COUNT, SUM, AVG, MIN or MAX.",
                    node,
                    clause="SELECT",
                    fix="compute other statistics in the outer query.",
                )
            if not isinstance(item, exp.Alias):
                raise self.error(
                    "a per-unit aggregate needs a name.", item, clause="SELECT", fix="add AS name."
                )
            agg = self.agg_call(call, node, inner, converter, "SELECT")
            bounds = per_unit_bounds(call.func, agg.bounds, rows)
            col_type = (
                "int" if call.func == "count" else agg.arg_type if call.func != "avg" else "float"
            )
            calls.append(replace(agg, bounds=bounds))
            fields.append(
                Field(
                    id=self.fresh_id(alias, item.alias),
                    name=item.alias,
                    qualifier=alias,
                    type=col_type,
                    bounds=bounds,
                    nullable=True,
                )
            )
        unit_field = replace(unit_field, unit=True)
        out_fields = [unit_field, *key_fields, *fields]
        relation: Relation = UnitAggregate(
            inner.relation, unit_id or "", tuple(out_fields), tuple(calls), tuple(key_exprs)
        )
        groups = inner.unit.max_groups
        # Per (unit, group): one row per group a unit holds, bounded as BigQuery's per-unit form
        # is (plan.rewrite.bigquery_per_unit): at most max_groups rows, in as many groups.
        unit = (
            UnitSpec(
                "id",
                unit_field.id,
                groups,
                groups,
                f"{inner.unit.description}; one row per unit and group after {alias}",
            )
            if key_exprs
            else UnitSpec(
                "aggregated",
                unit_field.id,
                1,
                1,
                f"{inner.unit.description}; one row per unit after {alias}",
            )
        )
        source = _Source(relation, out_fields, unit, inner.tables)
        having = select.args.get("having")
        if having is not None:
            predicate = self.converter(source).convert(having.this, "HAVING")
            source.relation = Filter(source.relation, predicate)
        return source


def _and_parts(node: exp.Expr) -> list[exp.Expr]:
    """The parts of a condition joined by AND (brackets around a part kept)."""
    return list(node.flatten()) if isinstance(node, exp.And) else [node]


def _all_of(parts: list[exp.Expr]) -> exp.Expr:
    """The SQL conjunction of ``parts`` (one part: itself)."""
    out = parts[0]
    for part in parts[1:]:
        out = exp.And(this=out, expression=part)
    return out


def _conjunction(parts: list[Expr]) -> Expr:
    """The plan conjunction of ``parts`` (one part: itself)."""
    out = parts[0]
    for part in parts[1:]:
        out = BinOp("AND", out, part)
    return out


def _unwrapped(node: exp.Expr) -> tuple[bool, exp.Expr]:
    """``[NOT] EXISTS`` / ``[NOT] IN (SELECT ...)`` without its NOTs and brackets: (negated, test)."""
    negated = False
    while isinstance(node, exp.Not | exp.Paren):
        negated ^= isinstance(node, exp.Not)
        node = node.this
    return negated, node


def _subquery_test(node: exp.Expr) -> bool:
    """Whether ``node`` is ``[NOT] EXISTS (...)`` or ``x [NOT] IN (SELECT ...)``."""
    _, test = _unwrapped(node)
    return isinstance(test, exp.Exists) or (
        isinstance(test, exp.In) and test.args.get("query") is not None
    )


def _plain_inner(join: exp.Join) -> bool:
    """Whether ``join`` is an inner join on ON conditions (``JOIN``/``INNER JOIN ... ON``)."""
    return (
        not join.args.get("side")
        and (join.args.get("kind") or "").upper() in ("", "INNER")
        and not join.args.get("using")
        and join.args.get("on") is not None
    )


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


def _plural(n: int, noun: str) -> str:
    """``1 row``, ``5 rows``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
