"""Usability: what a newcomer should meet, stated as tests before the product does it.

Each test states the desired message or behaviour. Those not met yet are marked
``xfail(strict=True)`` with the present behaviour as the reason: they fail today, and the day the
product is fixed the unexpected pass fails the suite until the marker is removed. No budget is
ever at stake here: every case is a refusal, a warning or a free answer.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from pathlib import Path

import pytest
from tests.server.helpers import build_site

import dalenius
from dalenius.cli.main import main
from dalenius.core.errors import DaleniusError
from dalenius.datasets import write_demo
from dalenius.server.config import GatewayConfig

SQL = "SELECT COUNT(*) AS n FROM people"


@pytest.fixture(scope="module")
def census(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small demo census (keys 'Female'/'Male' for sex, 'education' a column)."""
    return write_demo(tmp_path_factory.mktemp("census"), n=500, formats=("parquet",))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the CLI in-process; what it printed to stderr."""
    capsys.readouterr()
    with contextlib.suppress(SystemExit):
        main(list(argv))
    return capsys.readouterr().err


def refusal(session: dalenius.Session, sql: str, **options: object) -> str:
    """The text of the refusal (or of the warnings) a query meets, before any charge."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            session.explain(sql, **options)
        except DaleniusError as error:
            return str(error)
    return "\n".join(str(w.message) for w in caught)


# --- CLI messages speak the CLI's language -------------------------------------------------------


def test_cli_missing_epsilon_fix_names_the_flag(
    census: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.sqlite")
    err = cli(capsys, "query", "--catalog", str(census), "--ledger", ledger, "--budget", "1", SQL)
    assert "no epsilon" in err
    assert "--epsilon 0.1" in err and "epsilon=0.1" not in err


def test_cli_suggested_budget_command_keeps_the_ledger(
    census: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.sqlite")
    grouped = "SELECT zip, COUNT(*) FROM people GROUP BY zip"
    common = ["--catalog", str(census), "--ledger", ledger]
    cli(capsys, "query", *common, "--budget", "1", "--epsilon", "0.1", SQL)
    err = cli(capsys, "query", *common, "--epsilon", "0.1", "--delta", "1e-6", grouped)
    assert "dalenius budget set" in err
    command = err[err.index("dalenius budget set") :].split("`")[0]
    assert f"--ledger {ledger}" in command


def test_cli_density_missing_delta_fix_names_the_flag(
    census: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.sqlite")
    common = ["--catalog", str(census), "--ledger", ledger, "--budget", "1"]
    curve = ["--table", "people", "--column", "age", "--bandwidth", "2", "--epsilon", "0.5"]
    err = cli(capsys, "density", *common, *curve)
    assert "needs delta" in err
    assert "--delta 1e-6" in err and "delta=1e-6" not in err


# --- One range for ε, stated the same way everywhere ----------------------------------------------


def _epsilon_limits(text: str) -> set[str]:
    """The numbers a refusal of ε gives as its limits."""
    return set(re.findall(r"1000|1e6|10\^100|10\^-100|1e-30", text))


def test_python_names_one_upper_limit_for_epsilon(census: Path) -> None:
    session = dalenius.connect(str(census), budget=1)
    assert _epsilon_limits(refusal(session, SQL, epsilon=1e50)) == {"1000"}


def test_cli_names_the_same_upper_limit_for_epsilon(
    census: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = cli(capsys, "explain", "--catalog", str(census), "--epsilon", "1e400", SQL)
    assert _epsilon_limits(err) == {"1000"}, err


def test_http_names_the_same_range_for_epsilon(census: Path) -> None:
    site = build_site(GatewayConfig(), census)
    try:
        headers = site.as_(site.analyst)
        body = {"sql": SQL, "epsilon": 1e50}
        answer = site.client.post("/v1/datasets/census/explain", headers=headers, json=body)
        assert answer.status_code == 400
        text = answer.text
        assert "0, or" not in text  # ε = 0 is refused, so it is not in the accepted range
        assert _epsilon_limits(text) == {"1000"}, text
    finally:
        site.client.close()
        site.gateway.close()


# --- Safe defaults ---------------------------------------------------------------------------------


def test_a_budget_kept_in_memory_is_announced(census: Path) -> None:
    with pytest.warns(dalenius.InMemoryLedgerWarning, match="ledger='ledger.sqlite'"):
        dalenius.connect(str(census), budget=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # asked for in so many words: no warning
        dalenius.connect(str(census), budget=1, ledger="memory:")


# --- Typos get a suggestion, for free ---------------------------------------------------------------


def test_a_misspelt_column_gets_did_you_mean(census: Path) -> None:
    session = dalenius.connect(str(census), budget=1)
    text = refusal(session, "SELECT COUNT(*) FROM people WHERE educaton = 'HS-grad'", epsilon=0.1)
    assert "did you mean 'education'" in text.lower()


def test_a_literal_that_is_not_a_declared_key_is_flagged(census: Path) -> None:
    # A note before anything is spent (the CLI's --strict turns it into a refusal).
    session = dalenius.connect(str(census), budget=1)
    notes = session.explain("SELECT COUNT(*) FROM people WHERE sex = 'male'", epsilon=0.1).notes
    assert any("'Male'" in note for note in notes)


def test_a_double_quoted_string_gets_a_hint_about_single_quotes(census: Path) -> None:
    session = dalenius.connect(str(census), budget=1)
    text = refusal(session, 'SELECT COUNT(*) FROM people WHERE occupation <> "Sales"', epsilon=0.1)
    assert "single quotes" in text


# --- The walk-through's commands can be copied -----------------------------------------------------


def test_every_command_the_demo_prints_can_be_run_as_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    main(["demo", "--people", "500"])
    printed = capsys.readouterr().out
    commands = re.findall(r"^\s*(dalenius (?:query|explain)\b.*)$", printed, flags=re.M)
    assert commands
    assert all("--catalog" in command for command in commands), commands
