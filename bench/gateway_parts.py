"""What one repeated (cached) query costs the gateway, part by part, in one process.

``bench/gateway.py`` measures the gateway's CPU per request under load from another process; this
script says where that time goes. It opens a gateway on a SQLite ledger (synced commits, as
served) over a synthetic census, answers a query once, then times each part of answering it
again, many times: each part's CPU time (the process's clock: the kernel's share of a synced commit
included) is added up inside the whole sign-in and query, nested as printed:

* sign-in: the token's check (a SHA-256 and one read) and its shared rate-limit bucket (one write);
* the access check (registration, grant and ε floor: one read);
* the query's shape check, its plan (from the plan cache) and its exact SQL (a template, salted);
* the request key (the plan's fingerprint and the data version: its files' size and time);
* the ledger's transaction: find the recorded answer, write the audit line, read what is left,
  commit to disk;
* publishing the recorded answer, and the answer's JSON-ready form;
* the whole request through the ASGI application in this process (no socket: the framework, the
  middlewares, the thread hops to the sign-in and query pools and the request log), and the same
  request with the gateway's own work replaced by a constant answer (what the framework and the
  hops cost alone).

Run it with ``.venv/bin/python bench/gateway_parts.py`` (needs the ``server`` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

SQL = "SELECT COUNT(*) FROM people WHERE age >= 40"
EPSILON = "1/20"


PARTS = (
    ("dalenius.server.gateway:Gateway.authenticate", "sign-in, whole"),
    ("dalenius.server.store:StateStore.authenticate", "  token check (SHA-256, one read)"),
    ("dalenius.server.ratelimit:SharedRateLimiter.acquire", "  rate-limit bucket (one write)"),
    ("dalenius.server.gateway:Gateway.query", "Gateway.query, whole"),
    ("dalenius.server.gateway:Gateway._open", "  access check (one read)"),
    ("dalenius.server.gateway:check_sql_shape", "  shape check"),
    ("dalenius.engine.session:Session.prepare", "  plans from the cache (check's, answer's)"),
    ("dalenius.engine.session:Session.plan", "  the gateway's plan check, whole"),
    ("dalenius.engine.session:Session.query", "  Session.query, whole"),
    ("dalenius.engine.session:_write_now", "    exact SQL (salted template)"),
    ("dalenius.engine.session:Session._charge_request", "    request key (data version)"),
    ("dalenius.engine.session:Session._audited", "    privacy map checked"),
    ("dalenius.ledger.sqlstore:SqlLedger.reserve", "    ledger transaction (synced)"),
    ("dalenius.engine.query_release:QueryRelease.publish", "    publish the recorded answer"),
    ("dalenius.engine.result:Result.to_dict", "  answer as a JSON-ready dict"),
)
"""(``module:attribute`` of a function, its label): the parts timed, inclusive, nested as shown."""


def instrument(spent: dict[str, float]) -> Callable[[], None]:
    """Wrap every function of :data:`PARTS` to add its CPU time to ``spent``; returns the undo."""
    import importlib

    undo = []
    for target, label in PARTS:
        module_name, _, path = target.partition(":")
        owner: Any = importlib.import_module(module_name)
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        original = owner.__dict__[name]

        def timed(*args: Any, _f: Any = original, _label: str = label, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return _f(*args, **kwargs)
            finally:
                spent[_label] = spent.get(_label, 0.0) + time.process_time() - started

        setattr(owner, name, timed)
        undo.append((owner, name, original))
    return lambda: [setattr(owner, name, original) for owner, name, original in undo] and None


def parts(gateway: Any, token: str, count: int) -> list[tuple[str, float]]:
    """Milliseconds of CPU per repeated query of each part, timed inside whole sign-ins and
    queries (so each part pays the cache misses the others cause, as it does when served).
    """
    caller = gateway.authenticate(token, "127.0.0.1")
    gateway.query(caller, "census", SQL, EPSILON, None, None, None)
    spent: dict[str, float] = {}
    undo = instrument(spent)
    try:
        started = time.process_time()
        for _ in range(count):
            gateway.authenticate(token, "127.0.0.1")
            gateway.query(caller, "census", SQL, EPSILON, None, None, None)
        total = time.process_time() - started
    finally:
        undo()
    found = [(label, spent.get(label, 0.0) * 1000 / count) for _, label in PARTS]
    return [("sign-in and query", total * 1000 / count), *found]


def through_app(gateway: Any, token: str, count: int, stubbed: bool) -> float:
    """Milliseconds of CPU per request of the whole ASGI application, in this process.

    With ``stubbed``, sign-in and query return what they returned the first time and the request
    log drops its lines: what remains is the framework, the middlewares and the thread hops.
    """
    from dalenius.server.app import create_app

    app = create_app(gateway=gateway)
    body = json.dumps({"sql": SQL, "epsilon": EPSILON}).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/datasets/census/query",
        "raw_path": b"/v1/datasets/census/query",
        "query_string": b"",
        "root_path": "",
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"authorization", f"Bearer {token}".encode()),
        ],
    }

    async def call() -> None:
        given = False
        status: list[int] = []

        async def receive() -> dict[str, Any]:
            nonlocal given
            if given:
                await asyncio.sleep(3600)
            given = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])

        await app(dict(scope), receive, send)
        if status != [200]:
            raise SystemExit(f"the request failed: {status}")

    async def run() -> float:
        if stubbed:
            caller = gateway.authenticate(token, "127.0.0.1")
            answer = gateway.query(caller, "census", SQL, EPSILON, None, None, None)
            gateway.authenticate = lambda *_: caller
            gateway.query = lambda *_, **__: dict(answer)
            gateway.requests.offer = lambda _: True
        found = float("inf")
        for _ in range(3):
            await call()
            started = time.process_time()
            for _ in range(count):
                await call()
            gateway.requests.flush()
            found = min(found, (time.process_time() - started) / count)
        return found * 1000

    return asyncio.run(run())


def open_gateway(folder: Path, people: int) -> tuple[Any, str]:
    """A gateway on a SQLite ledger with a registered census and one analyst with a budget."""
    from dalenius.core.loss import PureDP
    from dalenius.datasets.census import write_demo
    from dalenius.server.config import GatewayConfig, Limits
    from dalenius.server.gateway import Gateway
    from dalenius.server.store import CURATOR, Caller

    catalog = write_demo(folder, n=people, formats=("parquet",))
    limits = Limits(requests_per_minute=1_000_000, burst=100_000, concurrent_queries=100_000)
    gateway = Gateway(GatewayConfig(ledger=str(folder / "ledger.sqlite"), limits=limits))
    gateway.register(Caller(name="root", role=CURATOR, token_id=""), str(catalog), None, None)
    token = gateway.bootstrap("analyst").token
    gateway.store.grant("analyst", "census", by="root")
    gateway.ledger.set_budget("analyst", "census", PureDP(Fraction(10**6)))
    return gateway, token


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=500, help="calls per timing")
    parser.add_argument("--people", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        gateway, token = open_gateway(Path(tmp), args.people)
        try:
            for label, ms in parts(gateway, token, args.count):
                print(f"  {label:<44} {ms:6.3f} ms CPU")
            whole = through_app(gateway, token, args.count, stubbed=False)
            print(f"  {'whole request, in-process':<44} {whole:6.3f} ms CPU")
            alone = through_app(gateway, token, args.count, stubbed=True)
            print(f"  {'framework and hops alone':<44} {alone:6.3f} ms CPU")
        finally:
            gateway.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
