"""The Spark executor: typed Parquet columns, ``spark`` sources, refusals and data versions."""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

from dalenius.core.catalog import Catalog, parse_catalog
from dalenius.core.dialect import SPARK
from dalenius.core.errors import CatalogError, ExecutionError
from dalenius.executors.spark import SparkExecutor, shared_session
from dalenius.sql.emit.dialects import exact_sum

pytestmark = pytest.mark.spark


def catalog(folder: Path, source: str, columns: str) -> Catalog:
    text = (
        f'[dataset]\nname = "s"\nengine = "spark"\n\n[tables.t]\nsource = {source}\n'
        f'privacy_unit = "row"\n\n[tables.t.columns]\n{columns}'
    )
    (folder / "cat.toml").write_text(text)
    return parse_catalog(text, file=str(folder / "cat.toml"), base_dir=folder)


@pytest.fixture
def typed(tmp_path: Path) -> Path:
    table = pa.table(
        {
            "i32": pa.array([1, None], pa.int32()),
            "f32": pa.array([0.5, float("nan")], pa.float32()),
            "dec": pa.array([Decimal("2.50"), Decimal("-2.50")], pa.decimal128(10, 2)),
            "ts": pa.array([datetime.datetime(2021, 2, 3, 23, 59), None], pa.timestamp("us")),
            "s": pa.array(["x", ""], pa.string()),
            "b": pa.array([True, None], pa.bool_()),
            "extra": pa.array([7, 8], pa.int64()),
        }
    )
    pq.write_table(table, tmp_path / "typed.parquet")
    return tmp_path


def test_typed_parquet_columns_are_read_exactly(typed: Path) -> None:
    columns = 'i32 = "int"\nf32 = "float"\ndec = "int"\nts = "date"\ns = "str"\nb = "bool"\n'
    cat = catalog(typed, '{ parquet = "typed.parquet" }', columns)
    with SparkExecutor(cat, partitions=1) as ex:
        ex.prepare(cat.tables[0])
        rows = ex.fetch(
            'SELECT "i32", "f32", "dec", "ts", "s", "b" FROM "t" ORDER BY "i32" NULLS LAST'
        )
        with pytest.raises(ExecutionError, match="extra"):
            ex.fetch('SELECT "extra" FROM "t"')  # only declared columns exist
    first, second = rows
    assert first == (1, 0.5, 3, datetime.date(2021, 2, 3), "x", True)
    assert second[0] is None and second[1] is None  # NaN is read as NULL (the totality rule)
    assert second[2] == -3 and second[4] is None  # half away from zero; '' is NULL


@pytest.mark.parametrize(("columns", "column"), [('f32 = "int"', "f32"), ('b = "int"', "b")])
def test_a_type_that_would_need_a_guess_is_refused(typed: Path, columns: str, column: str) -> None:
    with pytest.raises(CatalogError) as info:
        SparkExecutor(catalog(typed, '{ parquet = "typed.parquet" }', columns))
    assert f"column '{column}'" in str(info.value)
    assert info.value.fix


def test_a_missing_column_is_named(typed: Path) -> None:
    with pytest.raises(CatalogError, match="has no column 'nope'"):
        SparkExecutor(catalog(typed, '{ parquet = "typed.parquet" }', 'nope = "int"'))


def test_spark_sources_read_relative_paths_with_a_format(typed: Path) -> None:
    (typed / "dir").mkdir()
    os.replace(typed / "typed.parquet", typed / "dir" / "part-0.bin")
    source = '{ spark = "dir", options = { format = "parquet" } }'
    cat = catalog(typed, source, 'extra = "int"')
    with SparkExecutor(cat) as ex:
        ex.prepare(cat.tables[0])
        assert ex.fetch('SELECT SUM("extra") FROM "t"') == [(15,)]


def test_spark_sources_read_tables_of_the_session(tmp_path: Path) -> None:
    frame = shared_session().createDataFrame([(1, "a"), (2, "b")], "n long, k string")
    frame.createOrReplaceGlobalTempView("dalenius_test_people")
    cat = catalog(tmp_path, '{ spark = "global_temp.dalenius_test_people" }', 'n = "int"')
    with SparkExecutor(cat) as ex:
        ex.prepare(cat.tables[0])
        assert ex.fetch('SELECT SUM("n") FROM "t"') == [(3,)]
        assert len(ex.data_version(cat.tables[0])) == 16


def test_the_data_version_follows_the_files(typed: Path) -> None:
    cat = catalog(typed, '{ parquet = "typed.parquet" }', 'extra = "int"')
    with SparkExecutor(cat) as ex:
        before = ex.data_version(cat.tables[0])
        assert ex.data_version(cat.tables[0]) == before
        pq.write_table(
            pa.table({"extra": pa.array([1, 2, 3], pa.int64())}), typed / "typed.parquet"
        )
        assert ex.data_version(cat.tables[0]) != before


def test_an_unreadable_source_is_a_catalog_error(tmp_path: Path) -> None:
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(CatalogError, match=r"bad\.parquet.* is not a complete Parquet file"):
        SparkExecutor(catalog(tmp_path, '{ parquet = "bad.parquet" }', 'x = "int"'))


def test_close_drops_the_views(typed: Path) -> None:
    cat = catalog(typed, '{ parquet = "typed.parquet" }', 'extra = "int"')
    ex = SparkExecutor(cat)
    ex.prepare(cat.tables[0])
    assert ex.fetch('SELECT COUNT(*) FROM "t"') == [(2,)]
    ex.close()
    with pytest.raises(ExecutionError, match="t"):
        ex.fetch('SELECT COUNT(*) FROM "t"')


def test_an_integer_sum_beyond_bigint_is_exact(tmp_path: Path) -> None:
    # Spark's SUM(BIGINT) is a BIGINT and raises on overflow; the dialect sums DECIMAL(38, 0).
    big = 2**62
    pq.write_table(pa.table({"n": pa.array([big] * 8, pa.int64())}), tmp_path / "big.parquet")
    cat = catalog(tmp_path, '{ parquet = "big.parquet" }', 'n = "int"')
    exact = exact_sum(exp.column("n", quoted=True), SPARK).sql("spark")
    with SparkExecutor(cat) as ex:
        ex.prepare(cat.tables[0])
        assert ex.fetch(f'SELECT {exact} FROM "t"') == [(8 * big,)]
        with pytest.raises(ExecutionError, match="overflow"):
            ex.fetch('SELECT SUM("n") FROM "t"')


@pytest.mark.parametrize("bound", [2**21 - 1, 2**42 - 1, None])
def test_a_sum_of_values_within_a_bound_is_exact_in_fewer_slices(
    tmp_path: Path, bound: int | None
) -> None:
    """Values proven within ``±bound`` are summed in one slice (below 2^21) or two (below 2^42)
    instead of three; each form gives Python's exact sum, negative values and the bound's ends
    included, and its type is the exact DECIMAL(38, 0) of the three-slice form.
    """
    top = bound if bound is not None else 2**62
    values = [top, -top, top, top - 1, -1, 0, 1, -(2**20), 2**20 - 1, 12345, -top, top]
    values = [v for v in values if abs(v) <= top]
    pq.write_table(pa.table({"n": pa.array(values, pa.int64())}), tmp_path / "n.parquet")
    cat = catalog(tmp_path, '{ parquet = "n.parquet" }', 'n = "int"')
    exact = exact_sum(exp.column("n", quoted=True), SPARK, bound=bound).sql("spark")
    slices = {2**21 - 1: 1, 2**42 - 1: 2, None: 3}[bound]
    assert exact.count("SUM(") == slices
    with SparkExecutor(cat) as ex:
        ex.prepare(cat.tables[0])
        assert ex.fetch(f'SELECT {exact} FROM "t"') == [(Decimal(sum(values)),)]
        kind = ex._spark.sql(f'SELECT {exact} AS s FROM "t"').schema["s"].dataType
        assert kind.simpleString() == "decimal(38,0)"


def test_a_materialized_expression_is_evaluated_once_and_released(typed: Path) -> None:
    """Spark's grammar has no ``MATERIALIZED``; the executor evaluates such an expression once
    and the statement reads the kept rows, however often it refers to them. A UDF counts its
    calls: ten rows read once are ten calls, where Spark itself evaluates the expression once
    per reference. The kept rows are released when the statement ends.
    """
    cat = catalog(typed, '{ parquet = "typed.parquet" }', 'extra = "int"')
    ex = SparkExecutor(cat)
    spark = ex._spark
    calls = spark.sparkContext.accumulator(0)

    def persisted() -> set[int]:
        return set(spark.sparkContext._jsc.getPersistentRDDs().keySet().toArray())

    persisted_before = persisted()

    def counted(x: int) -> int:
        calls.add(1)
        return x

    # Deterministic, as Spark takes a file's rows to be: an expression read twice is inlined
    # twice (Spark keeps a nondeterministic expression's one evaluation for its references).
    udf = pytest.importorskip("pyspark.sql.functions").udf
    spark.udf.register("counted", udf(counted, "bigint", useArrow=False))
    body = "SELECT counted(id) AS x FROM range(10)"
    two_reads = "SELECT COUNT(*), SUM(p.x) FROM a AS p JOIN a AS q ON p.x = q.x"
    assert ex.fetch(f"WITH a AS MATERIALIZED ({body}) {two_reads}") == [(10, 45)]
    assert calls.value == 10
    assert ex.fetch(f"WITH a AS ({body}) {two_reads}") == [(10, 45)]
    assert calls.value >= 30  # as written: at least once for each side of the join
    assert not [t for t in spark.catalog.listTables() if t.name.startswith("__kept_")]
    assert persisted() <= persisted_before
    # A hint Spark cannot parse is never passed on; an expression read after a kept one sees it.
    sql = (
        f"WITH a AS MATERIALIZED ({body}), b AS NOT MATERIALIZED (SELECT x + 1 AS y FROM a), "
        "c AS MATERIALIZED (SELECT SUM(y) AS t FROM b WHERE y > 0) SELECT t, (SELECT COUNT(*) FROM b) FROM c"
    )
    before = calls.value
    assert ex.fetch(sql) == [(55, 10)]
    assert calls.value == before + 10
    ex.close()


def test_a_kept_expression_stopped_at_the_time_limit_is_released(typed: Path) -> None:
    """The time limit stops the job that keeps an expression, as it stops the statement; the
    error is the time limit's, and nothing kept is left behind. A limit that passes before any
    job starts (Spark still planning) stops the jobs submitted after it."""
    cat = catalog(typed, '{ parquet = "typed.parquet" }', 'extra = "int"')
    ex = SparkExecutor(cat)
    ex.time_limit = 1.0
    slow = "SELECT COUNT(*) AS n FROM range(100000000000)"
    with pytest.raises(ExecutionError, match="time limit of 1 s"):
        ex.fetch(f"WITH a AS MATERIALIZED ({slow}) SELECT n FROM a")
    ex.time_limit = 0.001
    for sql in (slow, f"WITH a AS MATERIALIZED ({slow}) SELECT n FROM a"):
        with pytest.raises(ExecutionError, match=r"time limit of 0\.001 s"):
            ex.fetch(sql)
    assert not [t for t in ex._spark.catalog.listTables() if t.name.startswith("__kept_")]
    ex.time_limit = None
    assert ex.fetch("WITH a AS MATERIALIZED (SELECT 1 AS n) SELECT n FROM a") == [(1,)]
    ex.close()


def test_each_statement_shuffles_into_partitions_chosen_from_the_files_it_reads(
    typed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By default a statement's shuffles get one partition per ``SHUFFLE_BYTES`` of the files it
    reads (at least 4, a power of two), set when Spark plans it; ``partitions=`` or the setting in
    ``conf=`` is kept as given. The size here is the typed file's, the bytes per partition a
    fifth of it: 5 partitions' worth, so 8.
    """
    from dalenius.executors import spark as module

    size = (typed / "typed.parquet").stat().st_size
    monkeypatch.setattr(module, "SHUFFLE_BYTES", size // 5)
    cat = catalog(typed, '{ parquet = "typed.parquet" }', 'extra = "int"\ns = "str"')
    shuffled = 'SELECT "s", COUNT(*) FROM (SELECT * FROM "t" DISTRIBUTE BY "extra") GROUP BY "s"'
    with SparkExecutor(cat) as ex:
        ex.prepare(cat.tables[0])
        plan = ex._sql(shuffled)._jdf.queryExecution().executedPlan().toString()
        assert re.search(r"hashpartitioning\(extra#\d+L?, 8\)", plan), plan
        assert set(ex.fetch(shuffled)) == {(None, 1), ("x", 1)}
        assert ex._spark.conf.get("spark.sql.shuffle.partitions") == "8"
        ex.fetch("SELECT COUNT(*) FROM range(10)")  # reads no file: the context's 4
        assert ex._spark.conf.get("spark.sql.shuffle.partitions") == "4"
    for given in ({"partitions": 3}, {"conf": {"spark.sql.shuffle.partitions": "3"}}):
        with SparkExecutor(cat, **given) as ex:  # type: ignore[arg-type]
            ex.prepare(cat.tables[0])
            assert set(ex.fetch(shuffled)) == {(None, 1), ("x", 1)}
            assert ex._spark.conf.get("spark.sql.shuffle.partitions") == "3"


def test_the_context_dalenius_starts_says_nothing_on_stderr_but_errors(tmp_path: Path) -> None:
    """Spark's start-up notes (its default log4j profile, the loopback hostname, the shell's log
    level, the native Hadoop library) are not printed above the user's answer: the context logs
    errors only (``spark-log4j2.properties``). Only the JVM's own line about its incubator
    module is left, which no logging setting reaches.
    """
    script = (
        "from dalenius.executors.spark import shared_session\n"
        "print(shared_session().sql('SELECT 41 + 1').collect()[0][0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=True,
    )
    assert done.stdout.strip() == "42"
    noise = [
        line
        for line in done.stderr.splitlines()
        if line.strip() and not line.startswith("WARNING: Using incubator modules")
    ]
    assert noise == [], done.stderr
