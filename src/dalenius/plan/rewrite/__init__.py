"""Plan rewrites: each rule a small module, applied in the order of :data:`RULES`.

A rule is a function ``(plan, Context) -> plan``: it returns a new plan of the kind it was given
(plans are frozen) or the one it was given when it has nothing to do. A plan is a logical
:class:`~dalenius.plan.nodes.Query` or a :class:`~dalenius.plan.nodes.MeasuredQuery` (its
measurements before ε is split). :func:`rewrite` applies every rule in order, like sqlglot's
``optimize`` over its ``RULES`` and Tumult Analytics' ``rewrite`` over its rewrite rules. A rule
acts only on its kind of plan and when the :class:`Context` carries what it needs, so the pipeline
runs at several points with the same tuple:

* after binding (:func:`dalenius.sql.bind.to_query`), with the SQL's BigQuery options:
  :func:`~dalenius.plan.rewrite.bigquery_per_unit.bigquery_per_unit` reshapes a ``SELECT WITH
  DIFFERENTIAL_PRIVACY`` query into BigQuery's per-unit semantics;
* before compiling (:meth:`dalenius.engine.session.Session.prepare`), with a reader of public
  tables: :func:`~dalenius.plan.rewrite.measure_joins.measure_joins` fills in each public join's
  multiplicity, and :func:`~dalenius.plan.rewrite.public_table_keys.public_table_keys` gives a
  GROUP BY column of an inner-joined public table that table's values as its key list;
* at each of these, and again when the query is compiled (:func:`dalenius.plan.compile.to_dp`),
  :func:`~dalenius.plan.rewrite.bound_contributions.bound_contributions` places the contribution
  bounding over the query's relation once every join is measured;
* on the measurements the compiler asks for (:func:`dalenius.plan.compile.to_dp`):
  :func:`~dalenius.plan.rewrite.share_measurements.share_measurements` merges identical ones
  before ε is split.

Rules raise :class:`~dalenius.core.errors.QueryError` without a position; the caller points them
at their clause of the SQL.

Example:
    >>> from dalenius.plan.nodes import Query, Scan, UnitSpec
    >>> q = Query(Scan("t", "t", ()), UnitSpec("row", None, 1, 1, "each row"), (), (), ())
    >>> q = rewrite(q, Context())
    >>> q.bounding.max_rows, rewrite(q, Context()) is q
    (1, True)
"""

from __future__ import annotations

from dalenius.plan.rewrite.bigquery_per_unit import bigquery_per_unit
from dalenius.plan.rewrite.bound_contributions import bound_contributions
from dalenius.plan.rewrite.context import BigQueryOptions, Context, Plan, Rule
from dalenius.plan.rewrite.measure_joins import measure_joins, unmeasured
from dalenius.plan.rewrite.public_table_keys import public_table_keys
from dalenius.plan.rewrite.share_measurements import share_measurements

RULES: tuple[Rule, ...] = (
    bigquery_per_unit,
    measure_joins,
    public_table_keys,
    bound_contributions,
    share_measurements,
)
"""The rewrite rules, in the order they apply."""


def rewrite(plan: Plan, context: Context) -> Plan:
    """``plan`` after every rule of :data:`RULES`, in order."""
    for rule in RULES:
        plan = rule(plan, context)
    return plan


__all__ = ["RULES", "BigQueryOptions", "Context", "Plan", "Rule", "rewrite", "unmeasured"]
