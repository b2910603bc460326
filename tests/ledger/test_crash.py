"""Crash safety: gateways killed with SIGKILL at random points never release an uncharged answer.

Each of 200 trials forks a fresh gateway process (``crash_child.py``) that loops reserve → draw
noise → commit → print, and kills it with SIGKILL after a random delay: in half of the trials
counted from the fork (so kills land while the ledger is being opened, too), in the other half
from its first answer. Afterwards every answer line the parent received must have a committed
entry holding exactly that answer, the store must open cleanly and pass its integrity checks, and
the total charged must equal the sum of every entry's charge (lost reservations included).
"""

from __future__ import annotations

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
from dalenius.ledger import Ledger

CHILD = Path(__file__).with_name("crash_child.py")
TRIALS = 200
EPSILON = Fraction(1, 1000)  # must match crash_child.EPSILON
MAX_DELAY_MS = 40


def random_delay() -> float:
    """A uniform delay in [0, MAX_DELAY_MS) ms (timing only: any value must pass)."""
    return int.from_bytes(system_random().random_bytes(2), "big") % MAX_DELAY_MS / 1000


class Server:
    """The pre-fork server of crash_child.py, driven one trial at a time."""

    def __init__(self, kind: str, target: str, schema: str) -> None:
        env = os.environ | {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), kind, target, schema],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.readline() == "server ready"

    def readline(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.endswith("\n"), f"the crash server stopped: {line!r}"
        return line.rstrip("\n")

    def trial(self, number: int, *, after_first_answer: bool) -> tuple[dict[str, str], int]:
        """Run one trial; return the answers received (entry id → answer) and the exit status."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"trial {number}\n")
        self.process.stdin.flush()
        answers: dict[str, str] = {}
        pid = None
        while pid is None or (after_first_answer and not answers):
            line = self.readline()
            if line.startswith("pid "):
                pid = int(line.split()[2])
            else:
                self._collect(line, number, answers)
        time.sleep(random_delay())
        os.kill(pid, signal.SIGKILL)
        while True:
            line = self.readline()
            if line.startswith("done "):
                return answers, int(line.split()[2])
            self._collect(line, number, answers)

    @staticmethod
    def _collect(line: str, number: int, answers: dict[str, str]) -> None:
        kind, trial, entry_id, answer = line.split(" ", 3)
        assert kind == "answer", f"the gateway failed: {line}"
        assert int(trial) == number
        answers[entry_id] = answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0


def check_ledger(ledger: Ledger, received: dict[str, str]) -> dict[str, int]:
    assert ledger.verify() == []
    entries = ledger.entries()
    committed = {e.id: e.answer for e in entries if e.status == "committed"}
    missing = {k: v for k, v in received.items() if committed.get(k) != v}
    assert missing == {}, "answers were released without a committed charge"
    assert all(e.status in {"committed", "charged", "pending"} for e in entries)
    assert ledger.spent("gateway", "adult") == PureDP(len(entries) * EPSILON)
    pending = sorted(e.id for e in entries if e.status == "pending")
    charged = sorted(e.id for e in entries if e.status == "charged")
    recovery = ledger.recover(timedelta(0))
    # Killed before the data gate: returned; killed after it: lost, and still charged.
    assert (sorted(recovery.returned), sorted(recovery.lost)) == (pending, charged)
    assert ledger.spent("gateway", "adult") == PureDP((len(entries) - len(pending)) * EPSILON)
    assert ledger.verify() == []
    return {
        "entries": len(entries),
        "committed": len(committed),
        "received": len(received),
        "returned": len(pending),
        "lost": len(charged),
    }


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_sigkilled_gateways_never_release_uncharged_answers(
    kind: str, store_factory, pg_url: str
) -> None:
    store = store_factory(kind)
    setup = store.open()
    setup.set_budget("gateway", "adult", PureDP(Fraction(10**6)))
    setup.close()
    target = store.url if kind == "sqlite" else pg_url
    server = Server(kind, target, store.schema or "-")
    received: dict[str, str] = {}
    try:
        for number in range(TRIALS):
            answers, status = server.trial(number, after_first_answer=number % 2 == 1)
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
            assert received.keys().isdisjoint(answers)
            received.update(answers)
    finally:
        server.close()
    assert len(received) >= TRIALS // 2  # every second trial ran until at least one answer
    stats = check_ledger(store.open(), received)
    assert stats["committed"] >= stats["received"]
    print(f"crash test on {kind}: {TRIALS} kills, {stats}")
