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


def _count_if(*predicates: str) -> str:
    """One query counting the rows that satisfy each predicate (one Spark job, not many)."""
    return ", ".join(f"SUM(CASE WHEN {p} THEN 1 ELSE 0 END)" for p in predicates)


CASES: list[Case] = [
    Case(
        "SELECT COUNT(*), COUNT(occupation), SUM(age), SUM(capital_gain), AVG(hours_per_week), "
        "SUM(capital_loss), AVG(capital_loss) FROM adult WHERE race <> 'White'",
        "adult",
        name="counts-sums-averages",
    ),
    Case(
        "SELECT "
        + _count_if(
            "native_country LIKE 'United%' AND workclass IS NOT NULL AND age BETWEEN 25 AND 45 "
            "AND race NOT IN ('White') AND (hours_per_week > 40 OR sex = 'Female')",
            "native_country ILIKE 'united%' AND LOWER(workclass) = 'private' AND LENGTH(race) > 4 "
            "AND UPPER(sex) = 'MALE' AND TRIM(relationship) <> 'Wife'",
            "COALESCE(occupation, 'none') = 'none' OR sex || race = 'MaleOther'",
            "ABS(age - 40) < 5 AND FLOOR(hours_per_week / 10) = 4 AND CEIL(age / 7) > 5",
            "ROUND(hours_per_week / 7, 1) = 5.7 OR ROUND(age) = 30 OR ROUND(capital_gain, -3) = 3000",
            "hours_per_week % 7 > 3 AND age % 3 = 1 AND (age / 10) % 2 = 0",
            "age / (age - age) > 1 OR age % (age - age) = 0",
            "age * 9223372036854775807 * 100 > 0",
            "NOT (education IN ('Bachelors', 'Masters')) AND NOT age BETWEEN 30 AND 40",
        )
        + " FROM adult",
        "adult",
        name="predicates",
    ),
    # Arithmetic far outside every double's range must not fail on any engine (PostgreSQL
    # raises on double overflow and underflow where DuckDB and Spark give ±inf and 0).
    Case(
        "SELECT "
        + _count_if(
            "capital_gain * 1e300 * 1e300 > 1e308",
            "capital_gain * 1e-300 * 1e-300 = 0",
            "1e-300 / (capital_gain + 1) / 1e300 = 0",
            "1e300 / (capital_gain + 0.5) / 1e-300 > 0",
            "hours_per_week + 1.7976931348623157e308 + 1.7976931348623157e308 > 0",
            "hours_per_week - 1.7976931348623157e308 - 1.7976931348623157e308 < 0",
        )
        + " FROM adult",
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
    Case(
        "SELECT COUNT(DISTINCT age), VAR_POP(age), STDDEV(hours_per_week), MEDIAN(age), "
        "QUANTILE(hours_per_week, 0.75) FROM adult",
        "adult",
        name="distinct-variance-quantiles",
    ),
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
    Case("SELECT occupation, COUNT(*) FROM adult GROUP BY occupation", "adult", delta=1e-6),
    # A person id as the privacy unit: every unit within its caps, so the hash key cannot matter.
    Case(
        "SELECT sex, COUNT(*), SUM(income), AVG(income) FROM pums WHERE age BETWEEN 25 AND 60 "
        "GROUP BY sex",
        "pums",
    ),
    Case("SELECT COUNT(*), SUM(amount), AVG(amount) FROM visits", "visits"),
    Case("SELECT day, COUNT(*), AVG(amount) FROM visits WHERE amount > 10 GROUP BY day", "visits"),
    # Text read as numbers, booleans and dates; malformed values are NULL everywhere.
    Case(
        "SELECT COUNT(n), SUM(n), AVG(n), COUNT(x), SUM(x), COUNT(*), "
        + _count_if("n > 4 OR x < 1", "x > 0.25")
        + " FROM t",
        "messy",
        name="messy-numbers",
    ),
    Case("SELECT k, COUNT(*), COUNT(n) FROM t GROUP BY k", "messy"),
    Case(
        "SELECT flag, COUNT(*), COUNT(d), "
        + _count_if("YEAR(d) = 2021", "MONTH(d) = 2 OR DAY(d) = 31")
        + " FROM t GROUP BY flag",
        "messy",
        name="messy-flags-and-dates",
    ),
    # Date constants shifted by intervals (folded when planned) and SUBSTRING on rows.
    Case(
        "SELECT COUNT(*), "
        + _count_if(
            "d < DATE '2021-01-31' + INTERVAL '1' MONTH",
            "d >= DATE '2022-03-31' - INTERVAL '1' YEAR - INTERVAL '1' MONTH",
            "d BETWEEN DATE '2020-02-29' + INTERVAL '1' DAY AND DATE '2020-02-29' + INTERVAL '2' YEAR",
        )
        + " FROM t",
        "messy",
        name="date-intervals",
    ),
    Case(
        "SELECT SUBSTRING(education, 1, 2) AS e, COUNT(*), "
        + _count_if(
            "SUBSTRING(native_country, 2, 5) = 'nited'",
            "SUBSTRING(occupation FROM 3) LIKE 'ch%'",
            "SUBSTRING(workclass, 20, 3) = ''",
            "SUBSTR(race, 1, 0) = ''",
        )
        + " FROM adult GROUP BY e",
        "adult",
        name="substring",
    ),
    # A private subquery correlated on the unit and by inequalities (TPC-H Q21's shape).
    Case(
        "SELECT sex, COUNT(*), SUM(age) FROM pums p WHERE EXISTS (SELECT * FROM visits v "
        "WHERE v.pid = p.pid AND v.income >= p.income - 1000) AND NOT EXISTS (SELECT 1 FROM "
        "visits w WHERE w.pid = p.pid AND w.income <> p.income AND w.income > 10) GROUP BY sex",
        "pums",
        name="exists-correlated-inequalities",
    ),
    # Correlated by equalities alone: DuckDB writes SEMI / ANTI JOIN, the others EXISTS.
    Case(
        "SELECT sex, COUNT(*), SUM(age) FROM pums p WHERE EXISTS (SELECT * FROM visits v "
        "WHERE v.pid = p.pid AND v.income > 20000) AND NOT EXISTS (SELECT 1 FROM visits w "
        "WHERE w.pid = p.pid AND w.income < 1000) GROUP BY sex",
        "pums",
        name="exists-correlated-equalities",
    ),
    Case(
        "SELECT COUNT(*), SUM(age) FROM pums p WHERE EXISTS (SELECT * FROM (SELECT pid, "
        "SUM(income) AS s FROM visits GROUP BY pid) t WHERE t.pid = p.pid AND t.s > 30000)",
        "pums",
        name="exists-per-unit-subquery",
    ),
    # Odd lines are read or skipped alike on every engine; none is an error.
    Case(
        "SELECT k, COUNT(*), COUNT(n), SUM(n), COUNT(note) FROM t GROUP BY k",
        "odd",
        name="odd-lines",
    ),
    # The analyst's forms: the NULL bin of a CASE without ELSE (row level and bounded), the
    # simple CASE, SELECT aliases in HAVING/ORDER BY, post-processing, GROUP BY with no aggregate.
    Case(
        "SELECT CASE WHEN age < 25 THEN 1 WHEN age < 45 THEN 2 WHEN age < 65 THEN 3 END AS bin, "
        "COUNT(*) FROM adult GROUP BY bin",
        "adult",
        name="case-null-bin",
    ),
    Case(
        "SELECT CASE WHEN day IN ('mon', 'tue') THEN 'early' END AS d, COUNT(*), SUM(amount) "
        "FROM visits GROUP BY d",
        "visits",
        name="case-null-bin-bounded",
    ),
    Case(
        "SELECT CASE sex WHEN 'Male' THEN 'm' WHEN 'Female' THEN 'f' END AS s, COUNT(*) AS n, "
        "SQRT(COUNT(*)) AS r FROM adult WHERE age >= 30 GROUP BY s HAVING n > 10 ORDER BY n * 2",
        "adult",
        name="simple-case-aliases-post",
    ),
    Case(
        "SELECT race, SUM(n), SUM(inc) FROM (SELECT pid, race, COUNT(*) AS n, SUM(income) AS inc "
        "FROM pums GROUP BY pid, race) AS t GROUP BY race",
        "pums",
        name="per-unit-and-group-subquery",
    ),
    Case(
        "SELECT occupation FROM adult GROUP BY occupation",
        "adult",
        name="group-by-without-aggregate",
        delta=1e-6,
    ),
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
