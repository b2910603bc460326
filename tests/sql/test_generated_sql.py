"""The SQL Dalenius writes for each engine, snapshotted: a refactor must not change it unnoticed.

Every statement generated for a set of queries (counts, sums, averages, variances, quantiles,
histograms, joins, per-unit subqueries, contribution bounding, extreme bounds, every total
arithmetic operator) on DuckDB, PostgreSQL and Spark, and the per-column conversion each
executor's view applies, are compared with ``snapshots/generated_sql.txt``. A deliberate change
of the SQL is recorded by running the test once with ``DALENIUS_UPDATE_SNAPSHOTS=1`` and
reviewing the diff of the snapshot file with the change.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dalenius.core.catalog import Column, parse_catalog
from dalenius.engine.session import Session, connect
from dalenius.executors import duckdb as duckdb_executor
from dalenius.executors import postgres as postgres_executor
from dalenius.executors import spark as spark_executor
from dalenius.sql.emit import exact_queries

SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "generated_sql.txt"
DIALECTS = ("duckdb", "postgres", "spark")
SALT = 12345

CATALOG = """
[tables.t]
source = { csv = "t.csv" }
privacy_unit = { column = "pid", max_rows = 3, max_groups = 2 }
[tables.t.columns]
pid = { type = "int", nullable = false }
i = { type = "int", bounds = [-50, 1000] }
f = { type = "float", bounds = [-1.5, 60.25] }
tiny = { type = "float", bounds = [0, 1e-300] }
huge = { type = "float", bounds = [-1e17, 1e17] }
k = { type = "int", keys = [1, 2, 3] }
s = { type = "str", keys = ["a", "b"] }
b = { type = "bool" }

[tables.r]
source = { csv = "t.csv" }
privacy_unit = "row"
[tables.r.columns]
i = { type = "int", bounds = [-50, 1000] }
f = { type = "float", bounds = [-1.5, 60.25] }
k = { type = "int", keys = [1, 2, 3] }
s = { type = "str", keys = ["a", "b"] }

[tables.p]
source = { csv = "p.csv" }
public = true
[tables.p.columns]
k = { type = "int" }
label = { type = "str" }
"""

QUERIES = (
    "SELECT COUNT(*), SUM(i), AVG(f), STDDEV(f), VARIANCE(i) FROM r",
    "SELECT k, COUNT(*), SUM(f) FROM r GROUP BY k",
    "SELECT s, k, COUNT(*), AVG(i) FROM t GROUP BY s, k",
    "SELECT b, COUNT(*) FROM t GROUP BY b",
    "SELECT COUNT(*), SUM(i), AVG(f) FROM t",
    "SELECT SUM(tiny), SUM(huge), STDDEV(huge), VARIANCE(tiny) FROM t",
    "SELECT MEDIAN(f), QUANTILE(i, 0.9) FROM r",
    "SELECT k, MEDIAN(f) FROM t GROUP BY k",
    "SELECT COUNT(DISTINCT k) FROM r",
    "SELECT SUM(i / 3), SUM(f / 2), SUM(f * i), SUM(f - i), SUM(f + 1) FROM r",
    "SELECT COUNT(*) FROM r WHERE i % 7 <> 0 AND f % 2 > 1 AND i / 10 = 3",
    "SELECT SUM(ROUND(f, 1)), SUM(ROUND(i, -1)), SUM(FLOOR(f)), SUM(CEIL(f)), SUM(ABS(f)) FROM r",
    "SELECT SUM(-f), SUM(COALESCE(i, 0)), SUM(LEAST(i, 10)), SUM(GREATEST(f, 0)) FROM r",
    "SELECT COUNT(*) FROM r WHERE s LIKE 'a%' AND i BETWEEN 1 AND 5 AND k IN (1, 2) "
    "AND f IS NOT NULL AND NOT (i > 3) OR s ILIKE 'B'",
    "SELECT SUM(CASE WHEN i > 3 THEN 1 ELSE 0 END), COUNT(UPPER(s)), COUNT(LOWER(TRIM(s))) FROM r",
    "SELECT label, COUNT(*), SUM(r.f) FROM r JOIN p ON r.k = p.k GROUP BY label",
    "SELECT AVG(total) FROM (SELECT pid, SUM(i) AS total FROM t GROUP BY pid) AS u",
    "SELECT k, COUNT(*) FROM t WHERE FLOOR(huge) > 0 GROUP BY k",
    "SELECT 'all', COUNT(*) FROM r GROUP BY 'all'",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, "
    "max_groups_contributed = 1) k, COUNT(*), SUM(i) FROM t GROUP BY k",
)

TYPES = ("int", "float", "str", "bool", "date")
PG_TYPES = ("int8", "float8", "numeric", "text", "bool", "date", "timestamp")
SPARK_TYPES = ("bigint", "double", "decimal(10,2)", "string", "boolean", "date", "timestamp_ntz")


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    folder = tmp_path_factory.mktemp("snapshot")
    (folder / "t.csv").write_text("pid,i,f,tiny,huge,k,s,b\n1,2,3.5,0,0,1,a,true\n")
    (folder / "p.csv").write_text("k,label\n1,one\n2,two\n")
    with connect(parse_catalog(CATALOG, base_dir=folder), budget=100) as s:
        yield s


def _exact_sql(session: Session) -> Iterator[str]:
    for sql in QUERIES:
        plan = session.prepare(sql, 1, 1e-6, salt=SALT).plan
        for dialect in DIALECTS:
            yield f"-- {dialect}: {sql}\n{exact_queries(plan, dialect, salt=SALT).all()}\n"


def _conversions() -> Iterator[str]:
    catalog = parse_catalog(
        '[tables.t]\nsource = { postgres = "postgresql://x/y", table = "t" }\nprivacy_unit = "row"\n'
        'columns = { x = "int" }'
    )
    table = catalog.tables[0]
    for declared in TYPES:
        column = Column(name='we"ird', type=declared)
        yield f"-- duckdb view, {declared}\n{duckdb_executor._converted(column)}\n"
        for pg_type in PG_TYPES:
            relation = postgres_executor._Relation(1, "s.t", "r", {'we"ird': ('We"ird', pg_type)})
            try:
                text = postgres_executor._converted(column, relation, table)
            except Exception as exc:
                text = f"refused: {type(exc).__name__}"
            yield f"-- postgres view, {pg_type} as {declared}\n{text}\n"
        for spark_type in SPARK_TYPES:
            try:
                text = spark_executor._converted(column, "We`ird", spark_type, table)
            except Exception as exc:
                text = f"refused: {type(exc).__name__}"
            yield f"-- spark view, {spark_type} as {declared}\n{text}\n"


_VISIBLE = {9: "\\t", 11: "\\v", 12: "\\f", 13: "\\r"}
"""White space other than newlines, written visibly (the grammars' patterns hold it raw)."""


def test_generated_sql_matches_the_snapshot(session: Session) -> None:
    text = "\n".join([*_exact_sql(session), *_conversions()]).translate(_VISIBLE)
    if os.environ.get("DALENIUS_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(text)
    expected = SNAPSHOT.read_text()
    if text != expected:
        got = text.split("\n")
        want = expected.split("\n")
        first = next(
            (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
            min(len(got), len(want)),
        )
        pytest.fail(
            f"generated SQL differs from {SNAPSHOT.name} at line {first + 1}:\n"
            f"got:      {got[first] if first < len(got) else '<end>'}\n"
            f"expected: {want[first] if first < len(want) else '<end>'}"
        )
