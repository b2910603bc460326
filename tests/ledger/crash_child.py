"""The gateway the crash test kills: reserve → draw noise → commit → print the answer, in a loop.

Usage: ``python crash_child.py STORE TARGET SCHEMA`` (``STORE`` is ``sqlite`` or ``postgres``).

To make hundreds of kills cheap, this program is a pre-fork server: it imports everything once,
then for each ``trial N`` line on stdin forks a fresh gateway process, reports ``pid N PID`` and,
once that process is dead, ``done N STATUS``. The gateway opens the ledger itself (nothing is
shared with the server but the imported code) and loops until it is killed; each answer line
``answer N ENTRY_ID JSON`` is printed only after :meth:`commit` returned, with one ``write(2)``
of less than ``PIPE_BUF`` bytes, so the parent reads whole lines or nothing.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from fractions import Fraction

import psycopg  # noqa: F401 (imported before forking, so each gateway starts warm)

from dalenius.core.loss import PureDP
from dalenius.core.rng import system_random
from dalenius.ledger import ChargeRequest, Ledger, Reservation
from dalenius.ledger.postgres import PostgresLedger
from dalenius.ledger.sqlite import SqliteLedger

EPSILON = Fraction(1, 1000)


def say(text: str) -> None:
    os.write(1, (text + "\n").encode())


def gateway(store: str, target: str, schema: str, trial: int) -> None:
    ledger: Ledger = (
        SqliteLedger(target) if store == "sqlite" else PostgresLedger(target, schema=schema)
    )
    i = 0
    while True:
        request = ChargeRequest(
            principal="gateway",
            dataset="adult",
            loss=PureDP(EPSILON),
            request_key=f"{trial}-{i}",
            sql=f"SELECT COUNT(*) FROM adult -- trial {trial} request {i}",
            plan_hash=f"plan-{trial}-{i}",
        )
        outcome = ledger.reserve(request)
        if not isinstance(outcome, Reservation):
            raise AssertionError(f"unexpected cached answer for a fresh request: {outcome}")
        ledger.charge(outcome)
        noise = int(system_random().uint64(1)[0] % 2**32)
        answer = json.dumps({"trial": trial, "i": i, "noise": noise})
        entry_id = ledger.commit(outcome, answer)
        say(f"answer {trial} {entry_id} {answer}")
        i += 1


def main(argv: list[str]) -> int:
    store, target, schema = argv
    say("server ready")
    for line in sys.stdin:
        trial = int(line.split()[1])
        pid = os.fork()
        if pid == 0:
            try:
                gateway(store, target, schema, trial)
            except BaseException:
                say(f"error {trial} " + json.dumps(traceback.format_exc()))
                os._exit(1)
            os._exit(0)
        say(f"pid {trial} {pid}")
        _, status = os.waitpid(pid, 0)
        say(f"done {trial} {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
