"""What the data gate costs: its synced ledger transaction against the whole query.

Run ``.venv/bin/python bench/gate.py`` (``--queries 200``). A session over the Adult data (the
test catalog, DuckDB) with a SQLite ledger file answers distinct ``COUNT`` queries (so none is
served from the ledger's record); the time inside :meth:`Ledger.charge` — the gate's durable
write, one more ``fsync`` per query than commit alone — is measured beside each whole query.

Prints the mean query time, the gate's median and p90, and the gate's share of the query time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import dalenius
from dalenius.ledger.base import Reservation
from dalenius.ledger.sqlite import SqliteLedger

CATALOG = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "adult.toml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    ledger = SqliteLedger(str(folder / "ledger.sqlite"))
    gate_times: list[float] = []
    charge = ledger.charge

    def timed(reservation: Reservation) -> None:
        started = time.perf_counter()
        charge(reservation)
        gate_times.append(time.perf_counter() - started)

    ledger.charge = timed  # type: ignore[method-assign]
    with dalenius.connect(CATALOG, budget=10**6, ledger=ledger) as session:
        session.query("SELECT COUNT(*) FROM adult WHERE age >= 0", epsilon=0.01)  # warm up
        gate_times.clear()
        started = time.perf_counter()
        for i in range(args.queries):
            session.query(
                f"SELECT COUNT(*) FROM adult WHERE age >= {17 + i % 60} AND hours_per_week >= {i}",
                epsilon=0.01,
            )
        total = time.perf_counter() - started
    gate_times.sort()
    n = len(gate_times)
    print(
        f"{n} queries: {total / n * 1000:.2f} ms per query; the gate's synced write: median "
        f"{gate_times[n // 2] * 1000:.2f} ms, p90 {gate_times[int(n * 0.9)] * 1000:.2f} ms; "
        f"share of query time {sum(gate_times) / total:.1%}"
    )


if __name__ == "__main__":
    main()
