"""Binding ``[NOT] EXISTS`` and ``x [NOT] IN (SELECT ...)`` in WHERE: semi-joins.

Each keeps or drops the rows of the source it filters and never repeats one; it is admitted
where a row's fate depends on that row and public data, or on rows of its own privacy unit
(:class:`~dalenius.plan.nodes.SemiJoin` says why that keeps the sensitivity), and refused
otherwise with the correlation to add. The subquery's FROM is bound by the caller
(:mod:`.relations`), which hands a builder in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from sqlglot import exp

from dalenius.core.errors import QueryError
from dalenius.plan.expr import BinOp, Col, Expr, IsNull, children, columns, with_children
from dalenius.plan.nodes import Filter, Relation, Scan, SemiJoin, scans
from dalenius.sql import aggregates
from dalenius.sql.bind.base import _info, _Source
from dalenius.sql.bind.joins import _Joins
from dalenius.sql.expressions import Converter


class _SemiJoins(_Joins):
    """The subquery conditions of a WHERE clause."""

    def semi_join(
        self, outer: _Source, node: exp.Expr, bind_from: Callable[[exp.Select], _Source]
    ) -> _Source:
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
            inner = bind_from(bare)
            where = select.args.get("where")
            local, correlated, nodes = self.split_correlated(
                inner, outer, _and_parts(where.this) if where is not None else [], bind_from
            )
        finally:
            self.lookup_depth -= 1
        if local:
            inner.relation = Filter(inner.relation, _conjunction(local))
        operand, column = self.in_column(test, select, inner, outer)
        # pid IN (SELECT pid ...) is the correlation pid = pid, written as IN.
        keys = [BinOp("=", operand, Col(column))] if operand is not None and column else []
        on_unit = self.correlated_on_unit(outer, inner, [*correlated, *keys], test, nodes)
        supplied = self.reached_inside(outer, inner, correlated) if operand is None else None
        if supplied is not None:
            inner.relation, correlated = supplied
        relation = SemiJoin(
            outer.relation,
            inner.relation,
            _conjunction(correlated) if correlated else None,
            negated,
            operand,
            column,
            on_unit,
        )
        return _Source(
            relation, outer.fields, outer.unit, outer.tables + inner.tables, outer.also_unit
        )

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
        bind_from: Callable[[exp.Select], _Source],
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
                inner.relation = self.semi_join(inner, part, bind_from).relation
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

    def reached_inside(
        self, outer: _Source, inner: _Source, correlated: list[Expr]
    ) -> tuple[Relation, list[Expr]] | None:
        """An EXISTS subquery over a table that reaches its unit through a key of a table the
        outer query reads, correlated on both (``EXISTS (SELECT * FROM lineitem WHERE
        l_orderkey = o_orderkey AND l_custkey = o_custkey ...)``): the subquery's table read as
        stored, and its unit read as the outer row's (``None`` where that does not apply).

        Some line ``t`` with ``t.k = o.key`` whose reached unit equals ``o.u`` exists exactly
        when some line with ``t.k = o.key`` exists and ``o.u`` is not NULL: the outer row ``o``
        is itself a row of the other table with that key and unit, and any such row is one. So
        the engine need not join the other table into the subquery (docs/privacy.md, "A unit
        reached through a key"); whether an outer row is kept is unchanged, whatever the data.
        """
        relation, kept = inner.relation, None
        if isinstance(relation, Filter):
            kept, relation = relation, relation.child
        table = (
            next((t for t in inner.tables if t.name == relation.table), None)
            if isinstance(relation, Scan) and not relation.stored
            else None
        )
        reach = table.reach if table is not None else None
        if reach is None or not isinstance(relation, Scan):
            return None
        unit = next((f for f in relation.fields if f.unit), None)
        column = next((f for f in relation.fields if f.name.lower() == reach.column.lower()), None)
        if unit is None or column is None or (kept and unit.id in columns(kept.predicate)):
            return None
        equated = {
            frozenset((c.left.name, c.right.name))
            for c in correlated
            if isinstance(c, BinOp)
            and c.op == "="
            and isinstance(c.left, Col)
            and isinstance(c.right, Col)
        }
        exposed = {f.id for f in outer.fields}
        for scan in scans(outer.relation):
            theirs = {f.name.lower(): f for f in scan.fields}
            key, source = theirs.get(reach.key.lower()), theirs.get(reach.unit.lower())
            if (
                scan.table == reach.table
                and key is not None
                and source is not None
                and {key.id, source.id} <= exposed
                and {frozenset((column.id, key.id)), frozenset((unit.id, source.id))} <= equated
            ):
                stored = replace(relation, stored=True)
                read = replace(kept, child=stored) if kept is not None else stored
                return read, [_unit_read_as(c, unit.id, source.id) for c in correlated]
        return None

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
            # An id unit, or one row per unit from a per-unit subquery: either way each row's
            # unit is its field's value, and a per-unit row is computed from that unit's rows.
            if outer.unit is not None and outer.unit.kind != "row" and inner.unit.kind != "row"
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
        inner_unit = next(
            (f"{f.qualifier}.{f.name}" for f in inner.fields if f.id == inner.unit.field), None
        )
        outer_unit = next(
            (
                f"{f.qualifier}.{f.name}"
                for f in outer.fields
                if outer.unit is not None and f.id == outer.unit.field
            ),
            None,
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


def _unit_read_as(expr: Expr, unit: str, source: str) -> Expr:
    """``expr`` reading column ``source`` where it read ``unit``; an equality that then compares
    ``source`` with itself says only that it is not NULL (and is written so).
    """
    if isinstance(expr, Col):
        return replace(expr, name=source) if expr.name == unit else expr
    kids = [_unit_read_as(k, unit, source) for k in children(expr)]
    out = with_children(expr, kids) if kids else expr
    if isinstance(out, BinOp) and out.op == "=" and out.left == out.right == Col(source):
        return IsNull(out.left, negated=True)
    return out


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
