"""Rule: measure each quantity once, however many aggregates read it.

The compiler asks for one measurement per input of each statistic (``AVG(age)`` is a centred sum
and a count), and one for a private selection. Identical ones are then merged, so their share of ε
is spent once: ``COUNT(*), AVG(age)`` with a never-NULL ``age`` measures one count (a count of a
never-NULL column counts every row, so it is ``COUNT(*)``), and a selection counting units reuses
the query's ``COUNT(*)`` when that counts units. An AVG whose argument an earlier aggregate already
sums plainly reads that sum rather than a centred one: centring only makes the AVG's noise
smaller, one measurement fewer makes every share of ε larger.

Measurements are then named ``m0``, ``m1``, … in the order the aggregates first read them (the
names the plan always had).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from dalenius.plan.expr import Col, Expr
from dalenius.plan.functions import Bounds
from dalenius.plan.nodes import MeasuredQuery, Measurement, Statistic, output_fields
from dalenius.plan.rewrite.context import Context, Plan

Key = tuple[str, Expr | None, Bounds | None, Fraction, bool, str]
"""What makes two measurements identical (the rest follows from it and the unit's caps)."""


def share_measurements(plan: Plan, context: Context) -> Plan:
    """``plan`` with identical measurements merged and renamed in first-use order.

    Applies to a :class:`~dalenius.plan.nodes.MeasuredQuery`; a logical query, or measurements
    with nothing to share, are returned as they are.

    Example:
        >>> from dalenius.plan.nodes import Query, Scan, UnitSpec
        >>> q = Query(Scan("t", "t", ()), UnitSpec("row", None, 1, 1, ""), (), (), ())
        >>> count = Measurement("m0", "count", None, "int", None, Fraction(0), Fraction(1), 1, 1, Fraction(0))
        >>> plan = MeasuredQuery(q, (count, replace(count, name="m1")), (Statistic("count", ("m0",)), Statistic("count", ("m1",))))
        >>> shared = share_measurements(plan, Context())
        >>> [m.name for m in shared.measurements], [s.inputs for s in shared.statistics]
        (['m0'], [('m0',), ('m0',)])
    """
    if not isinstance(plan, MeasuredQuery):
        return plan
    nullable = {f.id: f.nullable for f in output_fields(plan.query.relation)}
    measurements = [_counting_rows(m, nullable) for m in plan.measurements]
    statistics = _plain_sums_for_avg(plan.statistics, measurements)
    first: dict[Key, str] = {}  # each key's first measurement still read
    canonical: dict[str, str] = {}  # each name read → the name of the first identical one
    read = {name for s in statistics for name in s.inputs}
    if plan.selection is not None:
        read.add(plan.selection)
    if plan.people is not None:
        read.add(plan.people)
    for m in measurements:
        if m.name in read:
            canonical[m.name] = first.setdefault(key(m), m.name)
    kept = [m for m in measurements if canonical.get(m.name) == m.name]
    names = {m.name: f"m{i}" for i, m in enumerate(kept)}
    rename = {old: names[new] for old, new in canonical.items()}
    shared = replace(
        plan,
        measurements=tuple(replace(m, name=names[m.name]) for m in kept),
        statistics=tuple(replace(s, inputs=tuple(rename[i] for i in s.inputs)) for s in statistics),
        selection=None if plan.selection is None else rename[plan.selection],
        people=None if plan.people is None else rename[plan.people],
    )
    return plan if shared == plan else shared


def key(m: Measurement) -> Key:
    """The measurement's identity: kind, argument, bounds, centre, distinct units, type."""
    return (m.kind, m.arg, m.bounds, m.center, m.distinct_unit, m.arg_type)


def _counting_rows(m: Measurement, nullable: dict[str, bool]) -> Measurement:
    """A count of a never-NULL column as the ``COUNT(*)`` it is."""
    if m.kind == "count" and isinstance(m.arg, Col) and not nullable.get(m.arg.name, True):
        return replace(m, arg=None)
    return m


def _plain_sums_for_avg(
    statistics: tuple[Statistic, ...], measurements: list[Measurement]
) -> tuple[Statistic, ...]:
    """Each AVG reading the plain sum of its argument where an earlier aggregate measures one."""
    at = {m.name: i for i, m in enumerate(measurements)}
    plain_at: dict[Key, int] = {}
    for i, m in enumerate(measurements):
        if m.kind == "sum" and m.center == 0:
            plain_at.setdefault(key(m), i)
    out = []
    for s in statistics:
        total = measurements[at[s.inputs[0]]]
        plain = plain_at.get(key(replace(total, center=Fraction(0))))
        if s.kind == "avg" and plain is not None and plain < at[total.name]:
            out.append(replace(s, inputs=(measurements[plain].name, *s.inputs[1:])))
        else:
            out.append(s)
    return tuple(out)
