"""The same queries through the PostgreSQL listener and through HTTP, from one run.

Starts ``dalenius serve --demo --pg-port`` in a subprocess (a fresh demo folder, SQLite ledger),
then, from this process, as the demo analyst:

* **cached**: the same query repeated (answered from the ledger's record, free) — over one
  keep-alive HTTP connection (httpx) and over one psycopg connection (extended protocol, as
  psycopg sends every query);
* **fresh**: distinct small queries (a COUNT under a new filter, ε = 0.001 each), planned,
  charged, read and committed, alternating between the two front ends;
* **200 connections**: 200 psycopg connections opened at once (SCRAM sign-in), each asking one
  cached query; all must be answered.

It prints the median and p90 latency of each phase on each front end and the ratio wire ÷ HTTP.
The latency includes each client library's own cost, which is what a user of that library sees.

Run it with ``.venv/bin/python bench/wire.py`` (needs the ``server`` extra and psycopg).
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psycopg


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(folder: Path) -> tuple[subprocess.Popen[str], int, str, str]:
    port, pg_port = _free_port(), _free_port()
    # The demo's configuration with rate limits that do not bind: the benchmark measures
    # latency, not the limiter (which both front ends share).
    from dalenius.server.startup import _CONFIG_TEXT

    folder.mkdir(parents=True)
    config = _CONFIG_TEXT.replace("requests_per_minute = 600", "requests_per_minute = 1000000")
    (folder / "gateway.toml").write_text(config.replace("burst = 60", "burst = 100000"))
    command = [
        sys.executable, "-c", "import sys; from dalenius.cli.main import main; sys.exit(main())",
        "serve", "--demo", str(folder), "--port", str(port), "--pg-port", str(pg_port),
        "--log-level", "warning",
    ]  # fmt: skip
    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert process.stdout is not None
    conninfo = token = ""
    for line in process.stdout:
        found = re.search(r"PGPASSWORD=(\S+) psql \"(.*)\"", line)
        if found:
            token, conninfo = found.group(1), found.group(2)
            break
    threading.Thread(target=lambda: [None for _ in process.stdout or ()], daemon=True).start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/openapi.json").status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    return process, port, token, conninfo


def _summary(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered) * 1000, ordered[int(0.9 * (len(ordered) - 1))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=300, help="cached requests per front end")
    parser.add_argument("--fresh", type=int, default=100, help="fresh queries per front end")
    parser.add_argument("--connections", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dalenius-wire-bench-") as scratch:
        process, port, token, conninfo = _start(Path(scratch) / "demo")
        try:
            run(port, token, conninfo, args)
        finally:
            process.terminate()
            process.wait(timeout=30)


def run(port: int, token: str, conninfo: str, args: argparse.Namespace) -> None:
    http = httpx.Client(
        base_url=f"http://127.0.0.1:{port}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    wire = psycopg.connect(conninfo, password=token, sslmode="disable", autocommit=True)
    wire.execute("SET dalenius.epsilon = 0.01")
    cached = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"

    def over_http(sql: str, epsilon: float) -> None:
        answer = http.post("/v1/datasets/census/query", json={"sql": sql, "epsilon": epsilon})
        answer.raise_for_status()
        answer.json()

    def over_wire(sql: str) -> None:
        wire.execute(sql).fetchall()

    over_http(cached, 0.01)  # both front ends now repeat a recorded answer
    for _ in range(20):  # warm-up: connections, caches, the JIT-free paths
        over_http(cached, 0.01)
        over_wire(cached)
    timings: dict[str, list[float]] = {"http": [], "wire": []}
    for _ in range(args.repeats):
        for name, call in (
            ("http", lambda: over_http(cached, 0.01)),
            ("wire", lambda: over_wire(cached)),
        ):
            start = time.perf_counter()
            call()
            timings[name].append(time.perf_counter() - start)
    fresh: dict[str, list[float]] = {"http": [], "wire": []}
    wire.execute("SET dalenius.epsilon = 0.001")
    for i in range(args.fresh):
        for name in ("http", "wire"):
            sql = f"SELECT COUNT(*) FROM people WHERE income > {i * 2 + (name == 'wire')}"
            start = time.perf_counter()
            over_http(sql, 0.001) if name == "http" else over_wire(sql)
            fresh[name].append(time.perf_counter() - start)
    print(f"{'phase':<10} {'front end':<6} {'median ms':>10} {'p90 ms':>8}")
    for phase, data in (("cached", timings), ("fresh", fresh)):
        for name in ("http", "wire"):
            median, p90 = _summary(data[name])
            print(f"{phase:<10} {name:<6} {median:>10.2f} {p90:>8.2f}")
        ratio = statistics.median(data["wire"]) / statistics.median(data["http"])
        print(f"{phase:<10} wire ÷ HTTP (median): {ratio:.2f}x")
    wire.close()
    http.close()

    answered: list[int] = []
    failed: list[str] = []
    barrier = threading.Barrier(args.connections)

    def one(index: int) -> None:
        try:
            with psycopg.connect(conninfo, password=token, sslmode="disable") as conn:
                conn.execute("SET dalenius.epsilon = 0.01")
                barrier.wait(timeout=120)
                while True:  # until answered: busy refusals are free and say "retry"
                    try:
                        conn.execute(cached).fetchall()
                        answered.append(index)
                        return
                    except psycopg.errors.TooManyConnections:
                        time.sleep(0.02)  # the analyst's running-query limit
        except Exception as error:
            failed.append(f"{type(error).__name__}: {error}")

    start = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(args.connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.perf_counter() - start
    print(
        f"{args.connections} concurrent connections: {len(answered)} answered, "
        f"{len(failed)} failed, in {took:.1f} s"
    )
    if failed:
        print("first failure:", failed[0])


if __name__ == "__main__":
    main()
