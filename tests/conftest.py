"""Shared fixtures: paths to the shared data and the test catalogs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from dalenius.executors import spark as spark_executor

# Property tests check values, never time: Hypothesis's per-example deadline (200 ms) only makes
# them fail on a loaded machine. Tests that set their own settings keep them.
settings.register_profile("dalenius", deadline=None)
settings.load_profile("dalenius")


def _quick_spark_jvm() -> None:
    """The Spark context the tests start compiles with the JIT's first tier and collects with one
    thread.

    A test's Spark queries each run for a fraction of a second on a few thousand rows: the JVM's
    optimising compiler and parallel collector spend more of both cores warming up than they ever
    win back (the Spark tests take about a fifth less time without them). These flags change how
    the JVM compiles and collects, never what a query computes. The context users get keeps the
    JVM's defaults (its test starts it in a fresh process, with the package's own settings).
    """
    key = "spark.driver.extraJavaOptions"
    spark_executor.SESSION_CONF[key] += " -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


_quick_spark_jvm()

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data folder; fails loudly (never skips) when it is missing."""
    if not (SHARED_DATA / "adult.csv").exists():
        pytest.fail(
            f"shared data not found at {SHARED_DATA}: tests need ../shared/data beside the repo"
        )
    return SHARED_DATA


@pytest.fixture(scope="session")
def adult_catalog_path(shared_data: Path) -> Path:
    """Catalog of the UCI Adult table (row-level privacy)."""
    return FIXTURES / "adult.toml"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every Spark test runs in one worker process, so one JVM serves them all.

    A JVM costs every worker that starts one its start-up, its JIT warm-up and two cores' worth of
    threads; with the tests in one xdist group (``--dist loadgroup`` in the Makefile) the other
    worker runs the rest of the suite meanwhile.
    """
    for item in items:
        if item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.xdist_group("spark"))
