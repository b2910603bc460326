"""Constant-time release: declared row caps, deadlines from public facts, every outcome at T.

No test asserts a wall-clock time: the clock's deadline is checked by recording the instant the
release waits for, and misses are forced with deadlines no engine can meet.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest

import dalenius
from dalenius.cli.main import main
from dalenius.core.catalog import Catalog, load_catalog, parse_catalog
from dalenius.core.deadlines import (
    Deadlines,
    load_deadlines,
    public_fingerprint,
    write_deadlines,
)
from dalenius.core.errors import (
    CatalogError,
    ConfigurationError,
    DeadlineError,
    EvaluationFailed,
    ExecutionError,
    QueryError,
)
from dalenius.core.loss import ApproxDP, PureDP
from dalenius.engine import timing
from dalenius.engine.calibrate import calibrate, class_queries
from dalenius.engine.result import PerturbationResult
from dalenius.engine.session import Session
from dalenius.engine.timing import plan_class
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

CATALOG = """
[dataset]
name = "ct"
constant_time = true

[tables.t]
source = {{ csv = "t.csv" }}
privacy_unit = {{ column = "pid", max_rows = 2 }}
max_row_count = {rows}

[tables.t.columns]
pid = "int"
x = {{ type = "int", bounds = [0, 10] }}
g = {{ type = "str", keys = ["a", "b"] }}
"""


def write_catalog(folder: Path, *, rows: int = 100, constant_time: bool = True) -> Path:
    lines = ["pid,x,g"] + [f"{i},{i % 10},a" for i in range(30)] + ["999,5,b"] * 20
    (folder / "t.csv").write_text("\n".join(lines) + "\n")
    text = CATALOG.format(rows=rows)
    if not constant_time:
        text = text.replace("constant_time = true", "constant_time = false")
    path = folder / "ct.toml"
    path.write_text(text)
    return path


def with_deadlines(catalog: Catalog, **millis: float) -> None:
    assert catalog.deadlines_path is not None
    fingerprint = public_fingerprint(catalog, DuckDBExecutor(catalog).engine_version)
    write_deadlines(Deadlines(dict(millis), fingerprint), catalog.deadlines_path)


PRODUCTS = ("hierarchy", "density", "synthetic", "aim", "bounds", "contributions")
"""The release products' classes calibrated for a table with one keyed and one bounded column
(whose unit is a column, so cap suggestions too)."""


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The instants releases waited for (instead of waiting)."""
    instants: list[float] = []
    monkeypatch.setattr(timing, "wait_until", instants.append)
    return instants


# -- catalog -----------------------------------------------------------------------------------


def test_catalog_reads_row_caps_constant_time_and_the_default_deadlines_file(
    tmp_path: Path,
) -> None:
    catalog = load_catalog(write_catalog(tmp_path))
    assert catalog.constant_time
    assert catalog.tables[0].max_row_count == 100
    assert catalog.deadlines_path == (tmp_path / "ct.deadlines.toml").resolve()


@pytest.mark.parametrize("value", ["0", "-3", '"many"', "true", "1.5"])
def test_a_bad_max_row_count_is_refused_naming_the_table(tmp_path: Path, value: str) -> None:
    write_catalog(tmp_path)
    text = (
        (tmp_path / "ct.toml")
        .read_text()
        .replace("max_row_count = 100", f"max_row_count = {value}")
    )
    with pytest.raises(CatalogError, match="max_row_count must be an integer") as info:
        parse_catalog(text, base_dir=tmp_path)
    assert "'t'" in str(info.value)


def test_constant_time_needs_every_table_to_declare_its_row_cap(tmp_path: Path) -> None:
    write_catalog(tmp_path)
    text = (tmp_path / "ct.toml").read_text().replace("max_row_count = 100\n", "")
    with pytest.raises(CatalogError, match="constant_time needs a declared max_row_count"):
        parse_catalog(text, base_dir=tmp_path)


def test_constant_time_on_another_engine_is_refused(tmp_path: Path) -> None:
    write_catalog(tmp_path)
    text = (
        (tmp_path / "ct.toml")
        .read_text()
        .replace("constant_time = true", 'constant_time = true\nengine = "spark"')
    )
    with pytest.raises(CatalogError, match="duckdb engine only"):
        parse_catalog(text, base_dir=tmp_path)


# -- loading -----------------------------------------------------------------------------------


@pytest.mark.parametrize("constant_time", [True, False])
def test_a_table_over_its_declared_row_cap_is_refused_when_opened(
    tmp_path: Path, constant_time: bool
) -> None:
    catalog = load_catalog(write_catalog(tmp_path, rows=49, constant_time=constant_time))
    with pytest.raises(CatalogError, match="50 rows, more than the declared max_row_count 49"):
        DuckDBExecutor(catalog)


def test_a_parquet_table_over_its_row_cap_is_refused_when_opened(tmp_path: Path) -> None:
    write_catalog(tmp_path)
    import duckdb

    duckdb.sql(f"COPY (SELECT range AS x FROM range(12)) TO '{tmp_path / 'p.parquet'}'")
    catalog = parse_catalog(
        '[tables.p]\nsource = { parquet = "p.parquet" }\nprivacy_unit = "row"\nmax_row_count = 11\n'
        'columns = { x = { type = "int", bounds = [0, 20] } }',
        base_dir=tmp_path,
    )
    with pytest.raises(CatalogError, match="12 rows"):
        DuckDBExecutor(catalog)
    ok = replace(catalog, tables=(replace(catalog.tables[0], max_row_count=12),))
    assert DuckDBExecutor(ok).fetch('SELECT COUNT(*) FROM "p"') == [(12,)]


def test_constant_time_loading_keeps_at_most_the_row_cap_of_each_person(tmp_path: Path) -> None:
    catalog = load_catalog(write_catalog(tmp_path))
    executor = DuckDBExecutor(catalog)
    # 30 persons with one row each, and person 999 with 20 rows of which 2 are kept.
    assert executor.fetch('SELECT COUNT(*), COUNT(DISTINCT pid) FROM "t"') == [(32, 31)]
    assert executor.fetch("SELECT current_setting('disabled_optimizers')")[0][0]


def test_without_constant_time_the_raw_rows_stay(tmp_path: Path) -> None:
    catalog = load_catalog(write_catalog(tmp_path, constant_time=False))
    assert DuckDBExecutor(catalog).fetch('SELECT COUNT(*) FROM "t"') == [(50,)]


# -- deadlines before the gate -----------------------------------------------------------------


def test_an_uncalibrated_dataset_refuses_before_spending_anything(tmp_path: Path) -> None:
    catalog = load_catalog(write_catalog(tmp_path))
    with dalenius.connect(catalog, budget=1) as session:
        with pytest.raises(ConfigurationError, match="no calibrated deadlines"):
            session.query('SELECT COUNT(*) FROM "t"', epsilon=0.5)
        assert session.remaining() == PureDP(Fraction(1))
        assert not session.ledger.entries()


def test_deadlines_calibrated_for_other_public_facts_are_stale(tmp_path: Path) -> None:
    catalog = load_catalog(write_catalog(tmp_path))
    with_deadlines(catalog, scan=1000.0)
    bigger = load_catalog(write_catalog(tmp_path, rows=200))
    with dalenius.connect(bigger, budget=1) as session:
        with pytest.raises(ConfigurationError, match="calibrated for other public facts"):
            session.query('SELECT COUNT(*) FROM "t"', epsilon=0.5)
        assert session.remaining() == PureDP(Fraction(1))


def test_a_class_without_a_deadline_is_refused_before_spending(tmp_path: Path) -> None:
    catalog = load_catalog(write_catalog(tmp_path))
    with_deadlines(catalog, scan=1000.0)
    with dalenius.connect(catalog, budget=1) as session:
        with pytest.raises(ConfigurationError, match="no calibrated deadline for group_by"):
            session.query('SELECT g, COUNT(*) FROM "t" GROUP BY g', epsilon=0.5)
        assert session.remaining() == PureDP(Fraction(1))


def test_plan_classes_come_from_the_plan(tmp_path: Path) -> None:
    catalog = load_catalog(write_catalog(tmp_path))
    session = Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))
    cases = {
        'SELECT COUNT(*), SUM(x) FROM "t"': "scan",
        'SELECT g, COUNT(*) FROM "t" GROUP BY g': "group_by",
        'SELECT MEDIAN(x) FROM "t"': "quantile",
        'SELECT g, MAX(x) FROM "t" GROUP BY g': "quantile",
    }
    for sql, expected in cases.items():
        assert plan_class(session.prepare(sql, 1).plan) == expected, sql


# -- every outcome at the deadline -------------------------------------------------------------


def test_a_synthesiser_reports_its_rounds_only_once_the_answer_has_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When each round ends is timing the deadline hides: in constant-time mode the progress
    callback hears every round, but only after the release waited for its deadline."""
    catalog = load_catalog(write_catalog(tmp_path))
    with_deadlines(catalog, aim=60_000.0, synthetic=60_000.0)
    events: list[str] = []
    monkeypatch.setattr(timing, "wait_until", lambda _: events.append("deadline"))
    budget = ApproxDP(Fraction(4), Fraction(1, 10**6))
    with dalenius.connect(catalog, budget=budget) as session:
        for method in ("aim", "mst"):
            events.clear()
            session.synthesize(
                "t",
                epsilon=1,
                delta=1e-9,
                method=method,
                progress=lambda done: events.append(f"round {done.round}"),
            )
            assert events[0] == "deadline" and len(events) > 1
            assert events[1:] == [f"round {k}" for k in range(1, len(events))]


def test_an_answer_leaves_exactly_at_the_deadline(tmp_path: Path, recorded: list[float]) -> None:
    catalog = load_catalog(write_catalog(tmp_path))
    with_deadlines(catalog, scan=60_000.0)
    with dalenius.connect(catalog, budget=1) as session:
        started: list[float] = []
        original = session._deadline

        def spy(plan, start):  # type: ignore[no-untyped-def]
            started.append(start)
            return original(plan, start)

        session._deadline = spy  # type: ignore[method-assign]
        result = session.query('SELECT COUNT(*) FROM "t"', epsilon=0.5)
        assert result.rows
        assert recorded == [pytest.approx(started[0] + 60.0, abs=1e-9)]


def test_a_failure_also_leaves_at_the_deadline(tmp_path: Path, recorded: list[float]) -> None:
    catalog = load_catalog(write_catalog(tmp_path))
    with_deadlines(catalog, scan=60_000.0)

    class Failing(DuckDBExecutor):
        def fetch(self, sql: str) -> list[tuple[object, ...]]:
            raise ExecutionError("engine failure")

    with dalenius.connect(catalog, budget=1, executor=Failing(catalog)) as session:
        with pytest.raises(EvaluationFailed) as caught:
            session.query('SELECT COUNT(*) FROM "t"', epsilon=0.5)
        assert type(caught.value) is EvaluationFailed  # the fixed failure, not the deadline
        assert len(recorded) == 1


def test_a_miss_gives_the_fixed_deadline_outcome_charged_and_audited(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    catalog = load_catalog(write_catalog(tmp_path))
    with_deadlines(catalog, scan=0.001)
    with dalenius.connect(catalog, budget=1) as session:
        with pytest.raises(DeadlineError) as info:
            session.query('SELECT COUNT(*) FROM "t"', epsilon=0.5, idempotency_key="k")
        assert str(info.value) == DeadlineError.message
        assert info.value.code == "deadline"
        assert session.remaining() == PureDP(Fraction(1, 2))
        assert [a.outcome for a in session.ledger.audit()].count("deadline") == 1
        assert "missed" in caplog.text
        # The same request again: the recorded outcome, at no new cost.
        with pytest.raises(DeadlineError):
            session.query('SELECT COUNT(*) FROM "t"', epsilon=0.5, idempotency_key="k")
        assert session.remaining() == PureDP(Fraction(1, 2))


# -- calibration -------------------------------------------------------------------------------


def test_class_queries_cover_scan_group_by_and_quantile(tmp_path: Path) -> None:
    catalog = load_catalog(write_catalog(tmp_path))
    assert [q.plan_class for q in class_queries(catalog)] == [
        *("scan", "group_by", "quantile"),
        *PRODUCTS,  # one keyed column: no flows
    ]


def test_a_table_whose_unit_is_one_row_calibrates_perturbation_of_every_column(
    tmp_path: Path, recorded: list[float]
) -> None:
    path = write_catalog(tmp_path)
    path.write_text(path.read_text().replace('{ column = "pid", max_rows = 2 }', '"row"'))
    catalog = load_catalog(path)
    queries = {q.plan_class: q for q in class_queries(catalog)}
    assert queries["perturbation"].sql == "PERTURB(x, g) FROM t"
    with_deadlines(catalog, perturbation=60_000.0)
    session = Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))
    session.ledger.set_budget(session.analyst, "ct", PureDP(Fraction(2)))
    result = queries["perturbation"].run(session)
    assert isinstance(result, PerturbationResult) and len(recorded) == 1


@pytest.mark.slow
def test_calibrate_writes_deadlines_the_session_then_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], recorded: list[float]
) -> None:
    path = write_catalog(tmp_path, rows=300)
    code = main(["calibrate", str(path), "--runs", "3", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["deadlines_ms"]) == {"scan", "group_by", "quantile", *PRODUCTS}
    catalog = load_catalog(path)
    deadlines = load_deadlines(catalog.deadlines_path)  # type: ignore[arg-type]
    assert deadlines is not None and deadlines.runs == 3 and deadlines.margin == 2.0
    for name, value in deadlines.deadlines_ms.items():
        assert value >= deadlines.measured_ms[name] * 2
    # The session must take its deadline from the file calibrate wrote (same fingerprint). The
    # calibrated values are 2x a quiet measurement, which a loaded machine can overrun; so the
    # file keeps calibrate's fingerprint and only its values are lengthened, then the release
    # must have waited for exactly arrival + that value (the wait is recorded, not slept).
    long_ms = {name: 600_000.0 + i for i, name in enumerate(sorted(deadlines.deadlines_ms))}
    assert catalog.deadlines_path is not None
    write_deadlines(replace(deadlines, deadlines_ms=long_ms), catalog.deadlines_path)
    with dalenius.connect(catalog, budget=1) as session:
        before = time.monotonic()
        session.query('SELECT g, COUNT(*) FROM "t" GROUP BY g', epsilon=0.5)
        after = time.monotonic()
    assert len(recorded) == 1
    wait = long_ms["group_by"] / 1000
    assert before + wait <= recorded[0] <= after + wait


def test_calibrate_refuses_a_table_without_a_row_cap(tmp_path: Path) -> None:
    catalog = load_catalog(write_catalog(tmp_path, constant_time=False))
    loose = replace(catalog, tables=(replace(catalog.tables[0], max_row_count=None),))
    with pytest.raises(ConfigurationError, match="declares no max_row_count"):
        calibrate(loose, runs=1)


def test_class_queries_include_a_join_of_two_private_tables_on_the_unit(tmp_path: Path) -> None:
    path = write_catalog(tmp_path)
    text = path.read_text() + "\n[tables.u]\n" + _second_table()
    catalog = parse_catalog(text, base_dir=tmp_path)
    queries = {q.plan_class: q for q in class_queries(catalog)}
    assert set(queries) == {"scan", "group_by", "quantile", "join", *PRODUCTS}
    session = Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))
    for name, query in queries.items():
        if query.release is None:
            assert plan_class(session.prepare(query.sql, 1, query.delta).plan) == name


def _second_table() -> str:
    return (
        'source = { csv = "t.csv" }\nprivacy_unit = { column = "pid", max_rows = 2 }\n'
        'max_row_count = 100\ncolumns = { pid = "int", x = { type = "int", bounds = [0, 10] } }\n'
    )


# -- the garbage collector stays out of release windows ------------------------------------------


def test_no_automatic_collection_inside_a_release_and_a_sweep_before_its_outcome(
    tmp_path: Path, recorded: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside the window the collector is paused; the sweep runs in it before the outcome is
    ready (so calibration times it), and automatic collection is back once the outcome left."""
    import gc

    from dalenius.engine import collector

    catalog = load_catalog(write_catalog(tmp_path))
    with_deadlines(catalog, scan=60_000.0)
    seen: list[tuple[bool, int, int]] = []
    original_sweep = collector.sweep

    def spy() -> None:
        seen.append((gc.isenabled(), collector.windows_open(), len(recorded)))
        original_sweep()

    monkeypatch.setattr(collector, "sweep", spy)
    assert gc.isenabled()
    with dalenius.connect(catalog, budget=1) as session:
        session.query('SELECT COUNT(*) FROM "t"', epsilon=0.25)
        # A failure after the gate is swept too.
        monkeypatch.setattr(session.executor, "fetch", _failing_fetch)
        with pytest.raises(EvaluationFailed):
            session.query('SELECT COUNT(*) FROM "t" WHERE x > 1', epsilon=0.25)
    # Each sweep ran with automatic collection off, in an open window, before its release left.
    assert seen == [(False, 1, 0), (False, 1, 1)]
    assert gc.isenabled()
    assert collector.windows_open() == 0


def test_the_collector_is_paused_from_arrival_through_planning_and_after_a_refusal(
    tmp_path: Path, recorded: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning, before the release clock starts, runs with automatic collection off too: where
    a collection lands depends on what earlier answers allocated. A refusal resumes it."""
    import gc

    from dalenius.engine import collector

    catalog = load_catalog(write_catalog(tmp_path))
    with_deadlines(catalog, scan=60_000.0)
    planning: list[tuple[bool, int]] = []
    with dalenius.connect(catalog, budget=1) as session:
        original = session.prepare

        def spy(*args: object, **kwargs: object) -> object:
            planning.append((gc.isenabled(), collector.windows_open()))
            return original(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(session, "prepare", spy)
        session.query('SELECT COUNT(*) FROM "t"', epsilon=0.25)
        with pytest.raises(QueryError):
            session.query('SELECT COUNT(*) FROM "nope"', epsilon=0.25)
    assert planning == [(False, 1), (False, 1)]
    assert gc.isenabled() and collector.windows_open() == 0
    assert len(recorded) == 1  # the answer waited for its deadline (recorded, not slept)


def _failing_fetch(sql: str) -> list[tuple[object, ...]]:
    raise ExecutionError("engine failure")


def test_outside_constant_time_the_collector_is_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dalenius.engine import collector

    calls: list[str] = []
    monkeypatch.setattr(collector, "pause", lambda: calls.append("pause"))
    monkeypatch.setattr(collector, "sweep", lambda: calls.append("sweep"))
    catalog = load_catalog(write_catalog(tmp_path, constant_time=False))
    with dalenius.connect(catalog, budget=1) as session:
        session.query('SELECT COUNT(*) FROM "t"', epsilon=0.5)
    assert calls == []


def test_windows_nest_across_threads() -> None:
    import gc

    from dalenius.engine import collector

    assert gc.isenabled()
    collector.pause()
    collector.pause()
    collector.resume()
    assert not gc.isenabled()
    collector.resume()
    assert gc.isenabled()
    collector.resume()  # an extra resume is harmless
    assert gc.isenabled() and collector.windows_open() == 0


def test_a_sweep_freezes_survivors_so_the_next_one_walks_only_new_objects() -> None:
    import gc

    from dalenius.engine import collector

    try:
        collector.sweep()
        assert gc.get_freeze_count() > 0
        assert sum(gc.get_count()) < 50
    finally:
        collector.thaw()
    assert gc.get_freeze_count() == 0


def test_a_subquery_used_as_a_value_is_refused_free_on_a_constant_time_dataset(
    tmp_path: Path,
) -> None:
    catalog = write_catalog(tmp_path)
    with dalenius.connect(catalog, budget=1) as session:
        before = session.remaining()
        with pytest.raises(QueryError, match="not answered on a constant-time dataset"):
            session.query("SELECT COUNT(*) FROM t WHERE x > (SELECT AVG(x) FROM t)", epsilon=0.5)
        assert session.remaining() == before
