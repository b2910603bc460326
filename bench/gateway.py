"""Load on the HTTP gateway: 200 concurrent clients from a second process, on loopback.

The script starts a real gateway (``dalenius serve`` in a subprocess) on a synthetic census with a
SQLite ledger (``--postgres``: the local PostgreSQL server, in a fresh schema), creates analysts
with budgets and a total cap on the dataset, and then starts a *client process* that opens
``--clients`` concurrent connections, each sending ``--requests`` requests — explains, distinct
queries (charged until budgets run out) and repeated queries (answered from the ledger for free).
It stops by itself when every client is done.

Checks, afterwards: no 5xx answer, every answer 200 or a 409 budget refusal; the ledger charged
exactly the answers released (each analyst within its budget, all within the total cap) and its
integrity check passes. It prints throughput and latency percentiles. Run it with
``.venv/bin/python bench/gateway.py`` (needs the ``server`` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from fractions import Fraction
from pathlib import Path

import httpx

ANALYSTS = 10
EPSILON = Fraction(1, 20)
BUDGET = Fraction(1)  # 20 answers per analyst
TOTAL_CAP = Fraction(6)  # fewer than 10 × 20 answers: the shared cap binds too
SERVE = [sys.executable, "-c", "import sys; from dalenius.cli.main import main; sys.exit(main())"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- the client process ---------------------------------------------------------------------


async def client(
    number: int, base: str, token: str, requests: int, results: list[tuple[str, int, float]]
) -> None:
    limits = httpx.Limits(max_connections=1)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(
        base_url=base, headers=headers, limits=limits, timeout=120
    ) as http:
        for i in range(requests):
            kind = ("explain", "query", "query", "repeat")[(number + i) % 4]
            if kind == "repeat":
                sql = "SELECT sex, COUNT(*) FROM people GROUP BY sex"
            else:
                sql = f"SELECT COUNT(*), AVG(income) FROM people WHERE age >= {(number * 31 + i) % 90}"
            path = "/v1/datasets/census/" + ("explain" if kind == "explain" else "query")
            started = time.perf_counter()
            response = await http.post(path, json={"sql": sql, "epsilon": str(EPSILON)})
            elapsed = time.perf_counter() - started
            tag = "explain"
            if kind != "explain":
                if response.status_code != 200:
                    tag = "refused"
                else:
                    tag = "cached" if response.json()["cached"] else "charged"
            results.append((tag, response.status_code, elapsed))


async def drive(base: str, tokens: list[str], clients: int, requests: int) -> dict[str, object]:
    results: list[tuple[str, int, float]] = []
    started = time.perf_counter()
    await asyncio.gather(
        *(client(n, base, tokens[n % len(tokens)], requests, results) for n in range(clients))
    )
    return {"seconds": time.perf_counter() - started, "results": results}


def client_main(args: argparse.Namespace) -> None:
    tokens = json.loads(sys.stdin.read())
    out = asyncio.run(drive(args.base, tokens, args.clients, args.requests))
    print(json.dumps(out))


# -- the driver -----------------------------------------------------------------------------


def start_gateway(folder: Path, ledger: str) -> tuple[subprocess.Popen[str], str, str]:
    port = free_port()
    config = folder / "gateway.toml"
    config.write_text(
        f'[gateway]\nlisten = "127.0.0.1:{port}"\nledger = "{ledger}"\n'
        "[limits]\nrequests_per_minute = 1000000\nburst = 100000\n"
        # Throughput with every client's queries admitted (the running limit is measured by
        # tests/server/test_load.py).
        "concurrent_queries = 100000\nquery_workers = 8\n"
    )
    process = subprocess.Popen(
        [
            *SERVE,
            "serve",
            "--config",
            str(config),
            "--issue-token",
            "curator:root",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    token = None
    while token is None:
        line = process.stdout.readline()
        if not line:
            raise SystemExit("the gateway did not start")
        found = re.search(r"\(shown once\): (\S+)", line)
        token = found.group(1) if found else None
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            httpx.get(f"{base}/v1/openapi.json", timeout=1)
            break
        except httpx.TransportError:
            time.sleep(0.1)
    return process, base, token


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--requests", type=int, default=10, help="requests per client")
    parser.add_argument("--people", type=int, default=20_000)
    parser.add_argument("--postgres", action="store_true", help="use the local PostgreSQL server")
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main(args)
        return 0

    from dalenius.core.loss import PureDP
    from dalenius.datasets.census import write_demo
    from dalenius.ledger import open_ledger

    schema = None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        catalog = write_demo(folder, n=args.people)
        ledger_url = str(folder / "gateway.sqlite")
        if args.postgres:
            import psycopg

            schema = f"dalenius_bench_{os.getpid()}"
            pg = os.environ.get(
                "DALENIUS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
            )
            with psycopg.connect(pg, autocommit=True) as admin:
                admin.execute(f"CREATE SCHEMA {schema}")
            ledger_url = f"{pg}?options=-csearch_path%3D{schema}"
        gateway, base, root = start_gateway(folder, ledger_url)
        try:
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {root}"}) as admin:
                admin.post("/v1/datasets", json={"catalog": str(catalog)}).raise_for_status()
                admin.put(
                    "/v1/datasets/census/total-cap", json={"epsilon": str(TOTAL_CAP)}
                ).raise_for_status()
                tokens = []
                for i in range(ANALYSTS):
                    created = admin.post("/v1/principals", json={"name": f"analyst{i}"}).json()
                    tokens.append(created["token"]["token"])
                    admin.put(f"/v1/principals/analyst{i}/grants/census").raise_for_status()
                    admin.put(
                        f"/v1/budgets/analyst{i}/census", json={"epsilon": str(BUDGET)}
                    ).raise_for_status()
            driver = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--client",
                    "--base",
                    base,
                    "--clients",
                    str(args.clients),
                    "--requests",
                    str(args.requests),
                ],
                input=json.dumps(tokens),
                capture_output=True,
                text=True,
                check=True,
            )
            out = json.loads(driver.stdout)
        finally:
            gateway.terminate()
            gateway.wait(timeout=60)

        results = [(k, int(s), float(t)) for k, s, t in out["results"]]
        seconds = float(out["seconds"])
        statuses = Counter(s for _, s, _ in results)
        answered = sum(1 for k, _, _ in results if k == "charged")
        latencies = [t for _, _, t in results]
        print(
            f"gateway load: {args.clients} concurrent clients × {args.requests} requests, "
            f"{'PostgreSQL' if args.postgres else 'SQLite'} ledger, {args.people:,} people"
        )
        print(f"  requests      {len(results):>8}   in {seconds:.2f} s")
        print(f"  throughput    {len(results) / seconds:>8.1f} requests/s")
        print(f"  latency p50   {percentile(latencies, 0.50) * 1000:>8.1f} ms")
        print(f"  latency p95   {percentile(latencies, 0.95) * 1000:>8.1f} ms")
        print(f"  latency p99   {percentile(latencies, 0.99) * 1000:>8.1f} ms")
        for kind in ("explain", "charged", "cached", "refused"):
            times = [t for k, _, t in results if k == kind]
            if times:
                print(
                    f"    {kind:<8} n={len(times):<5} p50 {percentile(times, 0.5) * 1000:7.1f} ms"
                    f"   p99 {percentile(times, 0.99) * 1000:7.1f} ms"
                )
        print(f"  statuses      {dict(sorted(statuses.items()))}")
        print(
            f"  answers charged {answered} (budget allows at most {int(TOTAL_CAP / EPSILON)} in total)"
        )

        problems = []
        if any(s >= 500 for s in statuses):
            problems.append(f"5xx answers: {statuses}")
        if set(statuses) - {200, 409}:
            problems.append(f"unexpected statuses: {statuses}")
        ledger = open_ledger(ledger_url)
        try:
            committed = [e for e in ledger.entries() if e.status == "committed"]
            total = ledger.total_spent("census")
            if len(committed) != answered:
                problems.append(f"{len(committed)} committed entries for {answered} answers")
            if total != PureDP(EPSILON * answered) or total.epsilon > TOTAL_CAP:  # type: ignore[union-attr]
                problems.append(f"ledger total {total} for {answered} answers (cap {TOTAL_CAP})")
            for i in range(ANALYSTS):
                spent = ledger.spent(f"analyst{i}", "census")
                if spent.epsilon > BUDGET:  # type: ignore[union-attr]
                    problems.append(f"analyst{i} overspent: {spent}")
            problems += ledger.verify()
            print(
                f"  ledger total  {total} (cap ε={TOTAL_CAP}); overspend: {'none' if not problems else 'SEE BELOW'}"
            )
        finally:
            ledger.close()
            if schema is not None:
                import psycopg

                with psycopg.connect(pg, autocommit=True) as admin:
                    admin.execute(f"DROP SCHEMA {schema} CASCADE")
        for problem in problems:
            print(f"  PROBLEM: {problem}")
        return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
