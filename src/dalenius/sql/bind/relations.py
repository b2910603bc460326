"""Binding what a query reads: FROM, WITH, subqueries and per-unit subqueries.

Each builds a source (a relation and its privacy unit), refusing every shape whose rows could not
be tied back to a bounded contribution of one privacy unit. It builds on :mod:`.semijoins` (the
EXISTS / IN conditions of WHERE), :mod:`.joins` (the join shapes) and :mod:`.aggregates` (a
per-unit subquery, ``GROUP BY pid``, aggregates), handing them its builder of sources.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import partial

from sqlglot import exp

from dalenius.core.catalog import Table
from dalenius.core.unit import IdUnit
from dalenius.plan.derive import bounds_of, keys_of, per_unit_bounds, type_of
from dalenius.plan.expr import Col, Expr
from dalenius.plan.nodes import (
    AggCall,
    Field,
    Filter,
    Project,
    Relation,
    Scan,
    UnitAggregate,
    UnitSpec,
)
from dalenius.sql import aggregates
from dalenius.sql.bind.base import MAX_UNIT_KEYS, _info, _Source
from dalenius.sql.bind.joins import _plain_inner
from dalenius.sql.bind.semijoins import _all_of, _and_parts, _SemiJoins, _subquery_test
from dalenius.sql.expressions import Converter
from dalenius.sql.hints import did_you_mean
from dalenius.sql.parse import DEFAULT_DIALECT

_SAFE = re.compile(r"[^A-Za-z0-9_]")


class _Relations(_SemiJoins):
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
        build = partial(self.source, ctes=ctes)
        lifted: list[exp.Expr] = []
        joins: list[exp.Join] = tree.args.get("joins") or []
        if not source.private and joins and all(_plain_inner(j) for j in joins):
            # Public tables written first: the inner joins are re-ordered from the private table.
            source = self.rooted(source, joins, build, lifted)
        else:
            for join in joins:
                source = self.join(source, join, build, lifted)
        where = tree.args.get("where")
        parts = _and_parts(where.this) if where is not None else []
        tests = [p for p in parts if _subquery_test(p)]
        rest = [p for p in parts if not any(p is t for t in tests)]
        # An inner join's other ON conditions filter the joined rows, as WHERE does; both come
        # before any EXISTS / IN, so the engine joins on them (the second equality of lineitem ⋈
        # orders) and decides the subquery only for the rows they keep (an engine does not
        # always push a filter below a correlated subquery: TPC-H Q21 took six times longer).
        for condition in lifted:
            source.relation = Filter(source.relation, self.condition(source, condition))
        if where is not None and (rest or not tests):
            condition = _all_of(rest) if tests else where.this
            source.relation = Filter(source.relation, self.condition(source, condition))
        for test in tests:
            source = self.semi_join(source, test, partial(self.from_clause, ctes=ctes))
        return source

    def condition(self, source: _Source, node: exp.Expr) -> Expr:
        """A WHERE (or lifted ON) condition over ``source``, checked to be true/false."""
        converter = self.converter(source)
        predicate = converter.convert(node, "WHERE")
        if converter.type_of(predicate, node=node, clause="WHERE") not in ("bool", "null"):
            raise self.error(
                "the condition is not true/false.",
                node,
                clause="WHERE",
                fix="compare it with something, e.g. WHERE age >= 40",
            )
        return predicate

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
                join_rows_per_key=c.join_rows_per_key,
                per_unit=c.per_unit,
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
                f"each {unit.column} of {table.name}"
                + (f", reached through {unit.through.describe()}" if unit.through else "")
                + f" (at most {_plural(unit.max_rows, 'row')} "
                f"in {_plural(unit.max_groups, 'group')} each)",
            )
        else:
            spec = UnitSpec("row", None, 1, 1, f"each row of {table.name}")
        return _Source(relation, fields, spec, [table])

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


def _plural(n: int, noun: str) -> str:
    """``1 row``, ``5 rows``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
