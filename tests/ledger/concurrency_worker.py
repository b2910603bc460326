"""A gateway-like worker process for the concurrency test: many threads reserve and commit at once.

Usage: ``python concurrency_worker.py STORE TARGET SCHEMA ANALYSTS THREADS EPSILON ROLLBACK_EVERY TAG``.
``STORE`` is ``sqlite`` or ``postgres``; ``TARGET`` the file or URL; ``ANALYSTS`` a comma-separated
list the threads take turns charging; every ``ROLLBACK_EVERY``-th request fails before its noise
is drawn and is rolled back (0: none). Threads start together at a barrier. Prints one JSON object:
the ids of the entries whose answers were released, and counts of refusals and rollbacks.
"""

from __future__ import annotations

import json
import sys
import threading
from fractions import Fraction

from dalenius.core.errors import BudgetExceededError
from dalenius.core.loss import PureDP
from dalenius.core.rng import system_random
from dalenius.ledger import ChargeRequest, Ledger, Reservation
from dalenius.ledger.postgres import PostgresLedger
from dalenius.ledger.sqlite import SqliteLedger

CONNECTIONS = 4  # ledgers (connections) per process; threads share them round-robin


def main(argv: list[str]) -> int:
    store, target, schema, analysts, threads, epsilon, rollback_every, tag = argv
    names = analysts.split(",")
    count = int(threads)
    every = int(rollback_every)
    loss = PureDP(Fraction(epsilon))
    ledgers: list[Ledger] = [
        SqliteLedger(target) if store == "sqlite" else PostgresLedger(target, schema=schema)
        for _ in range(CONNECTIONS)
    ]
    barrier = threading.Barrier(count)
    lock = threading.Lock()
    released: list[str] = []
    refused = [0]
    rolled_back = [0]
    errors: list[str] = []

    def one(i: int) -> None:
        ledger = ledgers[i % CONNECTIONS]
        request = ChargeRequest(
            principal=names[i % len(names)],
            dataset="adult",
            loss=loss,
            request_key=f"{tag}-{i}",
            sql=f"SELECT COUNT(*) FROM adult -- {tag} {i}",
            plan_hash=f"plan-{tag}-{i}",
        )
        barrier.wait()
        try:
            outcome = ledger.reserve(request)
            assert isinstance(outcome, Reservation)
            if every and i % every == 0:
                ledger.release(outcome, "simulated refusal before the data gate")
                with lock:
                    rolled_back[0] += 1
                return
            ledger.charge(outcome)
            noise = int(system_random().uint64(1)[0] % 1000)
            ledger.commit(outcome, json.dumps({"count": noise}))
            with lock:
                released.append(outcome.id)
        except BudgetExceededError:
            with lock:
                refused[0] += 1
        except Exception as error:  # reported to the parent, which fails the test
            with lock:
                errors.append(f"{type(error).__name__}: {error}")

    workers = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for ledger in ledgers:
        ledger.close()
    out = {"released": released, "refused": refused[0], "rolled_back": rolled_back[0]}
    print(json.dumps(out | {"errors": errors}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
