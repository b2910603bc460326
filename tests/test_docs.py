"""Docs cannot drift: every command, option and catalog key is documented."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from dalenius.cli.main import build_parser
from dalenius.core import catalog

DOCS = Path(__file__).resolve().parent.parent / "docs"


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@pytest.mark.parametrize("command", ["query", "explain", "demo", "batch", "perturb"])
def test_every_option_of_query_explain_demo_is_in_cli_md(command: str) -> None:
    text = (DOCS / "cli.md").read_text()
    assert f"`dalenius {command}`" in text
    parser = subparsers(build_parser())[command]
    for action in parser._actions:
        for flag in action.option_strings:
            if flag.startswith("--") and flag != "--help":
                assert f"`{flag}" in text, f"{command} {flag} is not documented in docs/cli.md"


def test_every_command_is_documented() -> None:
    text = "".join(
        (DOCS / page).read_text()
        for page in ("cli.md", "ledger.md", "server.md")
        if (DOCS / page).exists()
    )
    for name in subparsers(build_parser()):
        assert f"dalenius {name}" in text


@pytest.mark.parametrize(
    "key",
    [
        *catalog.DATASET_KEYS,
        *catalog.TABLE_KEYS,
        *catalog.COLUMN_KEYS,
        *catalog.UNIT_KEYS,
        *catalog.COLUMN_TYPES,
        *catalog.SOURCE_KINDS,
    ],
)
def test_every_catalog_key_is_in_catalog_md(key: str) -> None:
    assert f"`{key}" in (DOCS / "catalog.md").read_text()


def test_readme_starts_with_the_two_commands() -> None:
    text = (DOCS.parent / "README.md").read_text()
    block = text.split("```")[1]
    commands = [line.split("#")[0].strip() for line in block.splitlines()[1:] if line.strip()]
    assert commands == ["make demo", "make test"]


def test_every_endpoint_is_documented() -> None:
    from dalenius.server.app import create_app
    from dalenius.server.config import GatewayConfig
    from dalenius.server.gateway import Gateway

    gateway = Gateway(GatewayConfig())
    try:
        document = create_app(gateway=gateway).openapi()
    finally:
        gateway.close()
    text = "".join(page.read_text() for page in DOCS.rglob("*.md"))
    for path, methods in document["paths"].items():
        for method in methods:
            assert f"{method.upper()} {path}" in text, f"{method.upper()} {path} is not documented"


def test_every_stage_of_the_architecture_diagram_exists() -> None:
    """docs/architecture.md's Mermaid flow names real modules and functions (no drift)."""
    import importlib
    import re

    text = (Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text()
    diagram = text.split("```mermaid", 1)[1].split("```", 1)[0]
    stages = re.findall(r"\*\*([A-Za-z_][\w.]*)\*\*", diagram)
    assert len(stages) >= 12, stages
    for stage in stages:
        parts = stage.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                target: object = importlib.import_module("dalenius." + ".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            for attr in parts[cut:]:
                assert hasattr(target, attr), f"{stage}: no {attr} in {target}"
                target = getattr(target, attr)
            break
        else:
            raise AssertionError(f"{stage} names no module of dalenius")


def test_the_layer_table_is_the_layers_contract() -> None:
    """docs/architecture.md's layer table lists the packages of pyproject.toml's layers contract,
    floor by floor, and every package of dalenius is on a floor."""
    import re
    import tomllib

    root = Path(__file__).resolve().parent.parent
    contracts = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(
        c for c in contracts["contracts"] if c["type"] == "layers" and "containers" not in c
    )
    floors = [
        {name.strip().removeprefix("dalenius.") for name in layer.split("|")}
        for layer in layers["layers"]
    ]
    text = (DOCS / "architecture.md").read_text()
    rows = re.findall(r"^\| L[\d½]+ \| ([^|]+) \|", text, flags=re.MULTILINE)
    table = [set(re.findall(r"`(\w+)`", row)) for row in rows]
    assert table == floors
    packages = {
        p.name for p in (root / "src" / "dalenius").iterdir() if (p / "__init__.py").exists()
    }
    assert packages == set().union(*floors)
