"""The ``dalenius`` command: help for every command, tables and JSON, errors and exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dalenius.cli.main import build_parser, main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", ["query", "explain", "budget", "ledger", "demo"])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert "usage: dalenius" in capsys.readouterr().out


def test_top_level_help_lists_commands() -> None:
    text = build_parser().format_help()
    for command in ("query", "explain", "budget", "ledger", "demo"):
        assert command in text


def test_query_json(
    adult_catalog_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.sqlite")
    code, out, _ = run(
        capsys,
        "query",
        "--catalog",
        str(adult_catalog_path),
        "--ledger",
        ledger,
        "--budget",
        "1",
        "--epsilon",
        "0.5",
        "--json",
        "SELECT sex, COUNT(*) FROM adult GROUP BY sex",
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["columns"] == ["sex", "COUNT(*)"]
    assert [row[0]["value"] for row in doc["rows"]] == ["Female", "Male", "Unknown"]
    cell = doc["rows"][0][1]
    assert cell["low"] <= cell["value"] <= cell["high"]
    assert doc["loss"]["epsilon"] == 0.5
    assert doc["remaining"]["epsilon"] == 0.5


def test_query_table_output(
    adult_catalog_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.sqlite")
    code, out, _ = run(
        capsys,
        "query",
        "--catalog",
        str(adult_catalog_path),
        "--ledger",
        ledger,
        "--budget",
        "1",
        "--epsilon",
        "0.1",
        "SELECT COUNT(*) FROM adult WHERE age >= 40",
    )
    assert code == 0
    assert "COUNT(*)" in out and "95% interval" in out and "remaining: ε=0.9" in out


def test_explain_spends_nothing_and_needs_no_budget(
    adult_catalog_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "explain",
        "--catalog",
        str(adult_catalog_path),
        "--epsilon",
        "1",
        "SELECT education, AVG(age) FROM adult GROUP BY education",
    )
    assert code == 0
    assert "SUM(age - 48.5)" in out and "Total cost: ε=1" in out


def test_user_errors_exit_2_with_clause_and_fix(
    adult_catalog_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.sqlite")
    code, out, err = run(
        capsys,
        "query",
        "--catalog",
        str(adult_catalog_path),
        "--ledger",
        ledger,
        "--budget",
        "1",
        "--epsilon",
        "0.1",
        "SELECT * FROM adult",
    )
    assert code == 2 and out == ""
    assert "SELECT: SELECT * returns individual rows" in err and "Fix:" in err


@pytest.mark.parametrize("epsilon", ["0", "-1", "nan", "inf", "abc"])
def test_bad_epsilon(
    adult_catalog_path: Path, epsilon: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "explain",
        "--catalog",
        str(adult_catalog_path),
        "--epsilon",
        epsilon,
        "--json",
        "SELECT COUNT(*) FROM adult",
    )
    assert code == 2
    assert json.loads(out)["error"]["code"] == "invalid_loss"


def test_budget_refusal_shows_numbers(
    adult_catalog_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.sqlite")
    base = ["query", "--catalog", str(adult_catalog_path), "--ledger", ledger]
    assert (
        run(capsys, *base, "--budget", "1", "--epsilon", "0.75", "SELECT COUNT(*) FROM adult")[0]
        == 0
    )
    code, _, err = run(capsys, *base, "--epsilon", "0.5", "SELECT SUM(age) FROM adult")
    assert code == 2
    assert "requested epsilon = 0.5, remaining 0.25, short by 0.25" in err


def test_missing_budget_explains_itself(
    adult_catalog_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        capsys,
        "query",
        "--catalog",
        str(adult_catalog_path),
        "--ledger",
        str(tmp_path / "x.sqlite"),
        "--epsilon",
        "0.1",
        "SELECT COUNT(*) FROM adult",
    )
    assert code == 2 and "no budget is recorded" in err and "budget" in err


def test_installed_script_runs() -> None:
    script = shutil.which("dalenius") or str(Path(sys.executable).parent / "dalenius")
    done = subprocess.run([script, "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("dalenius ")


def _grouped_query(catalog: Path, ledger: str, *extra: str) -> list[str]:
    return [
        "query",
        "--catalog",
        str(catalog),
        "--ledger",
        ledger,
        "--budget",
        "1",
        "--epsilon",
        "0.1",
        *extra,
        "SELECT sex, COUNT(*) AS n, AVG(age) AS age FROM adult GROUP BY sex",
    ]


def test_query_formats_agree(
    adult_catalog_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.sqlite")
    code, out, _ = run(capsys, *_grouped_query(adult_catalog_path, ledger, "--format", "json"))
    assert code == 0
    doc = json.loads(out)
    # The same query again is answered from the ledger: the same numbers in every format.
    code, out, _ = run(capsys, *_grouped_query(adult_catalog_path, ledger, "--format", "csv"))
    lines = out.splitlines()
    assert lines[0] == "sex,n,n_low,n_high,age,age_low,age_high"
    first = doc["rows"][0]
    assert lines[1].split(",")[:4] == [
        "Female",
        *(str(first[1][k]) for k in ("value", "low", "high")),
    ]
    code, out, _ = run(capsys, *_grouped_query(adult_catalog_path, ledger))
    assert "\x1b[" not in out  # not a terminal: no colours
    header, rule, *rows = out.splitlines()[:5]
    assert header.split() == ["sex", "n", "age"] and set(rule) == {"─"}
    value = f"{first[1]['value']:,}"
    interval = f"[{first[1]['low']:,}, {first[1]['high']:,}]"
    assert rows[0].split()[:2] == ["Female", value] and interval in rows[0]
    # The values line up: each column's numbers end at the same place on every row.
    ends = {
        line.index(f"{row[1]['value']:,}") + len(f"{row[1]['value']:,}")
        for line, row in zip(rows, doc["rows"], strict=False)
    }
    assert len(ends) == 1
    assert "spent: nothing" in out and "remaining: ε=0.9" in out


def test_query_table_is_dimmed_on_a_terminal(
    adult_catalog_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    _, out, _ = run(capsys, *_grouped_query(adult_catalog_path, str(tmp_path / "l.sqlite")))
    assert "\x1b[2m[" in out  # the interval, dimmed


def test_json_and_another_format_conflict(
    adult_catalog_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _grouped_query(
        adult_catalog_path, str(tmp_path / "l.sqlite"), "--json", "--format", "csv"
    )
    code, out, _ = run(capsys, *args)
    assert code == 2 and "two formats" in json.loads(out)["error"]["message"]


def test_version_comes_from_the_package(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    import dalenius

    assert version("dalenius") == dalenius.__version__  # pyproject reads it from the package
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out == f"dalenius {dalenius.__version__}\n"


def test_progress_bar_only_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dalenius.cli.render import progress

    with progress("generating", 10, "people") as update:
        update(5)  # not a terminal: nothing is drawn
    assert capsys.readouterr() == ("", "")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("FORCE_COLOR", "1")
    with progress("generating", 10, "people") as update:
        update(10)
    assert "10/10 people" in capsys.readouterr().err


def test_demo_generation_reports_progress(tmp_path: Path) -> None:
    from dalenius.datasets.census import write_demo

    calls: list[int] = []
    write_demo(tmp_path, n=25, formats=("csv",), progress=calls.append)
    assert calls == [25]
