"""Every failure after the data gate is one fixed outcome, byte for byte, on every surface.

A neighbour pair: D answers, D′ (the same table with a damaged data page — a real engine failure
whose message quotes the file) fails after the gate. Python, the command line (text and
``--json``), the HTTP API (status and body bytes) and what the console renders all show the same
canonical outcome, whatever the engine said; the engine's text is only in the curator's audit
trail, the failure is counted per dataset, and fail-closed exhausts the analyst's budget.
"""

from __future__ import annotations

import json
import socket
import time
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest
from fastapi.testclient import TestClient
from tests.server.live import LiveGateway, write_config

import dalenius
from dalenius.cli.common import EXIT_FAILED
from dalenius.cli.main import main
from dalenius.core.errors import EvaluationFailed, ExecutionError, PostGateOutcome
from dalenius.core.loss import PureDP
from dalenius.engine.result import Result
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import LedgerEntry, open_ledger
from dalenius.server.app import create_app
from dalenius.server.config import GatewayConfig
from dalenius.server.gateway import Gateway
from dalenius.server.store import CURATOR, Caller

SQL = "SELECT SUM(x) FROM t"
CANONICAL = EvaluationFailed().body()
TEXT = "the engine failed after reading the data; the reserved loss was charged"


def write_pair(root: Path) -> tuple[Path, Path]:
    """Two catalogs over one table: intact (D) and with a damaged data page (D′)."""
    paths = []
    for name in ("intact", "damaged"):
        folder = root / name
        folder.mkdir()
        data = folder / "t.parquet"
        duckdb.sql(
            f"COPY (SELECT i AS x FROM range(20000) t(i)) TO '{data}' (FORMAT parquet, "
            "COMPRESSION snappy)"
        )
        if name == "damaged":
            raw = bytearray(data.read_bytes())
            raw[200:2200] = b"\xab" * 2000  # the data page; the footer (schema) stays readable
            data.write_bytes(bytes(raw))
        catalog = folder / "catalog.toml"
        catalog.write_text(
            f'[dataset]\nname = "{name}"\n[tables.t]\nsource = {{ parquet = "t.parquet" }}\n'
            'privacy_unit = "row"\ncolumns = { x = { type = "int", bounds = [0, 20000] } }\n'
        )
        paths.append(catalog)
    return paths[0], paths[1]


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return write_pair(tmp_path)


def test_python_and_cli_show_the_canonical_failure(
    pair: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    intact, damaged = pair
    with dalenius.connect(intact, budget=1) as session:
        assert session.query(SQL, epsilon=0.1).rows
    with dalenius.connect(damaged, budget=1) as session:
        with pytest.raises(EvaluationFailed) as caught:
            session.query(SQL, epsilon=0.1)
        assert type(caught.value) is EvaluationFailed and str(caught.value) == TEXT
        assert caught.value.body() == CANONICAL
        assert session.remaining() == PureDP(Fraction(9, 10))
        [failed] = [a for a in session.ledger.audit() if a.outcome == "failed"]
        assert "Snappy" in failed.detail or "t.parquet" in failed.detail  # custodian-only
    ledger = str(tmp_path / "cli.sqlite")
    base = ["query", SQL, "--catalog", str(damaged), "--epsilon", "0.1", "--ledger", ledger]
    assert main([*base, "--budget", "1"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"error: {TEXT}\n")
    assert main([*base, "--json"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    assert out.encode() == CANONICAL + b"\n" and err == ""


def gateway_for(catalogs: tuple[Path, ...]) -> tuple[TestClient, Gateway, str, str]:
    gateway = Gateway(GatewayConfig())
    curator = gateway.bootstrap("root", CURATOR).token
    root = Caller(name="root", role=CURATOR, token_id="")
    analyst = gateway.bootstrap("alice").token
    for catalog in catalogs:
        name = catalog.parent.name
        gateway.register(root, str(catalog), None, None)
        gateway.store.grant("alice", name, by="root")
        gateway.ledger.set_budget("alice", name, PureDP(Fraction(1)))
    client = TestClient(create_app(gateway=gateway), raise_server_exceptions=False)
    return client, gateway, curator, analyst


def test_http_body_and_status_are_canonical_and_the_curator_sees_the_count(
    pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, gateway, curator, analyst = gateway_for(pair)
    auth = {"Authorization": f"Bearer {analyst}"}
    ok = client.post("/v1/datasets/intact/query", headers=auth, json={"sql": SQL, "epsilon": 0.1})
    assert ok.status_code == 200
    bodies = set()
    statuses = set()
    for key in ("a", "b"):
        failed = client.post(
            "/v1/datasets/damaged/query",
            headers=auth,
            json={"sql": SQL, "epsilon": 0.1, "idempotency_key": key},
        )
        bodies.add(failed.content)
        statuses.add(failed.status_code)
        assert failed.headers["content-type"] == "application/json"
        assert failed.headers["content-length"] == str(len(CANONICAL))
    # Injected failures with engine texts that would reveal counts or values: the same bytes.
    for secret in ("Overflow: 5426 * 86400000000", "NaN in row 4711", "value 'alice@x' too long"):
        monkeypatch.setattr(DuckDBExecutor, "fetch", _raise(ExecutionError(secret)))
        failed = client.post(
            "/v1/datasets/intact/query",
            headers=auth,
            json={"sql": f"SELECT COUNT(*) FROM t WHERE x > {len(secret)}", "epsilon": 0.1},
        )
        bodies.add(failed.content)
        statuses.add(failed.status_code)
    monkeypatch.undo()
    assert bodies == {CANONICAL} and statuses == {PostGateOutcome.FAILED.status} == {502}
    # What the console renders comes from these fields only: constant, no request id.
    assert set(json.loads(CANONICAL)["error"]) == {"code", "message", "why", "fix"}
    # A retry with the same key: the recorded failure, at no new cost.
    again = client.post(
        "/v1/datasets/damaged/query",
        headers=auth,
        json={"sql": SQL, "epsilon": 0.1, "idempotency_key": "a"},
    )
    assert (again.status_code, again.content) == (502, CANONICAL)
    mine = client.get("/v1/datasets/damaged/budget", headers=auth).json()
    assert mine["spent"]["epsilon_exact"] == "1/5"
    # The analyst's own ledger never shows the engine's text; the curator's audit does.
    entries = client.get("/v1/me/ledger", headers=auth).json()["entries"]
    assert all("Snappy" not in e["detail"] and "5426" not in e["detail"] for e in entries)
    boss = {"Authorization": f"Bearer {curator}"}
    audit = client.get("/v1/audit?dataset=damaged", headers=boss).json()["audit"]
    assert any(a["outcome"] == "failed" and "parquet" in a["detail"].lower() for a in audit)
    accounting = client.get("/v1/datasets/damaged/accounting", headers=boss).json()
    assert (accounting["failures"], accounting["fail_closed"]) == (2, False)
    assert client.get("/v1/datasets/intact/accounting", headers=boss).json()["failures"] == 3
    gateway.close()


def test_fail_closed_through_the_gateway(pair: tuple[Path, Path]) -> None:
    client, gateway, curator, analyst = gateway_for(pair)
    boss = {"Authorization": f"Bearer {curator}"}
    auth = {"Authorization": f"Bearer {analyst}"}
    put = client.put("/v1/datasets/damaged/fail-closed", headers=boss, json={"fail_closed": True})
    assert put.status_code == 200 and put.json()["fail_closed"] is True
    forbidden = client.put(
        "/v1/datasets/damaged/fail-closed", headers=auth, json={"fail_closed": False}
    )
    assert forbidden.status_code == 403
    failed = client.post(
        "/v1/datasets/damaged/query", headers=auth, json={"sql": SQL, "epsilon": 0.1}
    )
    assert (failed.status_code, failed.content) == (502, CANONICAL)
    refused = client.post(
        "/v1/datasets/damaged/query",
        headers=auth,
        json={"sql": "SELECT COUNT(*) FROM t", "epsilon": 0.1},
    )
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "budget_exceeded"
    # Another dataset of the same analyst is untouched.
    ok = client.post("/v1/datasets/intact/query", headers=auth, json={"sql": SQL, "epsilon": 0.1})
    assert ok.status_code == 200
    gateway.close()


def test_cli_fail_closed_and_budget_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.sqlite")
    assert (
        main(
            [
                "budget",
                "set",
                "--ledger",
                ledger,
                "--analyst",
                "a",
                "--dataset",
                "d",
                "--epsilon",
                "1",
            ]
        )
        == 0
    )
    assert (
        main(["budget", "fail-closed", "--ledger", ledger, "--dataset", "d", "on", "--json"]) == 0
    )
    capsys.readouterr()
    assert main(["budget", "show", "--ledger", ledger, "--json"]) == 0
    [dataset] = json.loads(capsys.readouterr().out)["datasets"]
    assert (dataset["fail_closed"], dataset["failures"]) == (True, 0)


def _raise(error: BaseException):  # type: ignore[no-untyped-def]
    def raising(*args: object, **kwargs: object) -> object:
        raise error

    return raising


def test_a_serialisation_failure_after_the_commit_is_the_same_outcome(
    pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, gateway, _, analyst = gateway_for(pair[:1])
    monkeypatch.setattr(Result, "to_dict", _raise(OverflowError("value 1e309 in row 12")))
    failed = client.post(
        "/v1/datasets/intact/query",
        headers={"Authorization": f"Bearer {analyst}"},
        json={"sql": SQL, "epsilon": 0.1},
    )
    assert (failed.status_code, failed.content) == (502, CANONICAL)
    [entry] = gateway.ledger.entries()
    assert entry.status == "committed"  # charged exactly once, the answer kept on record
    assert gateway.ledger.spent("alice", "intact") == PureDP(Fraction(1, 10))
    gateway.close()


@pytest.mark.slow
def test_a_client_that_goes_away_after_sending_is_charged(
    tmp_path: Path, pair: tuple[Path, Path]
) -> None:
    ledger_path = tmp_path / "gateway.sqlite"
    config = write_config(tmp_path / "gateway.toml", str(ledger_path))
    live = LiveGateway(config, issue=("curator:root", "analyst:alice"))
    try:
        with live.client(live.tokens["root"]) as root:
            assert root.post("/v1/datasets", json={"catalog": str(pair[0])}).status_code == 201
            assert root.put("/v1/principals/alice/grants/intact").status_code == 200
            assert root.put("/v1/budgets/alice/intact", json={"epsilon": 1}).status_code == 200
        body = json.dumps({"sql": SQL, "epsilon": 0.1}).encode()
        request = (
            f"POST /v1/datasets/intact/query HTTP/1.1\r\nHost: 127.0.0.1:{live.port}\r\n"
            f"Authorization: Bearer {live.tokens['alice']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        deadline = time.monotonic() + 30
        entries: list[LedgerEntry] = []
        with socket.create_connection(("127.0.0.1", live.port)) as connection:
            connection.sendall(request)
            # The client goes away as soon as the request holds a reservation, before any
            # answer was sent.
            while not entries and time.monotonic() < deadline:
                with open_ledger(str(ledger_path)) as ledger:
                    entries = ledger.entries(principal="alice")
            connection.shutdown(socket.SHUT_RDWR)
        while time.monotonic() < deadline:
            with open_ledger(str(ledger_path)) as ledger:
                entries = ledger.entries(principal="alice")
                spent = ledger.spent("alice", "intact")
            if entries and entries[0].status in {"committed", "failed"}:
                break
            time.sleep(0.05)
        # Past the data gate the request finished and was charged, exactly once.
        assert [e.status for e in entries] in (["committed"], ["failed"])
        assert spent == PureDP(Fraction(1, 10))
    finally:
        live.stop()
