"""The binder: validate an analyst's query against the catalog and build its logical plan.

It resolves names, checks types and builds relations into a :class:`~dalenius.plan.nodes.Query`;
what turns one plan into another is a rule of :mod:`dalenius.plan.rewrite`, which
:func:`to_query` applies before returning (BigQuery's per-unit semantics among them).

Everything here happens before any data is read, so every refusal is independent of the data and
costs nothing; each names the clause, says why, and proposes a rewrite. What is accepted:

* ``FROM`` a private table, optionally joined to public tables (on one equality each, in any
  written order of inner joins) or to another
  private table on the privacy unit; subqueries and ``WITH`` in ``FROM`` that keep each row's link
  to its unit (filters, derived columns), or aggregate per unit (``GROUP BY pid``), whose results
  the outer query aggregates again.
* ``WHERE`` on any columns, with ``[NOT] EXISTS`` / ``[NOT] IN (SELECT ...)`` joined by AND over
  public tables, or over private ones correlated on the privacy unit (a semi-join); ``GROUP BY`` columns or expressions — with public keys (declared, or
  derived from public bounds and key lists) every key is answered, otherwise groups are selected
  privately (which needs δ > 0).
* Aggregates (see :data:`dalenius.sql.aggregates.SUPPORTED`) over expressions whose bounds can be
  derived, with post-processing around them (``ROUND(AVG(x), 1)``), ``HAVING``, ``ORDER BY``,
  ``LIMIT``/``OFFSET`` — all applied to the noisy answers.
* BigQuery's ``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (...)``, see :mod:`dalenius.sql.bigquery`
  (the clause) and :mod:`dalenius.plan.rewrite.bigquery_per_unit` (its semantics).

The binder is one object built up in floors, one module each, every floor importing only the ones
below it:

* :mod:`~dalenius.sql.bind.statement` — the entry point: the statement, its in-SQL privacy
  options and the aggregate query (:func:`to_query`, :class:`Resolved`);
* :mod:`~dalenius.sql.bind.outputs` — what one aggregate query releases: GROUP BY keys, the
  select list, HAVING and ORDER BY;
* :mod:`~dalenius.sql.bind.relations` — what the query reads: FROM, subqueries, ``WITH`` and
  per-unit subqueries;
* :mod:`~dalenius.sql.bind.semijoins` — ``[NOT] EXISTS`` / ``[NOT] IN (SELECT ...)`` in WHERE;
* :mod:`~dalenius.sql.bind.joins` — the join shapes, name lookup and a source's converter;
* :mod:`~dalenius.sql.bind.aggregates` — one aggregate call: its refusals and its argument's bounds;
* :mod:`~dalenius.sql.bind.base` — what every floor shares: the SQL text, the catalog, located
  errors and the source under construction.
"""

from dalenius.sql.bind.statement import Options, Resolved, to_query

__all__ = ["Options", "Resolved", "to_query"]
