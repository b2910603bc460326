"""Plan rewrites: each rule a small module, applied in the order of :data:`RULES`.

A rule is a function ``(Query, Context) -> Query``: it returns a new logical query (plans are
frozen) or the one it was given when it has nothing to do. :func:`rewrite` applies every rule in
order, like sqlglot's ``optimize`` over its ``RULES`` and Tumult Analytics' ``rewrite`` over its
rewrite rules. A rule acts only when the :class:`Context` carries what it needs, so the pipeline
runs at two points with the same tuple:

* after binding (:func:`dalenius.sql.to_plan.to_query`), with the SQL's BigQuery options:
  :func:`~dalenius.plan.rewrite.bigquery_per_unit.bigquery_per_unit` reshapes a ``SELECT WITH
  DIFFERENTIAL_PRIVACY`` query into BigQuery's per-unit semantics;
* before compiling (:meth:`dalenius.engine.session.Session.prepare`), with a reader of public
  tables: :func:`~dalenius.plan.rewrite.measure_joins.measure_joins` fills in each public join's
  multiplicity.

Contribution bounding is then placed over the rewritten relation by
:func:`dalenius.plan.nodes.bound_contributions` when the query is compiled. Rules raise
:class:`~dalenius.core.errors.QueryError` without a position; the caller points them at their
clause of the SQL.

Example:
    >>> from dalenius.plan.nodes import Query, Scan, UnitSpec
    >>> q = Query(Scan("t", "t", ()), UnitSpec("row", None, 1, 1, "each row"), (), (), ())
    >>> rewrite(q, Context()) is q
    True
"""

from __future__ import annotations

from dalenius.plan.nodes import Query
from dalenius.plan.rewrite.bigquery_per_unit import bigquery_per_unit
from dalenius.plan.rewrite.context import BigQueryOptions, Context, Rule
from dalenius.plan.rewrite.measure_joins import measure_joins, unmeasured

RULES: tuple[Rule, ...] = (bigquery_per_unit, measure_joins)
"""The rewrite rules, in the order they apply."""


def rewrite(query: Query, context: Context) -> Query:
    """``query`` after every rule of :data:`RULES`, in order."""
    for rule in RULES:
        query = rule(query, context)
    return query


__all__ = ["RULES", "BigQueryOptions", "Context", "Rule", "rewrite", "unmeasured"]
