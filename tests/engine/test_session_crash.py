"""Crash safety of the whole query path: sessions killed with SIGKILL at random points.

Each of 200 trials forks a gateway running real :class:`~dalenius.engine.session.Session` queries
(DuckDB + SQLite ledger) and kills it after a random delay — half the time counted from the fork,
so kills also land while the session opens, half from its first answer. Every answer the client
received must have a committed ledger entry recording exactly the noisy value it saw, and the
ledger must stay consistent: every reservation that passed the data gate stays charged, and only
those that never reached it are returned by ``recover``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.core.loss import PureDP
from dalenius.core.rng import system_random
from dalenius.ledger import open_ledger

CHILD = Path(__file__).with_name("crash_session_child.py")
TRIALS = 200
MAX_DELAY_MS = 40


def random_delay() -> float:
    return int.from_bytes(system_random().random_bytes(2), "big") % MAX_DELAY_MS / 1000


@pytest.mark.slow
def test_killed_sessions_never_release_an_uncharged_answer(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("x\n" + "\n".join(str(i) for i in range(1000)) + "\n")
    (tmp_path / "t.toml").write_text(
        '[dataset]\nname = "crash"\n[tables.t]\nsource = { csv = "t.csv" }\nprivacy_unit = "row"\n'
        'columns = { x = { type = "int", bounds = [0, 1000] } }\n'
    )
    ledger_path = str(tmp_path / "ledger.sqlite")
    with open_ledger(ledger_path) as ledger:
        ledger.set_budget("gateway", "crash", PureDP(Fraction(10**6)))
    env = os.environ | {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen(
        [sys.executable, str(CHILD), str(tmp_path / "t.toml"), ledger_path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert server.stdin is not None and server.stdout is not None

    def readline() -> str:
        line = server.stdout.readline()  # type: ignore[union-attr]
        assert line.endswith("\n"), f"the crash server stopped: {line!r}"
        return line.rstrip("\n")

    assert readline() == "server ready"
    received: dict[str, int] = {}
    try:
        for number in range(TRIALS):
            server.stdin.write(f"trial {number}\n")
            server.stdin.flush()
            pid = None
            answers: dict[str, int] = {}
            while pid is None or (number % 2 == 1 and not answers):
                line = readline()
                if line.startswith("pid "):
                    pid = int(line.split()[2])
                else:
                    collect(line, number, answers)
            time.sleep(random_delay())
            os.kill(pid, signal.SIGKILL)
            while not (line := readline()).startswith("done "):
                collect(line, number, answers)
            status = int(line.split()[2])
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
            received.update(answers)
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    assert len(received) >= TRIALS // 2
    with open_ledger(ledger_path) as ledger:
        assert ledger.verify() == []
        entries = {e.id: e for e in ledger.entries()}
        for entry_id, value in received.items():
            entry = entries.get(entry_id)
            assert entry is not None and entry.status == "committed", entry_id
            # The released count is the recorded noisy one, clamped to its non-negative range.
            [noisy] = json.loads(entry.answer or "{}")["values"]["m0"]
            assert value == max(noisy, 0), (entry_id, noisy, value)
        # Every reservation — committed, past the gate or still pending — is held until recover.
        assert ledger.spent("gateway", "crash") == PureDP(len(entries) * Fraction(1, 1000))
        assert {e.status for e in entries.values()} <= {"committed", "charged", "pending"}
        pending = sorted(i for i, e in entries.items() if e.status == "pending")
        charged = sorted(i for i, e in entries.items() if e.status == "charged")
        recovery = ledger.recover(timedelta(0))
        assert (sorted(recovery.returned), sorted(recovery.lost)) == (pending, charged)
        kept = len(entries) - len(pending)
        assert ledger.spent("gateway", "crash") == PureDP(kept * Fraction(1, 1000))
        assert ledger.verify() == []
    print(f"{TRIALS} kills: {len(entries)} reservations, {len(received)} answers received")


def collect(line: str, number: int, answers: dict[str, int]) -> None:
    kind, trial, entry_id, value = line.split(" ", 3)
    assert kind == "answer", f"the gateway failed: {line}"
    assert int(trial) == number
    answers[entry_id] = int(value)
