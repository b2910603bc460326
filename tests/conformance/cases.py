"""The cross-engine conformance table: queries every engine must answer bit for bit alike.

Each :class:`Case` names a query and the dataset (``tests/conformance/datasets.py``) it runs on.
The suite computes its exact measurements (noise off, ``tests/support/exact.py``) on DuckDB, the
reference, and on each engine in ``engines``, and compares the integers: group keys, every count,
every fixed-point sum, every histogram bin.

To add a query, append a ``Case`` to :data:`CASES`. If an engine is known to differ on it, say so
with ``gaps={"postgres": "why"}``: the test then expects the difference (a strict xfail), so the
gap is visible in every run and noticed when it closes. Every answered query of the SQL
conformance table (``tests/sql_conformance/cases.py``) is also run here: on PostgreSQL all of them,
on Spark the hand-written ones (each new SQL shape), since a Spark query costs about a second.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tests.sql_conformance.cases import answered, generated

BOTH = ("postgres", "spark")


@dataclass(frozen=True)
class Case:
    """One query of the table.

    Attributes:
        sql: the analyst's query.
        catalog: the dataset it runs on.
        name: a short unique id (defaults to the SQL).
        delta: the query's δ, for measurements that need one.
        engines: the engines compared with DuckDB.
        gaps: engine → reason, for known differences (expected to fail, strictly).
    """

    sql: str
    catalog: str
    name: str = ""
    delta: float | None = None
    engines: tuple[str, ...] = BOTH
    gaps: Mapping[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """The test id."""
        return self.name or self.sql


CASES: list[Case] = [
    # Counts, sums and averages; WHERE forms.
    Case("SELECT COUNT(*) FROM adult WHERE age >= 40", "adult"),
    Case("SELECT COUNT(occupation) AS n, COUNT(*) AS total FROM adult", "adult"),
    Case("SELECT SUM(age) FROM adult WHERE sex = 'Female'", "adult"),
    Case("SELECT SUM(capital_gain) AS g, AVG(hours_per_week) AS h FROM adult", "adult"),
    Case("SELECT SUM(capital_loss), AVG(capital_loss) FROM adult WHERE race = 'Black'", "adult"),
    Case(
        "SELECT COUNT(*) FROM adult WHERE native_country LIKE 'United%' AND workclass IS NOT NULL "
        "AND age BETWEEN 25 AND 45 AND race NOT IN ('White') AND (hours_per_week > 40 OR sex = 'Female')",
        "adult",
        name="rich-predicate",
    ),
    Case(
        "SELECT COUNT(*) FROM adult WHERE native_country ILIKE 'united%' AND LOWER(workclass) = 'private' "
        "AND LENGTH(race) > 4 AND UPPER(sex) = 'MALE' AND TRIM(relationship) <> 'Wife'",
        "adult",
        name="string-functions",
    ),
    Case(
        "SELECT COUNT(*) FROM adult WHERE COALESCE(occupation, 'none') = 'none' OR sex || race = 'MaleOther'",
        "adult",
        name="coalesce-concat",
    ),
    Case(
        "SELECT COUNT(*) FROM adult WHERE ABS(age - 40) < 5 AND FLOOR(hours_per_week / 10) = 4 "
        "AND CEIL(age / 7) > 5",
        "adult",
        name="abs-floor-ceil",
    ),
    Case(
        "SELECT COUNT(*) FROM adult WHERE ROUND(hours_per_week / 7, 1) = 5.7 OR ROUND(age) = 30",
        "adult",
        name="round",
    ),
    Case(
        "SELECT COUNT(*) FROM adult WHERE hours_per_week % 7 > 3 AND age % 3 = 1",
        "adult",
        name="modulo",
    ),
    Case(
        "SELECT COUNT(*) FROM adult WHERE age / (age - age) > 1 OR age % (age - age) = 0",
        "adult",
        name="division-by-zero-is-null",
    ),
    # Arithmetic far outside every double's range must not fail on any engine (PostgreSQL
    # raises on double overflow and underflow where DuckDB and Spark give ±inf and 0).
    Case(
        "SELECT COUNT(*) FROM adult WHERE age * 9223372036854775807 * 100 > 0",
        "adult",
        name="huge-int",
    ),
    Case(
        "SELECT COUNT(*) FROM adult WHERE capital_gain * 1e300 * 1e300 > 1e308 "
        "AND capital_gain * 1e-300 * 1e-300 = 0 AND 1e-300 / (capital_gain + 1) / 1e300 = 0 "
        "AND 1e300 / (capital_gain + 0.5) / 1e-300 > 0 AND hours_per_week + 1.7976931348623157e308 "
        "+ 1.7976931348623157e308 > 0",
        "adult",
        name="double-overflow-and-underflow",
    ),
    Case(
        "SELECT SUM(CASE WHEN age > 50 THEN hours_per_week ELSE 0 END), AVG(age * 2 + 1) FROM adult",
        "adult",
        name="expressions-in-aggregates",
    ),
    Case(
        "SELECT COUNT(*) AS n, SUM(age) AS s, AVG(age) AS a FROM adult WHERE age > 1000",
        "adult",
        name="empty-selection",
    ),
    Case("SELECT COUNT(DISTINCT age) FROM adult", "adult"),
    Case("SELECT VAR_POP(age), STDDEV(hours_per_week) FROM adult", "adult"),
    Case("SELECT MEDIAN(age), QUANTILE(hours_per_week, 0.75) FROM adult", "adult"),
    # GROUP BY public keys: every key answered, empty groups included; int keys; private keys.
    Case(
        "SELECT education, COUNT(*), AVG(age), SUM(capital_gain) FROM adult GROUP BY education",
        "adult",
    ),
    Case(
        "SELECT sex, race, COUNT(*) AS n, SUM(capital_loss) AS l FROM adult GROUP BY sex, race",
        "adult",
    ),
    Case("SELECT education_num, COUNT(*) FROM adult GROUP BY education_num", "adult"),
    Case("SELECT occupation, COUNT(*) FROM adult GROUP BY occupation", "adult"),
    # A person id as the privacy unit: every unit within its caps, so the hash key cannot matter.
    Case("SELECT sex, COUNT(*), AVG(income) FROM pums GROUP BY sex", "pums"),
    Case("SELECT educ, SUM(income) FROM pums WHERE age BETWEEN 25 AND 60 GROUP BY educ", "pums"),
    Case("SELECT COUNT(*), SUM(amount), AVG(amount) FROM visits", "visits"),
    Case("SELECT day, COUNT(*), SUM(amount) FROM visits GROUP BY day", "visits"),
    Case("SELECT day, AVG(amount) FROM visits WHERE amount > 10 GROUP BY day", "visits"),
    # Text read as numbers, booleans and dates; malformed values are NULL everywhere.
    Case("SELECT COUNT(n) AS cn, SUM(n) AS sn, AVG(n) AS an, COUNT(*) AS c FROM t", "messy"),
    Case("SELECT SUM(x) AS sx, COUNT(x) AS cx, COUNT(*) FROM t WHERE x > 0.25", "messy"),
    Case("SELECT k, COUNT(*) FROM t GROUP BY k", "messy"),
    Case("SELECT flag, COUNT(*), COUNT(n) FROM t GROUP BY flag", "messy"),
    Case(
        "SELECT COUNT(d), COUNT(*) FROM t WHERE YEAR(d) = 2021 OR MONTH(d) = 2 OR DAY(d) = 31",
        "messy",
        name="dates",
    ),
    Case("SELECT COUNT(*) FROM t WHERE n > 4 AND x < 1", "messy"),
]
"""Hand-picked queries: every engine runs them all."""


def sql_table_cases() -> list[Case]:
    """The answered queries of the SQL conformance table.

    The generated families (every aggregate × every grouping) run on PostgreSQL only; the
    hand-written ones, one per SQL shape (joins, CTEs, subqueries, per-unit aggregates, BigQuery
    syntax …), run on Spark too.
    """
    families = {c.name for c in generated()}
    return [
        Case(
            c.sql,
            c.dataset,
            name=f"sql-table:{c.name}",
            delta=c.delta,
            engines=("postgres",) if c.name in families else BOTH,
        )
        for c in answered()
    ]


def all_cases() -> list[Case]:
    """Every case of the table."""
    return CASES + sql_table_cases()
