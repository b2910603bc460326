"""``dalenius serve --workers N``: several worker processes on one PostgreSQL ledger.

Two gateways of two workers each (so at least two processes answer, whatever the kernel's
choice of worker per connection) on one fresh schema: exactly the answers the budget allows are
charged when distinct queries race through all of them, the total is never overspent, and a
repeated query — or a retry with the same idempotency key, sent to every process at once — is
answered from the record at no new cost. The running-query limit holds across the workers of one
gateway, and a worker that dies gives its slots back. When the server is down the tests fail with
the command that starts it; they are never skipped.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path

import httpx
import pytest
from tests.server.live import LiveGateway, write_config
from tests.server.test_postgres import PG_URL, roomy_config, schema_url  # noqa: F401

from dalenius.core.loss import PureDP
from dalenius.ledger.postgres import PostgresLedger
from dalenius.server.slots import BusyError, Slots

EPSILON = Fraction(1, 10)
ANSWERS = 6  # the dataset's total cap allows this many answers (each analyst's budget more)
REQUESTS = 48


def _query(gateway: LiveGateway, token: str, sql: str, **extra: object) -> httpx.Response:
    with gateway.client(token) as client:
        return client.post(
            "/v1/datasets/census/query", json={"sql": sql, "epsilon": str(EPSILON), **extra}
        )


@pytest.mark.postgres
def test_workers_on_one_postgresql_ledger_charge_exactly_what_the_budgets_allow(
    tmp_path: Path,
    demo_catalog: Path,
    schema_url: tuple[str, str],  # noqa: F811
) -> None:
    url, schema = schema_url
    config = roomy_config(tmp_path, url, REQUESTS)
    first = LiveGateway(config, issue=("curator:root",), workers=2)
    # The start-up token is issued once, by the supervising process, not once per worker.
    assert sum("(shown once)" in line for line in first.output) == 1
    try:
        second = LiveGateway(config, workers=2)
        try:
            _race(first, second, demo_catalog)
        finally:
            second.stop()
    finally:
        first.stop()

    ledger = PostgresLedger(PG_URL, schema=schema)
    try:
        # The race's answers and the idempotent retry's one charge on the total; the shared
        # answer is charged to bob alone.
        assert ledger.total_spent("census") == PureDP((ANSWERS + 1) * EPSILON)
        committed = [e for e in ledger.entries() if e.status == "committed"]
        assert len(committed) == ANSWERS + 2
        spent = sum(ledger.spent(a, "census").epsilon for a in ("alice", "bob"))
        assert spent == (ANSWERS + 2) * EPSILON
        assert all(e.status == "committed" for e in ledger.entries())
        assert ledger.verify() == []
    finally:
        ledger.close()


def _race(first: LiveGateway, second: LiveGateway, catalog: Path) -> None:
    root = first.tokens["root"]
    tokens = {}
    with first.client(root) as admin:
        assert admin.post("/v1/datasets", json={"catalog": str(catalog)}).status_code == 201
        cap = admin.put("/v1/datasets/census/total-cap", json={"epsilon": str(ANSWERS * EPSILON)})
        assert cap.status_code == 200
        for name in ("alice", "bob"):
            tokens[name] = admin.post("/v1/principals", json={"name": name}).json()["token"]
            assert admin.put(f"/v1/principals/{name}/grants/census").status_code == 200
            budget = {"epsilon": str(10 * EPSILON)}
            assert admin.put(f"/v1/budgets/{name}/census", json=budget).status_code == 200
    alice, bob = tokens["alice"]["token"], tokens["bob"]["token"]

    # Distinct queries (none can come from the record) from both analysts, to both gateways.
    def ask(i: int) -> httpx.Response:
        sql = f"SELECT COUNT(*) FROM people WHERE age >= {i}"
        return _query((first, second)[i % 2], (alice, bob)[i // 2 % 2], sql)

    with ThreadPoolExecutor(max_workers=REQUESTS) as pool:
        answers = list(pool.map(ask, range(REQUESTS)))
    codes = [a.status_code for a in answers]
    assert sorted(set(codes)) == [200, 409], codes
    assert codes.count(200) == ANSWERS
    # No refusal while the budget allowed the query: the cap is exactly used up.
    refusals = {a.json()["error"]["code"] for a in answers if a.status_code == 409}
    assert refusals == {"budget_exceeded"}

    # Every answered query, repeated to every worker of both gateways at once: the recorded
    # answer (the same entry and values), cached, at no new cost.
    answered = [
        (i, a.json()) for i, a in enumerate(answers) if a.status_code == 200 and (i // 2) % 2 == 0
    ]
    assert answered, "alice had no answer to repeat"
    i, original = answered[0]
    sql = f"SELECT COUNT(*) FROM people WHERE age >= {i}"
    with ThreadPoolExecutor(max_workers=16) as pool:
        repeats = list(pool.map(lambda n: _query((first, second)[n % 2], alice, sql), range(16)))
    for repeat in repeats:
        assert repeat.status_code == 200, repeat.text
        doc = repeat.json()
        assert doc["cached"] is True and doc["shared"] is False
        assert doc["entry_id"] == original["entry_id"] and doc["rows"] == original["rows"]

    # Bob asking alice's query gets her release, shared: charged to his budget, not the total.
    shared = _query(second, bob, sql)
    assert shared.status_code == 200 and shared.json()["shared"] is True
    assert shared.json()["rows"] == original["rows"]

    # Room for one more answer on the total: a retry with one idempotency key, sent to every
    # process at once, is charged once; each copy gets that answer or "still in progress".
    with first.client(root) as admin:
        more = {"epsilon": str((ANSWERS + 1) * EPSILON)}
        assert admin.put("/v1/datasets/census/total-cap", json=more).status_code == 200

    def retry(n: int) -> httpx.Response:
        fresh = "SELECT COUNT(*) FROM people WHERE age < 17"
        return _query((first, second)[n % 2], bob, fresh, idempotency_key="retry-1")

    with ThreadPoolExecutor(max_workers=8) as pool:
        retries = list(pool.map(retry, range(8)))
    done = [r.json() for r in retries if r.status_code == 200]
    assert done and {d["entry_id"] for d in done} == {done[0]["entry_id"]}
    assert all(d["rows"] == done[0]["rows"] for d in done)
    waiting = [r.json()["error"]["code"] for r in retries if r.status_code != 200]
    assert set(waiting) <= {"request_in_progress"}, waiting


def test_the_running_limit_holds_across_processes_and_dies_with_its_holder(
    tmp_path: Path,
) -> None:
    lock = tmp_path / "slots.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from dalenius.server.slots import Slots
                slots = Slots(2, {str(lock)!r})
                slots.take("alice"); slots.take("alice"); slots.take("bob")
                print("held", flush=True)
                time.sleep(120)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        here = Slots(2, str(lock))
        with pytest.raises(BusyError, match="2 queries running"):
            here.take("alice")
        release = here.take("bob")  # bob holds one of his two slots elsewhere
        with pytest.raises(BusyError):
            here.take("bob")
        release()
        here.take("carol")()
        holder.kill()
        holder.wait()
        # The dead process's slots are free again: the kernel dropped its record locks.
        first, second = here.take("alice"), here.take("alice")
        with pytest.raises(BusyError):
            here.take("alice")
        first()
        second()
        here.close()
    finally:
        holder.kill()
        holder.wait()


def test_workers_refuse_records_that_live_in_one_process(tmp_path: Path) -> None:
    config = write_config(tmp_path / "gateway.toml", "memory:")

    cli = [sys.executable, "-c", "from dalenius.cli.main import main; raise SystemExit(main())"]

    def serve(workers: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*cli, "serve", "--config", str(config), "--workers", workers],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    done = serve("2")
    assert done.returncode == 2
    assert "--workers needs a ledger every worker shares" in done.stderr
    bad = serve("0")
    assert bad.returncode == 2 and "--workers must be a whole number from 1 to 64" in bad.stderr
