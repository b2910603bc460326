"""The binder's entry point: one SELECT statement, its in-SQL privacy options, its aggregate query.

:func:`to_query` parses the text, binds it floor by floor (relations, then outputs) and applies
the plan's rewrite rules; what it returns, :class:`Resolved`, is all the engine needs to cost and
answer the query.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from operator import itemgetter
from typing import Any

from sqlglot import exp

from dalenius.core.catalog import Catalog, Table
from dalenius.core.errors import PublicAnswer, QueryError
from dalenius.core.loss import as_fraction
from dalenius.plan.expr import KeyRef
from dalenius.plan.nodes import OrderItem, Query
from dalenius.plan.rewrite import BigQueryOptions, Context, rewrite
from dalenius.sql import aggregates, bigquery, validate
from dalenius.sql.bind.base import _Source
from dalenius.sql.bind.outputs import _State
from dalenius.sql.bind.relations import _Relations
from dalenius.sql.parse import DEFAULT_DIALECT, parse
from dalenius.sql.public_sql import public_query

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
        PublicQuery: the query reads public tables alone and passed their allow-list
            (:mod:`dalenius.sql.public_sql`): the session answers it exactly, free.

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
    if not extracted.enabled:
        public = public_query(tree, catalog, sql, dialect)
        if public is not None:
            raise public
    return _Planner(sql, catalog, extracted).build(tree)


class _Planner(_Relations):
    """The statement: its options and the aggregate query over the source the relations built."""

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
            raise self.public_only(source, tree.args.get("from_") or tree.args.get("from"))
        if options.unit_column is not None:
            self.check_unit_option(source, options.unit_column)
        if options.max_groups is not None and source.unit is not None and source.unit.kind == "id":
            source.unit = replace(source.unit, max_groups=options.max_groups, groups_asked=True)
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

    # -- the aggregate query --------------------------------------------------------------------

    def key_set(self, state: _State, tree: exp.Select) -> None:
        """GROUP BY without an aggregate asks for the set of groups (as ``SELECT DISTINCT``).

        Public keys are known without reading data: the answer is every combination of them
        (as a grouped count answers them), read off the catalog — :class:`PublicAnswer`, which
        the session answers for free. With HAVING, ORDER BY or LIMIT, or outputs other than the
        keys, it is refused with the keys and the rewrite that counts them. Private keys are
        released through partition selection, on a hidden ``COUNT(*)`` (charged, as for any
        private GROUP BY).
        """
        public = all(k.keys is not None for k in state.keys)
        plain = (
            state.having_expr is None
            and all(isinstance(o.expr, KeyRef) for o in state.outputs)
            and all(isinstance(o.expr, KeyRef) for o in state.order)
        )
        if public and plain:
            combos = _ordered(
                list(itertools.product(*(k.keys or () for k in state.keys))), state.order
            )
            limit, offset = self.limit(tree)
            combos = combos[offset : None if limit is None else offset + limit]
            picks = [o.expr.index for o in state.outputs if isinstance(o.expr, KeyRef)]
            raise PublicAnswer(
                "GROUP BY without an aggregate asks only for the groups, and these are public: "
                "the query answers them from the catalog, reading no data and spending nothing.",
                columns=tuple(o.name for o in state.outputs),
                types=tuple(state.keys[i].type for i in picks),
                rows=tuple(tuple(combo[i] for i in picks) for combo in combos),
                clause="SELECT",
                sql=self.sql,
                fix="run it (free); add COUNT(*) to see how many rows each group has (charged).",
            )
        if public:
            listed = "; ".join(
                f"{k.name}: {', '.join('NULL' if v is None else repr(v) for v in (k.keys or ())[:20])}"
                + (", …" if len(k.keys or ()) > 20 else "")
                for k in state.keys
            )
            raise self.error(
                "GROUP BY without an aggregate asks only for the groups, and these are public.",
                tree.expressions[0] if tree.expressions else None,
                clause="SELECT",
                why=f"their keys follow from the catalog, not the data ({listed}); nothing "
                "needs to be read or spent.",
                fix="read them in the catalog (the gateway's dataset description lists them), or add "
                "COUNT(*) to see how many rows each "
                "has (charged).",
            )
        state.aggregate(exp.Count(this=exp.Star()), "SELECT", hidden=True)

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
        if not state.aggs and state.keys:
            self.key_set(state, tree)
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


def _ordered(rows: list[tuple[Any, ...]], order: Sequence[OrderItem]) -> list[tuple[Any, ...]]:
    """Public key combinations in ``ORDER BY`` order (values by Python's order — code points for
    text; NULLs last unless NULLS FIRST, as every ordered answer); stable, so ties keep the
    catalog's order.
    """
    for item in reversed(order):
        assert isinstance(item.expr, KeyRef)
        i = item.expr.index
        present = [r for r in rows if r[i] is not None]
        missing = [r for r in rows if r[i] is None]
        present.sort(key=itemgetter(i), reverse=item.descending)
        rows = missing + present if item.nulls_first else present + missing
    return rows
