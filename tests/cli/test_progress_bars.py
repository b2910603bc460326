"""Progress bars of the long CLI steps: drawn on stderr only on a terminal, never changing output."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dalenius.cli.main import main
from dalenius.cli.render import progress

CATALOG = """
[tables.people]
source = { csv = "people.csv" }
privacy_unit = "row"
columns = { age = { type = "int", bounds = [0, 99] } }
"""


def _terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make stderr (only) look like a terminal, as rich and the helper see it."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("TERM", "xterm")  # rich draws no live bar on a dumb terminal


def test_a_bar_whose_total_is_learnt_late(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with progress("searching the lattice", None, "nodes settled") as update:
        update(3, 10)
    assert capsys.readouterr() == ("", "")  # not a terminal: nothing at all
    _terminal(monkeypatch)
    with progress("searching the lattice", None, "nodes settled") as update:
        update(10, 10)
    assert "10/10 nodes settled" in capsys.readouterr().err
    with progress("searching", 5, "nodes", enabled=False) as update:
        update(5)
    assert capsys.readouterr() == ("", "")  # --quiet, --json


def test_loading_a_csv_shows_its_table_on_a_terminal_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "people.csv").write_text("age\n30\n41\n130\n")
    (tmp_path / "c.toml").write_text(CATALOG)
    assert main(["catalog", "check", str(tmp_path / "c.toml")]) == 0
    plain, err = capsys.readouterr()
    assert err == "" and "\x1b" not in plain and "people" in plain
    _terminal(monkeypatch)
    assert main(["catalog", "check", str(tmp_path / "c.toml")]) == 0
    out, err = capsys.readouterr()
    assert out == plain  # the bar never touches the output
    assert "loading" in err and "table people" in err


def test_ldp_simulate_draws_its_bar_on_a_terminal_only(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["ldp", "simulate", "--protocol", "grr", "--epsilon", "1", "--users", "5000"]
    argv += ["--domain", "8", "--seed", "3"]
    assert main(argv) == 0
    plain, err = capsys.readouterr()
    assert err == "" and "\x1b" not in plain
    _terminal(monkeypatch)
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "5,000/5,000 clients" in err
    # the same seeded run: the same table (only the time taken differs)
    assert out.splitlines()[:-1] == plain.splitlines()[:-1]


def test_the_attack_labs_bar_writes_nothing_off_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dalenius.attacks.report import progress_bar

    with progress_bar(3, "linking", enabled=True) as advance:
        advance(3)
    assert capsys.readouterr() == ("", "")  # not even the empty line rich ends a bar with
    _terminal(monkeypatch)
    with progress_bar(3, "linking", enabled=True) as advance:
        advance(3)
    assert "3/3" in capsys.readouterr().err


SURVEY = """
[tables.answers]
source = { csv = "answers.csv" }
privacy_unit = "row"
columns = { a = { type = "int", keys = [0, 1, 2] }, b = { type = "str", keys = ["x", "y"] }, c = { type = "int", keys = [0, 1] } }
"""


@pytest.mark.parametrize("method", ["aim", "mst"])
def test_synthesize_draws_its_rounds_on_a_terminal_only(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    method: str,
) -> None:
    rows = [f"{i % 3},{'xy'[i % 2]},{(i // 3) % 2}" for i in range(300)]
    (tmp_path / "answers.csv").write_text("a,b,c\n" + "\n".join(rows) + "\n")
    (tmp_path / "s.toml").write_text(SURVEY)

    def run(name: str, *extra: str) -> tuple[str, str]:
        argv = ["synthesize", "--method", method, "--catalog", str(tmp_path / "s.toml")]
        argv += ["--table", "answers", "--epsilon", "1", "--delta", "1e-9", "--rows", "50"]
        argv += ["--budget", "10", "--budget-delta", "1e-6", "--ledger", str(tmp_path / "l.db")]
        # Each run its own request (its own filter), so none is answered from the ledger.
        argv += ["--where", f"'{name}' <> 'x'", "--out", str(tmp_path / f"{name}.csv"), *extra]
        assert main(argv) == 0
        return capsys.readouterr()

    out, err = run("0")
    assert err == "" and "\x1b" not in out and "Wrote" in out  # piped: nothing on stderr
    _terminal(monkeypatch)
    out, err = run("1")
    assert "\x1b" not in out and "Wrote" in out  # the bar never touches the output
    assert f"{method.upper()} rounds" in err and "measured" in err and "ρ" in err
    for flag in ("--quiet", "--json"):  # the table's loading bar is not the rounds' to hide
        assert "rounds" not in run(flag.strip("-"), flag)[1]
