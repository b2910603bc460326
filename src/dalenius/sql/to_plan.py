"""The binder: validate an analyst's query against the catalog and build its logical plan.

It resolves names, checks types and builds relations into a :class:`~dalenius.plan.nodes.Query`;
what turns one plan into another is a rule of :mod:`dalenius.plan.rewrite`, which
:func:`to_query` applies before returning (BigQuery's per-unit semantics among them).

Everything here happens before any data is read, so every refusal is independent of the data and
costs nothing; each names the clause, says why, and proposes a rewrite. What is accepted:

* ``FROM`` a private table, optionally joined to public tables (on one equality) or to another
  private table on the privacy unit; subqueries and ``WITH`` in ``FROM`` that keep each row's link
  to its unit (filters, derived columns), or aggregate per unit (``GROUP BY pid``), whose results
  the outer query aggregates again.
* ``WHERE`` on any columns; ``GROUP BY`` columns or expressions — with public keys (declared, or
  derived from public bounds and key lists) every key is answered, otherwise groups are selected
  privately (which needs δ > 0).
* Aggregates (see :data:`dalenius.sql.aggregates.SUPPORTED`) over expressions whose bounds can be
  derived, with post-processing around them (``ROUND(AVG(x), 1)``), ``HAVING``, ``ORDER BY``,
  ``LIMIT``/``OFFSET`` — all applied to the noisy answers.
* BigQuery's ``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (...)``, see :mod:`dalenius.sql.bigquery`
  (the clause) and :mod:`dalenius.plan.rewrite.bigquery_per_unit` (its semantics).
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Literal

from sqlglot import exp

from dalenius.core.catalog import Catalog, Table
from dalenius.core.errors import PrivacyRefusal, QueryError
from dalenius.core.loss import as_fraction
from dalenius.core.unit import IdUnit
from dalenius.plan.derive import (
    FieldInfo,
    bounds_of,
    key_conditions,
    keys_of,
    per_unit_bounds,
    type_of,
)
from dalenius.plan.expr import (
    AggRef,
    BinOp,
    Case,
    Col,
    Expr,
    Func,
    KeyRef,
    Neg,
    aggregates_read,
    children,
    columns,
    references,
    walk,
    with_children,
)
from dalenius.plan.functions import POST_FUNCTIONS
from dalenius.plan.nodes import (
    AggCall,
    Field,
    Filter,
    GroupKey,
    Join,
    OrderItem,
    OutputColumn,
    Project,
    Query,
    Relation,
    Scan,
    UnitAggregate,
    UnitSpec,
    agg_ref,
    key_ref,
    with_fields,
)
from dalenius.plan.rewrite import BigQueryOptions, Context, rewrite
from dalenius.sql import aggregates, bigquery, validate
from dalenius.sql.expressions import Converter, written_name
from dalenius.sql.parse import DEFAULT_DIALECT, parse, span_of

MAX_GROUP_CELLS = 100_000
"""Most groups a GROUP BY with public keys may produce (the product of the key lists' sizes)."""

MAX_GROUPS_CONTRIBUTED = 1_000_000
"""Largest ``max_groups_contributed``: the noise grows with it, and past this it drowns any answer."""


@dataclass(frozen=True)
class Options:
    """Privacy parameters given inside the SQL (BigQuery syntax), if any."""

    epsilon: Fraction | None = None
    delta: Fraction | None = None
    max_groups: int | None = None
    unit_column: str | None = None


@dataclass(frozen=True)
class Resolved:
    """A validated query: its logical plan, the tables it reads, and in-SQL privacy options."""

    query: Query
    tables: tuple[Table, ...]
    options: Options = Options()

    @property
    def table(self) -> Table:
        """The (first) private table the query reads."""
        return self.tables[0]


def to_query(sql: str, catalog: Catalog, dialect: str = DEFAULT_DIALECT) -> Resolved:
    """Parse and validate ``sql`` against ``catalog``; build its logical plan.

    Raises:
        QueryError: for syntax errors, unknown names and unsupported constructs.
        PrivacyRefusal: for constructs whose privacy cost cannot be bounded.

    Example:
        >>> from dalenius.core.catalog import parse_catalog
        >>> cat = parse_catalog('''
        ... [tables.t]
        ... source = { csv = "/dev/null" }
        ... privacy_unit = "row"
        ... columns = { age = { type = "int", bounds = [0, 100] } }
        ... ''')
        >>> [a.label for a in to_query("SELECT COUNT(*), AVG(age) FROM t", cat).query.aggregates]
        ['COUNT(*)', 'AVG(age)']
    """
    extracted = bigquery.extract(sql)
    tree = parse(extracted.sql, "bigquery" if extracted.enabled else dialect)
    return _Planner(sql, catalog, extracted).build(tree)


# -- sources under construction -----------------------------------------------------------------


@dataclass
class _Source:
    relation: Relation
    fields: list[Field]
    unit: UnitSpec | None  # None: public
    tables: list[Table] = field(default_factory=list)

    @property
    def private(self) -> bool:
        return self.unit is not None


def _info(f: Field) -> FieldInfo:
    return FieldInfo(f.type, f.bounds, f.keys, f.nullable)


_SAFE = re.compile(r"[^A-Za-z0-9_]")


class _Planner:
    def __init__(self, sql: str, catalog: Catalog, extracted: bigquery.Extracted) -> None:
        self.sql = sql
        self.catalog = catalog
        self.extracted = extracted
        self.used_ids: set[str] = set()
        self.explicit_per_unit: dict[int, tuple[Fraction, Fraction]] = {}
        self.building: set[str] = set()

    # -- errors ---------------------------------------------------------------------------------

    def error(
        self,
        what: str,
        node: exp.Expr | None,
        *,
        clause: str,
        fix: str,
        why: str | None = None,
        privacy: bool = False,
    ) -> QueryError:
        cls = PrivacyRefusal if privacy else QueryError
        span = span_of(node, self.sql) if node is not None else None
        if span is None:
            span = validate.clause_span(self.sql, clause)
        return cls(what, clause=clause, sql=self.sql, span=span, why=why, fix=fix)

    # -- the statement --------------------------------------------------------------------------

    def build(self, tree: exp.Expr) -> Resolved:
        if not isinstance(tree, exp.Select):
            kind = type(tree).__name__.upper()
            raise self.error(
                f"only SELECT queries can be answered, not {kind}.",
                None,
                clause="statement",
                fix="write a SELECT with aggregates, e.g. SELECT COUNT(*) FROM adult",
            )
        options = self.options()
        ctes = self.ctes(tree)
        source = self.from_clause(tree, ctes)
        if not source.private:
            raise self.error(
                "the query reads only public tables.",
                tree.args.get("from_") or tree.args.get("from"),
                clause="FROM",
                fix="query public tables directly: they need no privacy protection.",
            )
        if options.unit_column is not None:
            self.check_unit_option(source, options.unit_column)
        if options.max_groups is not None and source.unit is not None and source.unit.kind == "id":
            source.unit = replace(source.unit, max_groups=options.max_groups)
        if self.extracted.bounds and not self.extracted.enabled:
            raise self.error(
                "contribution_bounds_per_group belongs to SELECT WITH DIFFERENTIAL_PRIVACY queries.",
                None,
                clause="SELECT",
                fix="add WITH DIFFERENTIAL_PRIVACY OPTIONS (...) after SELECT, or drop the bounds.",
            )
        query = self.aggregate_query(tree, source, top=True)
        context = Context(
            bigquery=BigQueryOptions(self.explicit_per_unit, self.fresh_id)
            if self.extracted.enabled
            else None
        )
        try:
            query = rewrite(query, context)
        except QueryError as exc:  # a rule's refusal: point at its clause
            raise validate.located(exc, self.sql) from None
        return Resolved(query=query, tables=tuple(source.tables), options=options)

    def options(self) -> Options:
        raw = self.extracted.options
        if not self.extracted.enabled:
            return Options()
        clause = "WITH DIFFERENTIAL_PRIVACY"
        epsilon = delta = None
        if "epsilon" in raw:
            epsilon = as_fraction(raw["epsilon"], "epsilon")
        if "delta" in raw:
            delta = as_fraction(raw["delta"], "delta", allow_zero=True)
        max_groups = None
        if "max_groups_contributed" in raw:
            text = raw["max_groups_contributed"]
            max_groups = int(text) if text.isdigit() and len(text) <= 9 else 0
            if not 1 <= max_groups <= MAX_GROUPS_CONTRIBUTED:
                shown = text if len(text) <= 30 else f"{text[:20]}..."
                raise self.error(
                    "max_groups_contributed must be a whole number from 1 to "
                    f"{MAX_GROUPS_CONTRIBUTED:,}, got {shown!r}.",
                    None,
                    clause=clause,
                    fix="write max_groups_contributed = 1.",
                )
        return Options(
            epsilon=epsilon,
            delta=delta,
            max_groups=max_groups,
            unit_column=raw.get("privacy_unit_column"),
        )

    def check_unit_option(self, source: _Source, column: str) -> None:
        assert source.unit is not None
        unit_field = next((f for f in source.fields if f.id == source.unit.field), None)
        if unit_field is None or unit_field.name.lower() != column.lower():
            declared = unit_field.name if unit_field else "one row"
            raise self.error(
                f"privacy_unit_column = {column} does not match the catalog's privacy unit ({declared}).",
                None,
                clause="WITH DIFFERENTIAL_PRIVACY",
                why="the custodian declares what a privacy unit is; a query cannot choose another.",
                fix=f"write privacy_unit_column = {declared}, or leave the option out."
                if unit_field
                else "leave privacy_unit_column out: this table protects each row.",
                privacy=True,
            )

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
        for join in tree.args.get("joins") or []:
            source = self.join(source, join, ctes)
        where = tree.args.get("where")
        if where is not None:
            converter = self.converter(source)
            predicate = converter.convert(where.this, "WHERE")
            if converter.type_of(predicate, node=where.this, clause="WHERE") not in (
                "bool",
                "null",
            ):
                raise self.error(
                    "the condition is not true/false.",
                    where.this,
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
                    fix=f"use one of: {', '.join(names)}.",
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

    def join(self, left: _Source, join: exp.Join, ctes: dict[str, exp.Select]) -> _Source:
        """The source ``left`` joined with the table or subquery of ``join`` (refusing unsupported shapes).

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
        left_key, right_key = self.join_keys(join, left, right, both)
        if left.private and right.private:
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
            relation: Relation = Join(left.relation, right.relation, left_key, right_key, join_kind)
            return _Source(relation, both.fields, unit, both.tables)
        if not left.private and not right.private:
            raise self.error(
                "joining two public tables is not supported.",
                join,
                clause="JOIN",
                fix="join each public table to the private table directly.",
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

    def join_keys(
        self, join: exp.Join, left: _Source, right: _Source, both: _Source
    ) -> tuple[str, str]:
        using = join.args.get("using")
        if using:
            if len(using) != 1:
                raise self.error(
                    "USING takes one column here.", join, clause="JOIN", fix="join on one column."
                )
            name = using[0].name
            lf = self.lookup(left.fields, None, name, using[0], "JOIN")
            rf = self.lookup(right.fields, None, name, using[0], "JOIN")
            return lf.id, rf.id
        on = join.args.get("on")
        if (
            not isinstance(on, exp.EQ)
            or not isinstance(on.this, exp.Column)
            or not isinstance(on.expression, exp.Column)
        ):
            raise self.error(
                "a join needs one equality between a column of each side.",
                on if on is not None else join,
                clause="JOIN",
                why="other join conditions can match one row with arbitrarily many.",
                fix="write ON a.key = b.key.",
            )
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
        if lf.type != rf.type:
            raise self.error(
                f"the join compares a {lf.type} with a {rf.type}.",
                on,
                clause="JOIN",
                why="the engine would convert one side, and converted values can collide (many keys "
                "matching one), multiplying rows beyond what was measured.",
                fix="join columns of the same type.",
            )
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
                fix=f"use one of: {', '.join(visible)}.",
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
        ok = (
            len(items) == 1
            and isinstance(items[0], exp.Column)
            and converter.convert(items[0], "GROUP BY") == Col(unit_id or "")
        )
        if not ok:
            unit_name = next(f.name for f in inner.fields if f.id == unit_id)
            raise self.error(
                f"an aggregating subquery must GROUP BY the privacy unit ({unit_name}) alone.",
                group or select,
                clause="GROUP BY",
                why="then the outer query sees each person once, with a bounded value.",
                fix=f"write GROUP BY {unit_name}.",
                privacy=True,
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
        out_fields = [unit_field, *fields]
        relation: Relation = UnitAggregate(
            inner.relation, unit_id or "", tuple(out_fields), tuple(calls)
        )
        unit = UnitSpec(
            "aggregated",
            unit_field.id,
            1,
            1,
            f"{inner.unit.description}; one row per unit after {alias}",
        )
        source = _Source(relation, out_fields, unit, inner.tables)
        having = select.args.get("having")
        if having is not None:
            predicate = self.converter(source).convert(having.this, "HAVING")
            source.relation = Filter(source.relation, predicate)
        return source

    # -- the aggregate query --------------------------------------------------------------------

    def aggregate_query(self, tree: exp.Select, source: _Source, *, top: bool) -> Query:
        assert source.unit is not None
        if tree.args.get("distinct") is not None:
            raise self.error(
                "SELECT DISTINCT lists individual values.",
                tree.args["distinct"],
                clause="SELECT",
                why="distinct values can reveal a single person's data; only aggregates are released.",
                fix="use GROUP BY and COUNT(*).",
                privacy=True,
            )
        state = _State(self, source)
        state.group_by(tree)
        state.select_list(tree)
        state.having(tree)
        state.order_by(tree)
        limit, offset = self.limit(tree)
        if not state.aggs:
            raise self.error(
                "the query selects no aggregate.",
                tree.expressions[0] if tree.expressions else None,
                clause="SELECT",
                why="only aggregates over many rows are released, never individual rows.",
                fix=f"select an aggregate: {aggregates.SUPPORTED}.",
                privacy=True,
            )
        return Query(
            relation=source.relation,
            unit=source.unit,
            group_by=tuple(state.keys),
            aggregates=tuple(state.aggs),
            outputs=tuple(state.outputs),
            having=state.having_expr,
            order_by=tuple(state.order),
            limit=limit,
            offset=offset,
        )

    def limit(self, tree: exp.Select) -> tuple[int | None, int]:
        def number(node: exp.Expr | None, clause: str) -> int | None:
            if node is None:
                return None
            value = node.expression if isinstance(node, exp.Limit | exp.Offset) else node
            if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
                return int(value.this)
            raise self.error(
                f"{clause} takes a non-negative integer.",
                node,
                clause=clause,
                fix=f"write {clause} 10.",
            )

        limit = number(tree.args.get("limit"), "LIMIT")
        offset = number(tree.args.get("offset"), "OFFSET") or 0
        return limit, offset

    def agg_call(
        self,
        call: aggregates.Call,
        node: exp.Expr,
        source: _Source,
        converter: Converter,
        clause: str,
    ) -> AggCall:
        """Validate one aggregate call and derive its argument's bounds.

        Long because each aggregate's rules (COUNT, DISTINCT, a numeric argument, explicit bounds,
        quantiles, magnitudes) are refusals with their own message and fix, checked in order on the
        same derived argument.
        """
        assert source.unit is not None
        label = node.sql(dialect=DEFAULT_DIALECT)
        infos = converter.fields
        arg: Expr | None = None
        arg_type = "int"
        if call.arg is not None:
            if any(
                aggregates.recognise(n) is not None
                for n in call.arg.walk()
                if isinstance(n, exp.Expr)
            ):
                raise self.error(
                    "aggregates cannot be nested.", node, clause=clause, fix="aggregate once."
                )
            arg = converter.convert(call.arg, clause)
            arg_type = type_of(arg, infos)
        if call.func == "count":
            if call.distinct:
                if arg is None:
                    raise self.error(
                        "COUNT(DISTINCT ...) takes one expression.",
                        node,
                        clause=clause,
                        fix="write COUNT(DISTINCT pid).",
                    )
                unit_field = source.unit.field
                return AggCall(
                    "count_distinct",
                    arg,
                    arg_type,
                    None,
                    None,
                    label,
                    distinct_unit=arg == Col(unit_field or ""),
                )
            return AggCall("count", arg, arg_type, None, None, label)
        if call.distinct:
            raise self.error(
                f"{call.name}(DISTINCT ...) is not supported.",
                node,
                clause=clause,
                fix=f"write {call.name}(x).",
            )
        assert arg is not None and call.arg is not None
        if arg_type not in ("int", "float"):
            raise self.error(
                f"{call.name} needs a numeric argument; {call.arg.sql()} is {arg_type}.",
                node,
                clause=clause,
                fix="aggregate a numeric column, or COUNT it.",
            )
        explicit = self.explicit_bounds(node)
        if explicit is not None and call.func in ("sum", "avg") and source.unit.kind == "id":
            # BigQuery semantics: these bound the per-unit total or average, not each value.
            explicit = None if bounds_of(arg, infos) is not None else explicit
        bounds = explicit or bounds_of(arg, infos)
        if bounds is None:
            unbounded = sorted(
                f.name
                for f in source.fields
                if f.id in columns(arg)
                and infos[f.id].bounds is None
                and infos[f.id].type != "bool"
            )
            names = ", ".join(repr(n) for n in unbounded) or "the expression"
            raise self.error(
                f"the bounds of {call.arg.sql()} cannot be derived ({names} has no public bounds).",
                node,
                clause=clause,
                why="an unbounded value lets one person move the answer arbitrarily far, so no noise level protects it.",
                fix="ask the custodian to declare bounds for "
                + (names if unbounded else "the columns")
                + " in the catalog, or aggregate a bounded expression.",
                privacy=True,
            )
        self.check_magnitude(arg, bounds, infos, node, clause)
        q: Fraction | None = None
        func = call.func
        if func == "quantile":
            q = aggregates.quantile_value(call.q)
            if q is None:
                raise self.error(
                    "the quantile must be a number between 0 and 1.",
                    node,
                    clause=clause,
                    fix="write QUANTILE(x, 0.5).",
                )
            if call.descending:
                q = 1 - q
        return AggCall(func, arg, arg_type, bounds, q, label)  # type: ignore[arg-type]

    def check_magnitude(
        self,
        arg: Expr,
        bounds: tuple[Fraction, Fraction],
        infos: dict[str, FieldInfo] | Mapping[str, FieldInfo],
        node: exp.Expr,
        clause: str,
    ) -> None:
        """Refuse an aggregate whose values (or any part of them) may exceed MAX_MAGNITUDE."""
        # Products are where magnitudes explode (a chain of 60 incomes); sums grow only linearly
        # in the (bounded) query size. Checking only them keeps this linear in the query.
        products = (s for s in _value_path(arg) if isinstance(s, BinOp) and s.op in ("*", "/"))
        parts = itertools.chain([bounds], (bounds_of(sub, infos) for sub in products))
        for part in parts:  # the whole expression first: most refusals stop there
            widest = max(abs(part[0]), abs(part[1])) if part is not None else Fraction(0)
            if widest > validate.MAX_MAGNITUDE:
                break
        else:
            return
        if widest > validate.MAX_MAGNITUDE:
            raise self.error(
                f"the values aggregated may reach {_magnitude(widest)}, beyond the largest "
                f"accepted ({float(validate.MAX_MAGNITUDE):.0e}).",
                node,
                clause=clause,
                why="such values cannot be summed exactly, or overflow the engine's numbers.",
                fix="aggregate a smaller expression, or pass tighter contribution bounds.",
            )

    def explicit_bounds(self, node: exp.Expr) -> tuple[Fraction, Fraction] | None:
        """``contribution_bounds_per_group`` written on this aggregate call, if any."""
        start = node.meta.get("start")
        return self.extracted.bounds.get(start) if isinstance(start, int) else None


class _State:
    """Group keys, aggregates and outputs of one aggregate query, built clause by clause."""

    def __init__(self, planner: _Planner, source: _Source) -> None:
        self.p = planner
        self.source = source
        self.infos = {f.id: _info(f) for f in source.fields}
        # The WHERE every grouped row passed: keys it excludes form no group (derive.keys_of).
        top = source.relation
        self.where = key_conditions(top.predicate if isinstance(top, Filter) else None, self.infos)
        self.keys: list[GroupKey] = []
        self.key_nodes: list[exp.Expr] = []
        self.aggs: list[AggCall] = []
        self.outputs: list[OutputColumn] = []
        self.having_expr: Expr | None = None
        self.order: list[OrderItem] = []
        self.select_aliases: dict[str, exp.Expr] = {}
        self.converter = planner.converter(source)

    def error(self, *args: object, **kwargs: object) -> QueryError:
        return self.p.error(*args, **kwargs)  # type: ignore[arg-type]

    # -- GROUP BY ----------------------------------------------------------------------------------

    def group_by(self, tree: exp.Select) -> None:
        group = tree.args.get("group")
        select_items = list(tree.expressions)
        for item in select_items:
            if isinstance(item, exp.Alias):
                self.select_aliases[item.alias.lower()] = item.this
        if group is None:
            return
        cells = 1
        for item in group.expressions:
            node = item
            if isinstance(item, exp.Literal) and not item.is_string:
                position = int(item.this)
                if not 1 <= position <= len(select_items):
                    raise self.error(
                        f"GROUP BY {position} does not name a SELECT column.",
                        item,
                        clause="GROUP BY",
                        fix=f"use a position between 1 and {len(select_items)}, or a column name.",
                    )
                node = select_items[position - 1]
                node = node.this if isinstance(node, exp.Alias) else node
            elif self.is_select_alias(item):
                # A SELECT alias (a column of the same name would take precedence).
                node = self.select_aliases[item.name.lower()]
            if any(
                aggregates.recognise(n) is not None for n in node.walk() if isinstance(n, exp.Expr)
            ):
                raise self.error(
                    "GROUP BY cannot contain aggregates.",
                    item,
                    clause="GROUP BY",
                    fix="group by columns or expressions.",
                )
            expr = self.converter.convert(node, "GROUP BY")
            if any(k.expr == expr for k in self.keys):
                continue
            col_type = type_of(expr, self.infos)
            keys = keys_of(expr, self.infos, where=self.where)
            name = self.key_name(node, tree)
            if keys is not None:
                cells *= len(keys)
                if cells > MAX_GROUP_CELLS:
                    raise self.error(
                        f"the GROUP BY would produce more than {MAX_GROUP_CELLS:,} groups.",
                        item,
                        clause="GROUP BY",
                        fix="group by fewer or coarser keys.",
                    )
            self.keys.append(GroupKey(name=name, expr=expr, type=col_type, keys=keys))
            self.key_nodes.append(node)

    def is_select_alias(self, item: exp.Expr) -> bool:
        """Whether a GROUP BY item names a SELECT alias rather than a column."""
        if (
            not isinstance(item, exp.Column)
            or item.table
            or item.name.lower() not in self.select_aliases
        ):
            return False
        return not any(f.name.lower() == item.name.lower() for f in self.source.fields)

    def key_name(self, node: exp.Expr, tree: exp.Select) -> str:
        for item in tree.expressions:
            if isinstance(item, exp.Alias) and item.this == node:
                return item.alias
        if isinstance(node, exp.Column):
            return node.name
        return node.sql(dialect=DEFAULT_DIALECT)

    # -- aggregates and outputs -------------------------------------------------------------------

    def aggregate(self, node: exp.Expr, clause: str, *, hidden: bool) -> Expr:
        call = aggregates.recognise(node)
        if call is None:
            name = written_name(node)
            close = difflib.get_close_matches(name.upper(), aggregates.NAMES, n=3, cutoff=0.6)
            raise self.error(
                f"the aggregate {name} is not supported.",
                node,
                clause=clause,
                fix=(f"did you mean {' or '.join(close)}? " if close else "")
                + f"use one of {aggregates.SUPPORTED}.",
            )
        agg = self.p.agg_call(call, node, self.source, self.converter, clause)
        for i, existing in enumerate(self.aggs):
            if replace(existing, label="", hidden=False) == replace(agg, label="", hidden=False):
                if existing.hidden and not hidden:
                    self.aggs[i] = replace(existing, hidden=False)
                return AggRef.of(i)
        self.aggs.append(replace(agg, hidden=hidden))
        explicit = self.p.explicit_bounds(node)
        if explicit is not None:
            self.p.explicit_per_unit[len(self.aggs) - 1] = explicit
        return AggRef.of(len(self.aggs) - 1)

    def ref_infos(self) -> dict[str, FieldInfo]:
        infos = dict(self.infos)
        for i, key in enumerate(self.keys):
            infos[key_ref(i)] = FieldInfo(key.type, None, key.keys, True)
        for i, agg in enumerate(self.aggs):
            result = (
                "int"
                if agg.func in ("count", "count_distinct")
                or (agg.func in ("sum", "min", "max") and agg.arg_type == "int")
                else "float"
            )
            infos[agg_ref(i)] = FieldInfo(result, agg.bounds, None, True)
        return infos

    def post_expr(self, node: exp.Expr, clause: str, *, hidden: bool) -> Expr:
        """An output/HAVING/ORDER BY expression over group keys and aggregates."""
        expr = self.converter.convert(
            node, clause, aggregate=lambda n, c: self.aggregate(n, c, hidden=hidden)
        )
        expr = self.substitute_keys(expr)
        leftover = sorted({r.name for r in references(expr) if not isinstance(r, AggRef | KeyRef)})
        if leftover:
            field = next(f for f in self.source.fields if f.id == leftover[0])
            raise self.error(
                f"column {field.name!r} is neither aggregated nor in GROUP BY.",
                node,
                clause=clause,
                why="a bare column would release row-level values.",
                fix=_bare_column_fix(field),
                privacy=True,
            )
        self.check_post(expr, node, clause)
        return expr

    def substitute_keys(self, expr: Expr) -> Expr:
        for i, key in enumerate(self.keys):
            if expr == key.expr:
                return KeyRef.of(i)
        kids = children(expr)
        if not kids:
            return expr
        return with_children(expr, [self.substitute_keys(k) for k in kids])

    def check_post(self, expr: Expr, node: exp.Expr, clause: str) -> None:
        for sub in walk(expr):
            if isinstance(sub, Func) and sub.name not in POST_FUNCTIONS and aggregates_read(sub):
                raise self.error(
                    f"{sub.name} cannot be applied to an aggregate.",
                    node,
                    clause=clause,
                    fix=f"post-process with {', '.join(POST_FUNCTIONS)} or arithmetic.",
                )
        Converter(self.p.error, self.ref_infos(), lambda n, c: "").type_of(
            expr, node=node, clause=clause
        )

    def select_list(self, tree: exp.Select) -> None:
        names: set[str] = set()
        for raw in tree.expressions:
            node = raw.this if isinstance(raw, exp.Alias) else raw
            if isinstance(node, exp.Star) or (
                isinstance(node, exp.Column) and isinstance(node.this, exp.Star)
            ):
                raise self.error(
                    "SELECT * returns individual rows.",
                    node,
                    clause="SELECT",
                    why="Dalenius releases only noisy aggregates; row-level output would expose people.",
                    fix="select aggregates, e.g. SELECT COUNT(*) FROM ...",
                    privacy=True,
                )
            expr = self.post_expr(node, "SELECT", hidden=False)
            if len(aggregates_read(expr)) > 1:
                raise self.error(
                    "an output column may post-process one aggregate, not combine several.",
                    node,
                    clause="SELECT",
                    why="each released number carries the error bar of its aggregate; a combination would need its own.",
                    fix="select the aggregates as separate columns and combine them after the query.",
                )
            if isinstance(raw, exp.Alias):
                name = raw.alias
            elif isinstance(expr, KeyRef):
                name = self.keys[expr.index].name
            elif isinstance(expr, AggRef):
                name = _label(self.aggs[expr.index])
            else:
                name = node.sql(dialect=DEFAULT_DIALECT)
            base, n = name, 2
            while name.lower() in names:
                name, n = f"{base}_{n}", n + 1
            names.add(name.lower())
            self.outputs.append(OutputColumn(name=name, expr=expr))

    def having(self, tree: exp.Select) -> None:
        having = tree.args.get("having")
        if having is None:
            return
        expr = self.post_expr(having.this, "HAVING", hidden=True)
        self.having_expr = expr

    def order_by(self, tree: exp.Select) -> None:
        order = tree.args.get("order")
        if order is None:
            return
        for ordered in order.expressions:
            node = ordered.this
            expr: Expr | None = None
            if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
                position = int(node.this)
                if not 1 <= position <= len(self.outputs):
                    raise self.error(
                        f"ORDER BY {position} does not name an output column.",
                        node,
                        clause="ORDER BY",
                        fix=f"use a position between 1 and {len(self.outputs)}.",
                    )
                expr = self.outputs[position - 1].expr
            elif isinstance(node, exp.Column) and not node.table:
                match = next((o for o in self.outputs if o.name.lower() == node.name.lower()), None)
                if match is not None:
                    expr = match.expr
            if expr is None:
                expr = self.post_expr(node, "ORDER BY", hidden=True)
            self.order.append(
                OrderItem(
                    expr=expr,
                    descending=bool(ordered.args.get("desc")),
                    nulls_first=bool(ordered.args.get("nulls_first")),
                )
            )


def _magnitude(x: Fraction) -> str:
    """``1.2e+57`` for any size (``float`` overflows beyond 1.8e308)."""
    whole = int(abs(x))
    if whole < 10**300:
        return f"{float(x):.3g}"
    return f"about 1e+{len(str(whole)) - 1}"


def _internal(field: Field) -> bool:
    """Fields Dalenius adds itself (the carried unit id, BigQuery's per-unit values)."""
    return field.name.startswith("__") or (field.qualifier or "").startswith("__")


def _plural(n: int, noun: str) -> str:
    """``1 row``, ``5 rows``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _bare_column_fix(field: Field) -> str:
    """A rewrite that fits the column: average a bounded number, count or group anything else."""
    name = field.name
    if field.type in ("int", "float") and field.bounds is not None:
        return f"aggregate it, e.g. AVG({name}) or MEDIAN({name}), or add it to GROUP BY."
    if field.keys is not None:
        return f"add it to GROUP BY (its keys are public), or count it: COUNT({name})."
    return f"count it, e.g. COUNT({name}) or COUNT(DISTINCT {name}); listing its values is not possible."


def _label(agg: AggCall) -> str:
    return agg.label


def _value_path(expr: Expr) -> list[Expr]:
    """The sub-expressions whose values become the aggregated value: arithmetic, function
    arguments and CASE results, but not conditions (a comparison yields a truth value, whatever
    the magnitudes inside it, and the engine evaluates it in doubles without failing).
    """
    out = [expr]
    match expr:
        case BinOp(op=op, left=left, right=right) if op in ("+", "-", "*", "/", "%"):
            out += _value_path(left) + _value_path(right)
        case Func(args=args):
            for a in args:
                out += _value_path(a)
        case Neg(operand=operand):
            out += _value_path(operand)
        case Case(whens=whens, default=default):
            for _, value in whens:
                out += _value_path(value)
            if default is not None:
                out += _value_path(default)
    return out
