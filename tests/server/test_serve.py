"""``dalenius serve``: argument errors, the demo end to end, and the docs for every endpoint and key."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from tests.server.live import free_port, wait_until_up

from dalenius.cli.main import main
from dalenius.server import config
from dalenius.server.app import create_app
from dalenius.server.config import GatewayConfig
from dalenius.server.gateway import Gateway

DOCS = Path(__file__).resolve().parents[2] / "docs"
SERVE = [sys.executable, "-c", "import sys; from dalenius.cli.main import main; sys.exit(main())"]


def test_serve_needs_exactly_one_of_config_and_demo(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve"]) == 2
    assert "exactly one of --config FILE and --demo" in capsys.readouterr().err
    assert main(["serve", "--config", "x.toml", "--demo"]) == 2


def test_a_missing_config_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--config", str(tmp_path / "none.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_taken_port_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gw.toml"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        path.write_text(f'[gateway]\nlisten = "127.0.0.1:{port}"\n')
        assert main(["serve", "--config", str(path)]) == 2
    assert "in use" in capsys.readouterr().err


def test_a_bad_config_stops_the_server_with_its_message_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "gw.toml"
    path.write_text(f'[gateway]\nlisten = "127.0.0.1:{free_port()}"\nledger = "ftp://nowhere"\n')
    done = subprocess.run(
        [*SERVE, "serve", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "gateway.ledger" in done.stderr and "Traceback" not in done.stderr


def test_the_demo_prints_tokens_that_work(tmp_path: Path, demo_catalog: Path) -> None:
    # A small census already in place: the demo reuses it rather than writing 50,000 people.
    folder = tmp_path / "demo"
    folder.mkdir()
    for item in demo_catalog.parent.iterdir():
        (folder / item.name).write_bytes(item.read_bytes())
    port = free_port()
    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [*SERVE, "serve", "--demo", str(folder), "--port", str(port), "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        banner = ""
        while "Curator token" not in banner:
            line = process.stdout.readline()
            assert line, banner
            banner += line
        console = re.search(r"Console:\s+(\S+)", banner).group(1)
        analyst = re.search(r"Analyst token:\s+(\S+)", banner).group(1)
        curator = re.search(r"Curator token:\s+(\S+)", banner).group(1)
        assert console == f"http://127.0.0.1:{port}/console/"
        assert (folder / "gateway.toml").exists()
        base = f"http://127.0.0.1:{port}"
        wait_until_up(base, process)
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {analyst}"}) as api:
            assert api.get("/v1/me").json()["role"] == "analyst"
            answer = api.post(
                "/v1/datasets/census/query",
                json={"sql": "SELECT COUNT(*) FROM people", "epsilon": 0.1},
            )
            assert answer.status_code == 200 and answer.json()["remaining"]["epsilon"] == 0.9
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {curator}"}) as api:
            assert api.get("/v1/me").json()["role"] == "curator"
            assert httpx.get(console).status_code == 200
            # The demo confines catalogs and their sources to its folder, and its host names.
            outside = tmp_path / "outside.toml"
            outside.write_text(
                '[tables.t]\nsource = { csv = "/etc/passwd" }\nprivacy_unit = "row"\n'
                'columns = { x = "int" }\n'
            )
            assert api.post("/v1/datasets", json={"catalog": str(outside)}).status_code == 400
            inside = folder / "inside.toml"
            inside.write_text(outside.read_text())
            refused = api.post("/v1/datasets", json={"catalog": str(inside)})
            assert refused.status_code == 400 and "outside" in refused.json()["error"]["message"]
            assert "root:" not in refused.text
            assert api.get("/v1/me", headers={"Host": "rebound.example"}).status_code == 421
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_every_endpoint_config_key_and_error_code_is_documented() -> None:
    text = (DOCS / "server.md").read_text()
    gateway = Gateway(GatewayConfig())
    try:
        document = create_app(gateway=gateway).openapi()
    finally:
        gateway.close()
    for path, methods in document["paths"].items():
        for method in methods:
            assert f"`{method.upper()} {path}`" in text, (
                f"{method.upper()} {path} is not in docs/server.md"
            )
    for key in (*config.GATEWAY_KEYS, *config.LIMIT_KEYS):
        assert f"`{key}`" in text, key
    for variable in ("CONFIG", "DEMO", "LISTEN", "ISSUE"):
        assert f"DALENIUS_GATEWAY_{variable}" in text
    for code in (
        "unauthenticated",
        "forbidden",
        "budget_exceeded",
        "rate_limited",
        "request_too_large",
    ):
        assert f"`{code}`" in text
    assert (
        "dalenius serve" in (DOCS / "console.md").read_text()
        or "make demo" in (DOCS / "console.md").read_text()
    )
