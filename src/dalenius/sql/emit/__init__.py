"""Compile a DP plan into the exact aggregate queries an engine runs.

The generated SQL computes, per group, every measurement of the plan exactly: counts, and sums of
values clipped to their public bounds, centred and rounded to a power-of-two grid, as integers (so
the engine sums exactly, whatever the row order); and per-bin counts for private selections. It adds
no noise: noise is drawn in Python from the OS generator after the exact values come back.

Every relation becomes a subquery whose columns are the plan's unique field ids. A privacy unit
given by an id column is bounded before aggregating (see :func:`bounded`). Expressions are made
total: arithmetic in DOUBLE (no overflow), NULL-safe division, integer division truncating toward
zero, so the query cannot fail on particular rows.

Example:
    >>> from fractions import Fraction as F
    >>> from dalenius.plan.nodes import Measurement
    >>> from dalenius.plan.expr import Col
    >>> m = Measurement("m0", "sum", Col("age"), "int", (F(17), F(90)), F(0), F(1), 90, 90, F(1))
    >>> print(Compiler({}).measurement(m).sql("duckdb"))
    SUM(CAST(CASE WHEN "age" BETWEEN 17 AND 90 THEN "age" WHEN "age" < 17 THEN 17 WHEN "age" > 90 THEN 90 ELSE "age" END AS BIGINT))

The writer is in floors, one module each, every floor importing only the ones below it:

* :mod:`~dalenius.sql.emit.statements` — every statement of one query (:func:`exact_queries`,
  :class:`ExactSQL`), including the degree counts of a weighted selection;
* :mod:`~dalenius.sql.emit.bounding` — the SQL that keeps at most the declared rows and groups
  of each privacy unit (:func:`~dalenius.sql.emit.bounding.bounded`,
  :func:`~dalenius.sql.emit.bounding.bounded_aggregate`);
* :mod:`~dalenius.sql.emit.expressions` — plan expressions, relations and measurements as SQL
  (:class:`Compiler`);
* :mod:`~dalenius.sql.emit.numeric` — fixed-point arithmetic in SQL: clipping, scaling by powers
  of two, rounding to the nearest integer (halves to even) the same on every engine;
* :mod:`~dalenius.sql.emit.writing` — a sqlglot tree written as text in a dialect, and the small
  node builders every floor uses;
* :mod:`~dalenius.sql.emit.dialects` — what differs between engines (keyed hashes, exact sums,
  rounding, double arithmetic), written from each dialect's facts.
"""

from dalenius.sql.emit.expressions import Compiler
from dalenius.sql.emit.statements import ExactSQL, exact_queries, read_names

__all__ = ["Compiler", "ExactSQL", "exact_queries", "read_names"]
