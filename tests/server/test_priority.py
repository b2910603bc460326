"""Query work runs below the gateway's own priority, engine threads included (Linux only)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from dalenius.server.priority import QUERY_NICENESS, at_low_priority

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")


def _nice_of_threads() -> dict[int, int]:
    niceness = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:  # the thread ended between the listing and the read
            continue
        fields = stat.rsplit(")", 1)[1].split()
        niceness[int(task.name)] = int(fields[16])  # field 19 of stat, after pid and comm
    return niceness


def test_an_engine_opened_at_low_priority_runs_all_its_threads_there() -> None:
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    before = set(_nice_of_threads())
    connection = at_low_priority(duckdb.connect)
    try:
        connection.execute("SELECT SUM(range) FROM range(100000)").fetchall()
        started = {tid: nice for tid, nice in _nice_of_threads().items() if tid not in before}
        assert started, "DuckDB started no threads of its own"
        assert all(nice >= max(own, QUERY_NICENESS) for nice in started.values()), started
    finally:
        connection.close()
    # The caller's own priority is untouched.
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own


def test_an_error_in_low_priority_work_reaches_the_caller() -> None:
    def fail() -> None:
        raise ValueError("no such catalog")

    with pytest.raises(ValueError, match="no such catalog"):
        at_low_priority(fail)
