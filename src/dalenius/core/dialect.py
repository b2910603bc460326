"""What differs between the engines' SQL, as one object per engine: DuckDB, PostgreSQL, Spark.

Every engine difference Dalenius relies on is a named attribute here, so code branches on what
an engine *does* (``dialect.ieee_doubles``) rather than on which engine it is
(``dialect == "postgres"``), and adding an engine means filling in one more object. The objects
hold facts and the text-level helpers (identifier quoting, type names) that the executors and the
engine need for the few statements they write themselves; the sqlglot expressions that use the
facts are built in :mod:`dalenius.sql.emit.dialects` (only ``dalenius.sql`` imports sqlglot). An
executor names its dialect (:attr:`dalenius.executors.base.Executor.dialect`), and
:func:`dalenius.sql.emit.exact_queries` writes SQL for it.

Example:
    >>> POSTGRES.quote('we"ird'), SPARK.quote("a`b")
    ('"we""ird"', '`a``b`')
    >>> as_dialect("spark") is SPARK, str(DUCKDB)
    (True, 'duckdb')
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    """One engine's SQL: its name and every difference from the others that Dalenius uses."""

    name: str
    """The engine's name, which is also sqlglot's name for its dialect."""

    identifier_quote: str
    """The character that quotes an identifier (doubled inside it)."""

    text_type: str
    """The name of the text type in a cast."""

    double_type: str
    """The name of the 64-bit floating-point type in a cast."""

    epoch_days: str
    """The days from 1970-01-01 to a date, as SQL with ``{}`` for the date (an integer)."""

    text_collation: str
    """The collation that orders text by its bytes, where the default may not ('' for none)."""

    exact_bigint_sum: bool
    """Whether ``SUM`` of a BIGINT is exact whatever the number of rows (DuckDB: a 128-bit
    HUGEINT, PostgreSQL: NUMERIC; Spark's is a BIGINT that overflows)."""

    ieee_doubles: bool
    """Whether ``+ - * /`` on doubles give IEEE 754 results (±∞ on overflow, 0 on underflow);
    PostgreSQL raises instead, so its SQL calls the session's ``pg_temp`` helper functions."""

    double_modulo: bool
    """Whether ``%`` is defined on doubles (PostgreSQL's is not)."""

    double_round: bool
    """Whether ``ROUND(double, digits)`` exists and rounds halves away from zero (PostgreSQL has
    no such function and rounds a double's halves to even)."""

    cast_rounds_to_even: bool
    """Whether ``CAST(double AS BIGINT)`` rounds to the nearest integer, halves to even (DuckDB,
    PostgreSQL); Spark's truncates toward zero, so its SQL rounds with ``RINT`` (also halves to
    even) first. A double is rounded to its grid this way on every engine, so the exact sum is
    the same everywhere; one cast per row costs DuckDB less than ``FLOOR(x + 0.5)`` does (about
    0.3 times the raw sum of a double column at 38M rows)."""

    floor_of_double_is_bigint: bool
    """Whether ``FLOOR`` and ``CEIL`` of a double return a BIGINT, which overflows beyond 2^63
    (Spark)."""

    ranks_every_row: bool
    """Whether a statement that bounds *rows* (:func:`dalenius.sql.emit.bounding.bounded`: distinct
    counts, quantiles' bins) ranks every row in one pass instead of keeping its input and ranking
    only the units over their caps: Spark may read a CTE's source once per reference, and
    keeping the whole input (:attr:`kept_by_executor`) would cost a job of its own."""

    kept_by_executor: bool
    """Whether the engine's grammar has no ``MATERIALIZED`` and its executor keeps such an
    expression by running it first (Spark: a local checkpoint, a job of its own per expression;
    :mod:`dalenius.executors.ctes`). The statement that aggregates each unit once then keeps only
    a small expression, the split of the units (one row per group and per unit over its caps):
    each unit's total over its (unit, group) cells comes from a window over the cells rather
    than from kept cells read twice, and the list of units over their caps is broadcast to the
    read of their rows (Spark otherwise shuffled every row of the table to join it with that
    list: the census benchmark's visits of 10M persons, 0.6 s against 6.9 s for that read). A
    join or a subquery, which DuckDB keeps to read twice, is read once with every row ranked
    (:attr:`ranks_every_row`): computing it twice cost Spark more (TPC-H at SF 1)."""

    top_n_aggregate: bool
    """Whether an aggregate keeps a group's first n rows by an order (DuckDB's ``ARG_MIN(x, by,
    n)``, a heap per unit): contribution bounding then keeps each over-cap unit's rows inside one
    aggregation instead of sorting them by a window (with :attr:`concat_call`, the arrivals' Q9
    at 1M persons took 0.91 times the time)."""

    concat_call: bool
    """Whether the keyed hash joins its text with one ``CONCAT`` call rather than a chain of
    ``||`` (same text: no part is NULL). In DuckDB the call builds the text once, and the
    over-cap rows' hashes cost 0.88 times the time (the arrivals' 1M rows of persons over the
    cap); PostgreSQL's ``concat`` converts each argument through its type's output function."""

    map_lookup: bool
    """Whether a long CASE mapping a column's values to constants is written as a map lookup
    (``TRY_ELEMENT_AT(MAP(...), x)``): Spark's code generation of such a CASE of 204 branches
    took 18 s, the lookup 1.5 s (a correlated subquery's values per key)."""

    values_lookup: bool
    """Whether a CASE mapping a column's values to at least
    :data:`~dalenius.sql.emit.expressions.VALUES_BRANCHES` constants is written as a scalar
    subquery over a ``VALUES`` list (``(SELECT v FROM (VALUES (k1, v1), …) WHERE k = x)``), which
    DuckDB turns into a join: a correlated subquery's 2,044 values per part (TPC-H Q17 at SF 10)
    took 0.4–0.5 s to plan and evaluate as a CASE, and the join about a tenth of that."""

    semi_join: bool
    """Whether an ``[NOT] EXISTS`` correlated by equalities alone is written as ``SEMI JOIN`` /
    ``ANTI JOIN`` (DuckDB's syntax; the same rows). Inside the bounded input's CTE, DuckDB
    planned a correlated ``NOT EXISTS`` as a MARK join hashing every row of the subquery (TPC-H
    Q22 at SF 10: 15 million orders for 190,000 customers); the explicit join hashes the
    smaller side (:func:`~dalenius.sql.emit.expressions._hashed_either_way` says which
    subqueries)."""

    cte_hint: str
    """The hint on the bounded input's CTE: DuckDB materialises it (read once); PostgreSQL reads
    the table again for each reference, which is cheaper, and one statement sees one snapshot."""

    def quote(self, name: str) -> str:
        """``name`` as a quoted identifier of this dialect.

        Example:
            >>> DUCKDB.quote("age")
            '"age"'
        """
        q = self.identifier_quote
        return q + name.replace(q, q + q) + q

    def __str__(self) -> str:
        return self.name


DUCKDB = Dialect(
    name="duckdb",
    identifier_quote='"',
    text_type="VARCHAR",
    double_type="DOUBLE",
    epoch_days="DATE_DIFF('day', DATE '1970-01-01', {})",
    text_collation="",
    exact_bigint_sum=True,
    ieee_doubles=True,
    double_modulo=True,
    double_round=True,
    cast_rounds_to_even=True,
    floor_of_double_is_bigint=False,
    ranks_every_row=False,
    kept_by_executor=False,
    top_n_aggregate=True,
    concat_call=True,
    map_lookup=False,
    values_lookup=True,
    semi_join=True,
    cte_hint="MATERIALIZED",
)

POSTGRES = Dialect(
    name="postgres",
    identifier_quote='"',
    text_type="TEXT",
    double_type="DOUBLE PRECISION",
    epoch_days="({} - DATE '1970-01-01')",
    text_collation="C",
    exact_bigint_sum=True,
    ieee_doubles=False,
    double_modulo=False,
    double_round=False,
    cast_rounds_to_even=True,
    floor_of_double_is_bigint=False,
    ranks_every_row=False,
    kept_by_executor=False,
    top_n_aggregate=False,
    concat_call=False,
    map_lookup=False,
    values_lookup=False,
    semi_join=False,
    cte_hint="NOT MATERIALIZED",
)

SPARK = Dialect(
    name="spark",
    identifier_quote="`",
    text_type="STRING",
    double_type="DOUBLE",
    epoch_days="DATEDIFF({}, DATE '1970-01-01')",
    text_collation="",
    exact_bigint_sum=False,
    ieee_doubles=True,
    double_modulo=True,
    double_round=True,
    cast_rounds_to_even=False,
    floor_of_double_is_bigint=True,
    ranks_every_row=True,
    kept_by_executor=True,
    top_n_aggregate=False,
    concat_call=False,
    map_lookup=True,
    values_lookup=False,
    semi_join=False,
    cte_hint="",
)

DIALECTS: dict[str, Dialect] = {d.name: d for d in (DUCKDB, POSTGRES, SPARK)}
"""Every dialect by name."""


def as_dialect(dialect: Dialect | str) -> Dialect:
    """The dialect object for ``dialect`` (an object, or an engine's name).

    Raises:
        ValueError: no engine has that name.
    """
    if isinstance(dialect, Dialect):
        return dialect
    found = DIALECTS.get(dialect)
    if found is None:
        raise ValueError(
            f"no SQL dialect {dialect!r}; the engines are {', '.join(sorted(DIALECTS))}."
        )
    return found
