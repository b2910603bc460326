"""Rule: BigQuery's per-unit semantics for ``SELECT WITH DIFFERENTIAL_PRIVACY`` queries.

BigQuery computes COUNT, SUM and AVG per unit and group, clamps, then aggregates. The query is
rewritten to that shape: an inner aggregation per (unit, group) whose values are clamped to the
contribution bounds (``contribution_bounds_per_group``, else the catalog's bounds times the unit's
row cap for COUNT and SUM, the bounds for AVG), then the outer aggregate, in which each unit is one
row in each of at most ``max_groups_contributed`` groups. Quantiles and variances keep their
row-level meaning (each value clamped), so they cannot be mixed with COUNT/SUM/AVG in one such
query.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Literal

from dalenius.core.errors import QueryError
from dalenius.plan.derive import per_unit_bounds
from dalenius.plan.expr import Col
from dalenius.plan.nodes import AggCall, Field, Query, UnitAggregate, UnitSpec
from dalenius.plan.rewrite.context import BigQueryOptions, Context, Plan

PER_UNIT = frozenset({"count", "sum", "avg"})
"""The aggregates BigQuery's syntax computes per privacy unit first."""


def bigquery_per_unit(plan: Plan, context: Context) -> Plan:
    """``plan`` aggregated per (unit, group) first, when BigQuery's syntax asked for it.

    Applies to a ``SELECT WITH DIFFERENTIAL_PRIVACY`` query (``context.bigquery``) over an id
    privacy unit that asks for COUNT, SUM or AVG; any other plan is returned as it is.

    Raises:
        QueryError: the query mixes per-unit aggregates with row-level statistics, or counts
            distinct values (no clause position: the caller locates it).
    """
    options = context.bigquery
    if options is None or not isinstance(plan, Query) or plan.unit.kind != "id":
        return plan
    query = plan
    funcs = {a.func for a in query.aggregates}
    if not funcs & PER_UNIT:
        return query
    if funcs - PER_UNIT:
        raise QueryError(
            "this query mixes COUNT/SUM/AVG, which BigQuery's syntax aggregates per privacy unit "
            "first, with row-level statistics.",
            clause="SELECT",
            fix="ask for the quantiles, MIN/MAX or variances in a separate query.",
        )
    return _per_unit(query, options)


def _per_unit(query: Query, options: BigQueryOptions) -> Query:
    unit = query.unit
    fresh_id = options.fresh_id
    unit_field = Field(
        id=fresh_id("__dp", "unit"), name="__unit", qualifier="__dp", type="int", unit=True
    )
    key_fields = [
        Field(id=fresh_id("__dp", f"k{i}"), name=k.name, qualifier="__dp", type=k.type, keys=k.keys)
        for i, k in enumerate(query.group_by)
    ]
    inner_calls: list[AggCall] = []
    value_fields: list[Field] = []
    outer_aggs: list[AggCall] = []
    for i, agg in enumerate(query.aggregates):
        if agg.func == "count_distinct":
            raise QueryError(
                "COUNT(DISTINCT ...) is not supported with WITH DIFFERENTIAL_PRIVACY.",
                clause="SELECT",
                fix="use COUNT(*) (per unit) or the plain syntax.",
            )
        bounds = options.bounds.get(i) or per_unit_bounds(agg.func, agg.bounds, unit.max_rows)
        if agg.func == "count":
            bounds = (max(bounds[0], Fraction(0)), bounds[1])
        value_type = (
            "int" if agg.func == "count" else agg.arg_type if agg.func == "sum" else "float"
        )
        inner_calls.append(replace(agg, bounds=bounds, hidden=False))
        value = Field(
            id=fresh_id("__dp", f"v{i}"),
            name=f"v{i}",
            qualifier="__dp",
            type=value_type,
            bounds=bounds,
        )
        value_fields.append(value)
        outer_func: Literal["avg", "sum"] = "avg" if agg.func == "avg" else "sum"
        outer_aggs.append(
            replace(agg, func=outer_func, arg=Col(value.id), arg_type=value_type, bounds=bounds)
        )
    inner = UnitAggregate(
        child=query.relation,
        unit_field=unit.field or "",
        fields=(unit_field, *key_fields, *value_fields),
        aggregates=tuple(inner_calls),
        keys=tuple(k.expr for k in query.group_by),
    )
    keys = tuple(
        replace(k, expr=Col(f.id)) for k, f in zip(query.group_by, key_fields, strict=True)
    )
    groups = unit.max_groups
    spec = UnitSpec(
        "id",
        unit_field.id,
        groups,
        groups,
        f"{unit.description}; per-unit totals (BigQuery semantics)",
    )
    return replace(query, relation=inner, unit=spec, group_by=keys, aggregates=tuple(outer_aggs))
