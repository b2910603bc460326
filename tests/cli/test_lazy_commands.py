"""The CLI imports only the subcommand asked for; its table of commands matches the modules."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

from dalenius.cli.main import COMMANDS, build_parser


def _registered(module: str) -> list[tuple[str, str]]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    importlib.import_module(f"dalenius.cli.{module}").register(sub)
    return [(action.dest, str(action.help)) for action in sub._choices_actions]


def test_the_table_of_commands_is_what_each_module_registers() -> None:
    for module in dict.fromkeys(owner for owner, _ in COMMANDS.values()):
        expected = [(name, text) for name, (owner, text) in COMMANDS.items() if owner == module]
        assert _registered(module) == expected, module
    full = build_parser()._subparsers
    assert full is not None
    listed = [a.dest for a in full._group_actions[0]._choices_actions]  # type: ignore[attr-defined]
    assert listed == list(COMMANDS)


def _imported_after(arguments: list[str]) -> list[str]:
    code = (
        "import sys, json\n"
        "from dalenius.cli.main import main\n"
        "try:\n"
        f"    main({arguments!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return list(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize("arguments", [["--help"], ["--version"], []])
def test_the_top_level_command_imports_no_subcommand_and_no_engine(arguments: list[str]) -> None:
    modules = _imported_after(arguments)
    heavy = [m for m in modules if m.split(".")[0] in ("numpy", "duckdb", "sqlglot", "pandas")]
    assert heavy == []
    assert [m for m in modules if m.startswith("dalenius.cli.")] == ["dalenius.cli.main"]


def test_a_subcommand_imports_its_own_module_only() -> None:
    modules = _imported_after(["explain", "--help"])
    commands = {m for m in modules if m.startswith("dalenius.cli.") and m.endswith("_cmd")}
    assert "dalenius.cli.query_cmd" in commands
    # query's module shares helpers with batch's, and with no other subcommand's.
    assert commands <= {"dalenius.cli.query_cmd", "dalenius.cli.accuracy_cmd"}
    assert "dalenius.anonymity" not in modules and "dalenius.attacks" not in modules
