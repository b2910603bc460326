"""Load on the HTTP gateway: 200 concurrent clients from a second process, on loopback.

For each worker count in ``--workers`` (default ``1,4``) the script starts a real gateway
(``dalenius serve --workers N`` in a subprocess) on a synthetic census with a fresh ledger — the
local PostgreSQL server in a schema of its own with ``--postgres``, else a SQLite file — creates
analysts with budgets, and drives it from a *client process* holding ``--clients`` concurrent
keep-alive connections, in three phases:

* **fresh**: every request is a small query never asked before (a COUNT and an AVG under a
  distinct filter), planned, charged, read and committed; the budgets allow every one of them;
* **cached**: every request repeats a query its analyst was already answered, so it comes from
  the ledger's record at no cost;
* **mixed**: explains, distinct queries and repeats with budgets that bind, per analyst and on
  the dataset's total (another analyst's release of the same query is shared: charged to the
  analyst's budget, not again to the total).

Checks, afterwards: no 5xx answer; fresh queries all charged and cached ones all free (the
ledger's charges before and after the phase); in the mixed phase every answer 200 or a 409
budget refusal, the ledger charged exactly the answers released (each analyst within its budget,
all within the total cap, no refusal while the budget still allowed the query), and its
integrity check passes. It prints throughput and latency percentiles of each phase and the
ratios of N workers to one, and the gateway's CPU time per request (its processes', from
``/proc``: on a loaded machine a steadier comparison than throughput). ``--baseline REF`` first
runs the same phases on the gateway of a git revision (one worker), so the ratio to it comes from
the same run.

What the transport costs at all is measured beside it: a **bare** server of the same stack (uvicorn
and FastAPI, the same process model and worker count, no TLS as here) whose one endpoint returns a
constant JSON body of a cached answer's size, driven by the same client; and the **engine's own
execution** of the fresh phase's exact SQL, run directly on the executor in this process (its CPU
time, DuckDB's threads included). The script prints Dalenius ÷ bare for the cached phase and
Dalenius ÷ (bare + engine) for the fresh phase, per request of server CPU, and both p99s.

Run it with ``.venv/bin/python bench/gateway.py --postgres`` (needs the ``server`` extra).

The client speaks HTTP/1.1 over asyncio streams itself: a general-purpose client costs about as
much CPU per request as the gateway, and on a small machine it would measure itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

ANALYSTS = 10
EPSILON = Fraction(1, 20)
MIXED_ANSWERS = 2  # per analyst in the mixed phase, for each request of each client
MIXED_TOTAL = 12  # on the dataset, for each request of each client: the shared cap binds too
FRESH_BUDGET = Fraction(10**6)  # every fresh query is answered
SERVE = [sys.executable, "-c", "import sys; from dalenius.cli.main import main; sys.exit(main())"]
REPO = Path(__file__).resolve().parent.parent
CACHED_BODY = json.dumps(
    {
        "dataset": "census",
        "columns": ["count"],
        "rows": [[{"value": 12345, "low": 12339, "high": 12351}]],
        "kinds": ["count"],
        "loss": {"epsilon": 0.05},
        "remaining": {"epsilon": 999.5},
        "confidence": 0.95,
        "cached": True,
        "shared": False,
        "entry_id": "0" * 32,
    }
).encode()
"""A constant body of a cached COUNT answer's size, for the bare server."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- the client process ---------------------------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection, one request at a time."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self.host, self.port = host, port
        self.auth = f"Authorization: Bearer {token}\r\n".encode()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, doc: dict[str, Any]) -> tuple[int, bytes]:
        body = json.dumps(doc).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        ).encode()
        for attempt in range(2):
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            assert self.reader is not None
            try:
                self.writer.write(head + self.auth + b"\r\n" + body)
                return await self._response(self.reader)
            except (ConnectionError, asyncio.IncompleteReadError):
                # The server closed an idle keep-alive connection: reconnect once.
                self.writer.close()
                self.writer = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def _response(self, reader: asyncio.StreamReader) -> tuple[int, bytes]:
        status = int((await reader.readuntil(b"\r\n")).split()[1])
        length, chunked, close = 0, False, False
        while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value:
                chunked = True
            elif name == "connection" and value == "close":
                close = True
        if chunked:
            parts = []
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            await reader.readuntil(b"\r\n")
            body = b"".join(parts)
        else:
            body = await reader.readexactly(length)
        if close and self.writer is not None:
            self.writer.close()
            self.writer = None
        return status, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def work_of(phase: str, number: int, i: int, offset: int) -> tuple[str, str]:
    """The endpoint and SQL of client ``number``'s ``i``-th request in ``phase``."""
    if phase == "fresh":
        # Distinct over every client, request and run: never answered before.
        k = offset + number * 1000 + i
        return "query", (
            f"SELECT COUNT(*), AVG(income) FROM people WHERE age >= {k % 90} "
            f"AND hours_per_week <> {k // 90}"
        )
    if phase in ("cached", "bare"):
        return "query", f"SELECT COUNT(*) FROM people WHERE age >= {i % 5 + 40}"
    kind = ("explain", "query", "query", "repeat")[(number + i) % 4]
    if kind == "repeat":
        return "query", "SELECT sex, COUNT(*) FROM people GROUP BY sex"
    return kind, f"SELECT COUNT(*), AVG(income) FROM people WHERE age >= {(number * 31 + i) % 90}"


async def client(
    number: int,
    args: argparse.Namespace,
    token: str,
    results: list[tuple[str, int, float, str]],
) -> None:
    host, _, port = args.base.removeprefix("http://").rpartition(":")
    connection = Connection(host, int(port), token)
    try:
        for i in range(args.requests):
            kind, sql = work_of(args.phase, number, i, args.offset)
            path = f"/v1/datasets/census/{kind}"
            started = time.perf_counter()
            status, body = await connection.post(path, {"sql": sql, "epsilon": str(EPSILON)})
            elapsed = time.perf_counter() - started
            tag = "explain"
            if args.phase == "bare":
                tag = "bare" if status == 200 else "failed"
            elif kind != "explain":
                if status != 200:
                    tag = "refused" if status == 409 else "failed"
                else:
                    doc = json.loads(body)
                    tag = "shared" if doc["shared"] else "cached" if doc["cached"] else "charged"
            analyst = f"analyst{number % ANALYSTS}"
            results.append((tag, status, elapsed, analyst))
    finally:
        connection.close()


async def drive(args: argparse.Namespace, tokens: list[str]) -> dict[str, object]:
    results: list[tuple[str, int, float, str]] = []
    started = time.perf_counter()
    await asyncio.gather(
        *(client(n, args, tokens[n % len(tokens)], results) for n in range(args.clients))
    )
    return {"seconds": time.perf_counter() - started, "results": results}


def client_main(args: argparse.Namespace) -> None:
    tokens = json.loads(sys.stdin.read())
    out = asyncio.run(drive(args, tokens))
    print(json.dumps(out))


# -- the driver -----------------------------------------------------------------------------


@dataclass
class Phase:
    """What one phase of one gateway measured."""

    name: str
    seconds: float
    results: list[tuple[str, int, float, str]]
    cpu: float = float("nan")  # CPU seconds of the gateway's processes during the phase
    problems: list[str] = field(default_factory=list)

    @property
    def cpu_per_request(self) -> float:
        return self.cpu / len(self.results)

    @property
    def throughput(self) -> float:
        return len(self.results) / self.seconds

    def latency(self, q: float) -> float:
        return percentile([t for _, _, t, _ in self.results], q)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def source_of(ref: str, folder: Path) -> Path:
    """The ``src`` folder of git revision ``ref``, extracted under ``folder``."""
    archive = folder / "baseline.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(REPO), "archive", ref, "src"], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder / "baseline", filter="data")
    return folder / "baseline" / "src"


class Gateway:
    """A gateway subprocess on a fresh ledger, with analysts ready for every phase."""

    def __init__(self, folder: Path, ledger: str, workers: int, source: Path | None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        config = folder / f"gateway-{self.port}.toml"
        config.write_text(
            f'[gateway]\nlisten = "127.0.0.1:{self.port}"\nledger = "{ledger}"\n'
            "[limits]\nrequests_per_minute = 1000000\nburst = 100000\n"
            # Throughput with every client's queries admitted (the running limit is measured by
            # tests/server/test_load.py).
            "concurrent_queries = 100000\n"
        )
        wrap = os.environ.get("DALENIUS_BENCH_WRAP", "").split()  # e.g. a profiler
        command = [*wrap, *SERVE, "serve", "--config", str(config), "--issue-token", "curator:root"]
        command += ["--log-level", "warning"]
        env = os.environ | {"PYTHONUNBUFFERED": "1"}
        if workers > 1:
            command += ["--workers", str(workers)]
        if source is not None:
            env["PYTHONPATH"] = str(source)
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        assert self.process.stdout is not None
        token = None
        while token is None:
            line = self.process.stdout.readline()
            if not line:
                raise SystemExit("the gateway did not start")
            found = re.search(r"\(shown once\): (\S+)", line)
            token = found.group(1) if found else None
        self.root = token
        import httpx

        for _ in range(600):
            try:
                httpx.get(f"{self.base}/v1/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)

    def admin(self) -> Any:
        import httpx

        return httpx.Client(
            base_url=self.base, headers={"Authorization": f"Bearer {self.root}"}, timeout=60
        )

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)  # as Ctrl-C: a wrapping profiler writes its output
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


BARE_APP = """
from fastapi import FastAPI
from fastapi.responses import Response

app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
BODY = {body!r}


@app.post("/v1/datasets/{{name}}/{{kind}}")
async def answer(name: str, kind: str) -> Response:
    return Response(BODY, media_type="application/json")


@app.get("/v1/openapi.json")
async def ready() -> Response:
    return Response(b"{{}}", media_type="application/json")
"""


class BareServer:
    """The same server stack with one constant endpoint: what the transport costs at all."""

    def __init__(self, folder: Path, workers: int, body: bytes) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        (folder / "bare_app.py").write_text(BARE_APP.format(body=body))
        command = [sys.executable, "-m", "uvicorn", "bare_app:app", "--port", str(self.port)]
        command += ["--log-level", "warning", "--no-access-log", "--no-server-header"]
        if workers > 1:
            command += ["--workers", str(workers)]
        self.process = subprocess.Popen(command, cwd=folder)
        import httpx

        for _ in range(600):
            try:
                httpx.get(f"{self.base}/v1/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def run_bare(args: argparse.Namespace, folder: Path, workers: int, body: bytes) -> Phase:
    """The cached phase's load on the bare server (tokens are sent, and ignored)."""
    server = BareServer(folder, workers, body)
    try:
        tokens = ["bare"] * ANALYSTS
        before = cpu_seconds(server.process.pid)
        seconds, results = run_clients(server.base, tokens, "bare", args.requests * 2, args.clients)
        return Phase("bare", seconds, results, cpu_seconds(server.process.pid) - before)
    finally:
        server.stop()


def engine_seconds(catalog: Path, count: int, offset: int) -> float:
    """CPU seconds per fresh query of the engine's own execution of its exact SQL (median).

    The fresh phase's queries are planned in this process and their exact SQL run directly on
    the executor, with nothing of Dalenius around the engine call.
    """
    from dalenius.engine.session import connect

    session = connect(catalog, budget=10**6)
    times = []
    try:
        for i in range(count):
            _, sql = work_of("fresh", 0, i, offset)
            prepared = session.prepare(sql, EPSILON)
            exact = prepared.exact
            for table in prepared.tables:
                session.executor.prepare(table)
            engine = session.executor
            sql = engine.scoped(exact.main, exact.reads) if exact.reads else exact.main
            started = time.process_time()
            engine.fetch(sql)
            times.append(time.process_time() - started)
    finally:
        session.close()
    return percentile(times, 0.5)


def cpu_seconds(root: int) -> float:
    """CPU seconds used so far by process ``root`` and its children (Linux ``/proc``).

    The gateway's own CPU per request does not depend on what else the machine runs, so it
    compares gateways measured on a loaded machine better than their throughput does.
    """
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(entry.name) == root or int(fields[1]) == root:
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def analysts(admin: Any, prefix: str, budget: Fraction) -> list[str]:
    tokens = []
    for i in range(ANALYSTS):
        name = f"{prefix}{i}"
        created = admin.post("/v1/principals", json={"name": name}).json()
        tokens.append(created["token"]["token"])
        admin.put(f"/v1/principals/{name}/grants/census").raise_for_status()
        admin.put(f"/v1/budgets/{name}/census", json={"epsilon": str(budget)}).raise_for_status()
    return tokens


def measure(gateway: Gateway, tokens: list[str], phase: str, requests: int, **more: Any) -> Phase:
    """Run ``phase`` against ``gateway`` and keep what it measured."""
    before = cpu_seconds(gateway.process.pid)
    seconds, results = run_clients(gateway.base, tokens, phase, requests, **more)
    return Phase(phase, seconds, results, cpu_seconds(gateway.process.pid) - before)


def run_clients(
    base: str,
    tokens: list[str],
    phase: str,
    requests: int,
    clients: int = 200,
    offset: int = 0,
) -> tuple[float, list[tuple[str, int, float, str]]]:
    command = [sys.executable, __file__, "--client", "--base", base, "--phase", phase]
    command += ["--clients", str(clients), "--requests", str(requests), "--offset", str(offset)]
    driver = subprocess.run(
        command, input=json.dumps(tokens), capture_output=True, text=True, check=False
    )
    if driver.returncode:
        raise SystemExit(f"the client process failed:\n{driver.stderr}")
    out = json.loads(driver.stdout)
    return float(out["seconds"]), [(k, int(s), float(t), a) for k, s, t, a in out["results"]]


def run_gateway(
    args: argparse.Namespace, folder: Path, workers: int, source: Path | None, label: str
) -> dict[str, Phase]:
    """Every phase on a fresh gateway with ``workers`` processes (from ``source`` if given)."""
    from dalenius.ledger import open_ledger

    ledger_url, drop = fresh_ledger(args, folder, label)
    gateway = Gateway(folder, ledger_url, workers, source)
    phases: dict[str, Phase] = {}
    ledger = None
    try:
        with gateway.admin() as admin:
            admin.post("/v1/datasets", json={"catalog": str(args.catalog)}).raise_for_status()
            fresh_tokens = analysts(admin, "analyst", FRESH_BUDGET)
        ledger = open_ledger(ledger_url)
        # fresh: distinct queries, every one charged.
        before = committed(ledger)
        phase = phases["fresh"] = measure(
            gateway, fresh_tokens, "fresh", args.requests, clients=args.clients, offset=args.offset
        )
        results = phase.results
        tags = Counter(k for k, _, _, _ in results)
        if tags != Counter({"charged": len(results)}):
            phase.problems.append(f"fresh queries not all charged: {dict(tags)}")
        if committed(ledger) - before != len(results):
            phase.problems.append(f"{committed(ledger) - before} charges for {len(results)}")
        # cached: each analyst's own earlier answers, asked again (answered once first).
        with_warm = run_clients(gateway.base, fresh_tokens, "cached", 5, ANALYSTS)[1]
        if {k for k, _, _, _ in with_warm} - {"charged", "cached"}:
            phase.problems.append(f"warm-up: {Counter(k for k, _, _, _ in with_warm)}")
        before = committed(ledger)
        spent = ledger.total_spent("census")
        phase = phases["cached"] = measure(
            gateway, fresh_tokens, "cached", args.requests * 2, clients=args.clients
        )
        results = phase.results
        tags = Counter(k for k, _, _, _ in results)
        if tags != Counter({"cached": len(results)}):
            phase.problems.append(f"repeated queries not all answered from the record: {tags}")
        if committed(ledger) != before or ledger.total_spent("census") != spent:
            phase.problems.append("repeated queries changed the ledger's charges")
        phases["mixed"] = mixed_phase(args, gateway, ledger)
    finally:
        gateway.stop()
        if ledger is not None:
            ledger.close()
        drop()
    return phases


def mixed_phase(args: argparse.Namespace, gateway: Gateway, ledger: Any) -> Phase:
    """Explains, distinct queries and repeats under budgets and a total cap that bind."""
    from dalenius.core.loss import PureDP

    spent_before = ledger.total_spent("census").epsilon
    cap = spent_before + MIXED_TOTAL * args.requests * EPSILON
    budget = MIXED_ANSWERS * args.requests * EPSILON
    with gateway.admin() as admin:
        admin.put("/v1/datasets/census/total-cap", json={"epsilon": str(cap)}).raise_for_status()
        tokens = analysts(admin, "mixed", budget)
    before = committed(ledger)
    phase = measure(gateway, tokens, "mixed", args.requests, clients=args.clients)
    results = phase.results
    problems = phase.problems
    statuses = Counter(s for _, s, _, _ in results)
    if set(statuses) - {200, 409}:
        problems.append(f"unexpected statuses: {dict(statuses)}")
    charged = sum(1 for k, _, _, _ in results if k == "charged")
    shared = sum(1 for k, _, _, _ in results if k == "shared")
    if committed(ledger) - before != charged + shared:
        problems.append(f"{committed(ledger) - before} new entries for {charged + shared} answers")
    total = ledger.total_spent("census")
    if total != PureDP(spent_before + EPSILON * charged) or total.epsilon > cap:
        problems.append(f"ledger total {total} for {charged} new answers (cap {cap})")
    refused = {a for k, _, _, a in results if k == "refused"}
    for i in range(ANALYSTS):
        name = f"mixed{i}"
        analyst = f"analyst{i}"  # the client's label: tokens are handed out in this order
        answers = sum(1 for k, _, _, a in results if a == analyst and k in ("charged", "shared"))
        spent = ledger.spent(name, "census")
        if spent != PureDP(EPSILON * answers) or spent.epsilon > budget:
            problems.append(f"{name} spent {spent} for {answers} answers")
        if analyst in refused and ledger.remaining(name, "census").epsilon >= EPSILON:
            problems.append(f"{name} was refused while the budget allowed the query")
    problems += ledger.verify()
    return phase


def committed(ledger: Any) -> int:
    return sum(1 for e in ledger.entries(dataset="census") if e.status == "committed")


def fresh_ledger(args: argparse.Namespace, folder: Path, label: str) -> tuple[str, Any]:
    """A new, empty ledger URL, and the function that removes it."""
    if not args.postgres:
        return str(folder / f"{label}.sqlite"), lambda: None
    import psycopg

    pg = os.environ.get("DALENIUS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    schema = f"dalenius_bench_{os.getpid()}_{label}"
    with psycopg.connect(pg, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")

    def drop() -> None:
        with psycopg.connect(pg, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")

    return f"{pg}?options=-csearch_path%3D{schema}", drop


def report(label: str, phases: dict[str, Phase]) -> None:
    for phase in phases.values():
        statuses = Counter(s for _, s, _, _ in phase.results)
        print(
            f"  {label:<18} {phase.name:<7} {len(phase.results):>6} req {phase.seconds:7.2f} s "
            f"{phase.throughput:8.1f} req/s   p50 {phase.latency(0.5) * 1000:7.1f} ms   "
            f"p99 {phase.latency(0.99) * 1000:7.1f} ms   "
            f"CPU {phase.cpu_per_request * 1000:5.1f} ms/req   {dict(sorted(statuses.items()))}"
        )
        for problem in phase.problems:
            print(f"    PROBLEM: {problem}")


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--requests", type=int, default=10, help="requests per client and phase")
    parser.add_argument("--people", type=int, default=20_000)
    parser.add_argument("--workers", default="1,4", help="worker counts to compare, e.g. 1,2,4")
    parser.add_argument("--postgres", action="store_true", help="use the local PostgreSQL server")
    parser.add_argument("--baseline", metavar="REF", help="also run git revision REF (1 worker)")
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--offset", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main(args)
        return 0

    from dalenius.datasets.census import write_demo

    counts = [int(n) for n in args.workers.split(",")]
    print(
        f"gateway load: {args.clients} concurrent clients × {args.requests} requests per phase "
        f"(cached: × {2 * args.requests}), {'PostgreSQL' if args.postgres else 'SQLite'} ledger, "
        f"{args.people:,} people, {os.cpu_count()} CPUs, load average before: {load_average()}"
    )
    runs: dict[str, dict[str, Phase]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        args.catalog = write_demo(folder, n=args.people, formats=("parquet",))
        if args.baseline:
            label = f"{args.baseline[:10]}, 1 worker"
            source = source_of(args.baseline, folder)
            runs[label] = run_gateway(args, folder, 1, source, "baseline")
            report(label, runs[label])
        for n in counts:
            args.offset += 10**6  # fresh queries stay fresh across gateways
            label = f"{n} worker{'s' if n > 1 else ''}"
            runs[label] = run_gateway(args, folder, n, None, f"w{n}")
            report(label, runs[label])
        transport = {}
        for n in counts:
            label = f"bare, {n} worker{'s' if n > 1 else ''}"
            transport[n] = run_bare(args, folder, n, CACHED_BODY)
            report(label, {"bare": transport[n]})
        engine = engine_seconds(args.catalog, 50, 10**9)
        print(
            f"  the engine's own execution of a fresh query's exact SQL: {engine * 1000:.2f} ms CPU"
        )
    print(f"  load average after: {load_average()}")
    for n in counts:
        phases = runs[f"{n} worker{'s' if n > 1 else ''}"]
        bare = transport[n].cpu_per_request
        cached = phases["cached"].cpu_per_request / bare
        fresh = phases["fresh"].cpu_per_request / (bare + engine)
        print(
            f"  {n} worker(s), server CPU per request: cached ÷ bare {cached:5.2f}× (target ≤ 3), "
            f"fresh ÷ (bare + engine) {fresh:5.2f}× (target ≤ 3); p99 cached "
            f"{phases['cached'].latency(0.99):.2f} s, fresh {phases['fresh'].latency(0.99):.2f} s, "
            f"bare {transport[n].latency(0.99):.2f} s (target ≤ 1 s)"
        )
    reference = next(iter(runs))
    for label, phases in runs.items():
        if label == reference:
            continue
        ratios = "   ".join(
            f"{name} {phase.throughput / runs[reference][name].throughput:5.1f}×"
            for name, phase in phases.items()
        )
        print(f"  throughput of {label} ÷ {reference}:   {ratios}")
        ratios = "   ".join(
            f"{name} {runs[reference][name].cpu_per_request / phase.cpu_per_request:5.1f}×"
            for name, phase in phases.items()
        )
        print(f"  gateway CPU per request, {reference} ÷ {label}:   {ratios}")
    return 1 if any(p.problems for phases in runs.values() for p in phases.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
