"""A gateway running real sessions, for the crash test: query → print, in a loop, until killed.

Usage: ``python crash_session_child.py CATALOG LEDGER``. A pre-fork server: it imports Dalenius
once, then for each ``trial N`` line on stdin forks a fresh gateway, reports ``pid N PID`` and,
once the gateway is dead, ``done N STATUS``. Each gateway opens its own session and loops over
distinct queries (so none is served from the ledger's record); it prints ``answer N ENTRY_ID
VALUE`` only after :meth:`Session.query` returned — that is, after the ledger commit — with one
``write(2)`` of less than ``PIPE_BUF`` bytes.
"""

from __future__ import annotations

import os
import sys
import traceback

import dalenius
from dalenius.engine.session import connect

EPSILON = "0.001"


def say(text: str) -> None:
    os.write(1, (text + "\n").encode())


def gateway(catalog: str, ledger: str, trial: int) -> None:
    with connect(catalog, ledger=ledger, analyst="gateway") as session:
        i = 0
        while True:
            i += 1
            result = session.query(
                f"SELECT COUNT(*) FROM t WHERE x >= {trial * 100_000 + i}", epsilon=EPSILON
            )
            say(f"answer {trial} {result.entry_id} {result.rows[0][0]}")


def main() -> None:
    catalog, ledger = sys.argv[1], sys.argv[2]
    assert dalenius.connect is connect
    say("server ready")
    for line in sys.stdin:
        trial = int(line.split()[1])
        pid = os.fork()
        if pid == 0:
            try:
                gateway(catalog, ledger, trial)
            except BaseException:
                traceback.print_exc()
                os._exit(3)
            os._exit(0)
        say(f"pid {trial} {pid}")
        _, status = os.waitpid(pid, 0)
        say(f"done {trial} {status}")


if __name__ == "__main__":
    main()
