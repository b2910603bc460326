"""``dalenius serve --demo --pg-port``: the printed psql line works, and ``kill -9`` in the middle
of a stream of wire queries leaves no answer the ledger did not charge."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from tests.server.live import free_port, wait_until_up

from dalenius.ledger import open_ledger


class _Demo:
    def __init__(self, folder: Path) -> None:
        self.port, self.pg_port = free_port(), free_port()
        command = [
            sys.executable, "-c", "import sys; from dalenius.cli.main import main; sys.exit(main())",
            "serve", "--demo", str(folder), "--port", str(self.port),
            "--pg-port", str(self.pg_port), "--log-level", "warning",
        ]  # fmt: skip
        env = os.environ | {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        self.output: list[str] = []
        assert self.process.stdout is not None
        self.psql_line = ""
        while not self.psql_line:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError("the demo exited:\n" + "".join(self.output))
            self.output.append(line)
            if line.strip().startswith("psql:"):
                self.psql_line = line.strip()
        threading.Thread(target=self._drain, daemon=True).start()
        wait_until_up(f"http://127.0.0.1:{self.port}", self.process, self.output)
        found = re.search(r"PGPASSWORD=(\S+) psql \"(.*)\"", self.psql_line)
        assert found, self.psql_line
        self.token, self.conninfo = found.group(1), found.group(2)

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[_Demo]:
    made = _Demo(tmp_path / "demo")
    try:
        yield made
    finally:
        made.stop()


def test_the_demo_prints_a_psql_line_that_connects(demo: _Demo) -> None:
    assert f"port={demo.pg_port}" in demo.conninfo and "dbname=census" in demo.conninfo
    with psycopg.connect(demo.conninfo, password=demo.token, sslmode="disable") as conn:
        conn.execute("SET dalenius.epsilon = 0.1")
        rows = conn.execute("SELECT sex, COUNT(*) FROM people GROUP BY sex").fetchall()
    assert sorted(r[0] for r in rows) == ["Female", "Male"]


def test_kill_9_mid_stream_leaves_no_answer_uncharged(demo: _Demo, tmp_path: Path) -> None:
    answered: list[str] = []
    first = threading.Event()

    def ask() -> None:
        try:
            with psycopg.connect(demo.conninfo, password=demo.token, sslmode="disable") as conn:
                conn.execute("SET dalenius.epsilon = 0.001")
                for i in range(500):
                    sql = f"SELECT COUNT(*) FROM people WHERE age > {i % 90} AND income > {i}"
                    conn.execute(sql).fetchall()
                    answered.append(sql)
                    first.set()
        except psycopg.Error:
            return  # the gateway was killed

    thread = threading.Thread(target=ask)
    thread.start()
    assert first.wait(timeout=120), "".join(demo.output)
    os.kill(demo.process.pid, signal.SIGKILL)
    demo.process.wait(timeout=30)
    thread.join(timeout=60)
    assert answered
    ledger = open_ledger(str(tmp_path / "demo" / "gateway.sqlite"))
    try:
        entries = ledger.entries(principal="analyst", dataset="census")
        charged = {entry.sql for entry in entries if entry.status == "committed"}
    finally:
        ledger.close()
    missing = [sql for sql in answered if sql not in charged]
    assert missing == []
