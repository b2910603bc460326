"""Rule: place the contribution bounding over a query's relation (``Query.bounding``).

Every sensitivity rests on one fact: how many rows (``R``) and groups (``G``) one privacy unit can
contribute. The rule writes it into the plan as a
:class:`~dalenius.plan.nodes.BoundContributions` node, which the compiler reads for the
sensitivities, ``sql.emit`` translates into SQL (an ``id`` unit's rows and groups capped by a
keyed hash ranking) and the bottom-up loss audit checks the measurements against. It acts once
every join's multiplicity is known (after :mod:`~dalenius.plan.rewrite.measure_joins`), and again
whenever a rule before it changed the relation or the unit, so the node always describes the
query it is part of.
"""

from __future__ import annotations

from dataclasses import replace

from dalenius.plan.nodes import (
    BoundContributions,
    Filter,
    Join,
    Project,
    Query,
    Relation,
    Scan,
    SemiJoin,
    Truncation,
    UnitAggregate,
    truncated_stability,
)
from dalenius.plan.rewrite.context import Context, Plan
from dalenius.plan.rewrite.measure_joins import unmeasured


def bound_contributions(plan: Plan, context: Context) -> Plan:
    """``plan`` with its :class:`BoundContributions` placed: the caps ``(R, G)`` over its relation.

    A row unit contributes as many rows as the joins can multiply one row into (``R = G``, the
    product of the public sides' multiplicities, and a truncated join of two private tables its
    stability, :func:`~dalenius.plan.nodes.truncated_stability`); an ``id`` or ``aggregated`` unit has the caps
    its :class:`~dalenius.plan.nodes.UnitSpec` declares. A query with a join still to be measured
    is returned as it is (its ``R`` is not known yet), as is one whose bounding is already placed.

    Example:
        >>> from dalenius.plan.nodes import UnitSpec
        >>> q = Query(Scan("t", "t", ()), UnitSpec("id", "t__pid", 3, 2, "a person"), (), (), ())
        >>> b = bound_contributions(q, Context()).bounding
        >>> (b.unit, b.max_rows, b.max_groups, b.enforced)
        ('t__pid', 3, 2, True)
    """
    if not isinstance(plan, Query) or unmeasured(plan):
        return plan
    unit = plan.unit
    if unit.kind == "row":
        m = row_multiplicity(plan.relation)
        bounding = BoundContributions(plan.relation, None, m, m, "row")
    else:
        bounding = BoundContributions(
            plan.relation, unit.field, unit.max_rows, unit.max_groups, unit.kind
        )
    return plan if bounding == plan.bounding else replace(plan, bounding=bounding)


def row_multiplicity(relation: Relation) -> int:
    """The most rows of ``relation`` one row unit changes: its joins' multiplicities."""
    match relation:
        case Scan():
            return 1
        case Filter(child=c) | Project(child=c) | UnitAggregate(child=c) | SemiJoin(child=c):
            # A semi-join keeps or drops each row; it never repeats one.
            return row_multiplicity(c)
        case Join(left=left, right=right, truncation=Truncation() as t):
            # Each side bounded before joining: an id side by its enforced cap, a side of row
            # units by what its own joins multiply one row into.
            return truncated_stability(
                t,
                t.left_rows or row_multiplicity(left),
                t.right_rows or row_multiplicity(right),
            )  # for an elastic join, a floor the compiler replaces (dalenius.plan.elastic)
        case Join(left=left, multiplicity=m, kind=kind):
            return row_multiplicity(left) * max(m, 1 if kind == "left" else m)
    raise AssertionError(f"unknown relation {relation!r}")
