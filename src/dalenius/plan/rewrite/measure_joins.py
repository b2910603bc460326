"""Rule: fill in each public join's multiplicity, read from the public table (public data).

The binder leaves ``multiplicity = -1`` on a join with a public table: how many of its rows can
share one join key is a fact of the public data, read before planning. A row unit's cap ``R`` is
the product of these multiplicities
(:func:`dalenius.plan.rewrite.bound_contributions.bound_contributions`).
"""

from __future__ import annotations

from dataclasses import replace

from dalenius.plan.nodes import Join, Query, Relation, Scan, depth_first
from dalenius.plan.rewrite.context import Context, Plan


def measure_joins(plan: Plan, context: Context) -> Plan:
    """``plan`` with every unmeasured join's multiplicity read through ``context.multiplicity``.

    Example:
        >>> from dalenius.plan.nodes import Field, UnitSpec
        >>> t, p = Scan("t", "t", ()), Scan("p", "p", (Field("p__k", "k", "p", "int"),))
        >>> q = Query(Join(t, p, "t__k", "p__k", "inner", -1), UnitSpec("row", None, 1, 1, ""), (), (), ())
        >>> measure_joins(q, Context(multiplicity=lambda table, column: 3)).relation.multiplicity
        3
    """
    measure = context.multiplicity
    if measure is None or not isinstance(plan, Query) or not unmeasured(plan):
        return plan

    def visit(relation: Relation) -> Relation:
        if isinstance(relation, Join) and relation.multiplicity < 0:
            right = relation.right
            assert isinstance(right, Scan)
            column = next(f.name for f in right.fields if f.id == relation.right_key)
            return replace(relation, multiplicity=measure(right.table, column))
        return relation

    return replace(plan, relation=depth_first(plan.relation, visit))


def unmeasured(query: Query) -> bool:
    """Whether the query joins a public table whose multiplicity is still to be read."""
    return any(isinstance(r, Join) and r.multiplicity < 0 for r in _relations(query.relation))


def _relations(relation: Relation) -> list[Relation]:
    found: list[Relation] = []

    def visit(r: Relation) -> Relation:
        found.append(r)
        return r

    depth_first(relation, visit)
    return found
