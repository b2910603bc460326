"""``dalenius budget show|set`` and ``dalenius ledger list|export|recover|verify``."""

from __future__ import annotations

import argparse
import csv
import io
import json
from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.cli import budget_cmd, ledger_cmd
from dalenius.cli.common import EXIT_OK, EXIT_USER, run_guarded
from dalenius.core.loss import ZCDP, ApproxDP, PureDP
from dalenius.ledger import ChargeRequest, Reservation, open_ledger

DOCS = Path(__file__).resolve().parents[2] / "docs" / "ledger.md"


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="dalenius")
    sub = root.add_subparsers(dest="command")
    budget_cmd.register(sub)
    ledger_cmd.register(sub)
    return root


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    args = parser().parse_args(argv)
    code = run_guarded(args.func, args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "ledger.sqlite")


def spend(
    path: str, epsilon: Fraction, *, commit: bool = True, gate: bool = True, sql: str = "SELECT 1"
) -> str:
    with open_ledger(path) as ledger:
        request = ChargeRequest("alice", "adult", PureDP(epsilon), f"k{sql}{epsilon}", sql, "h")
        reservation = ledger.reserve(request)
        assert isinstance(reservation, Reservation)
        if gate:
            ledger.charge(reservation)
        if commit:
            ledger.commit(reservation, json.dumps({"count": 12}))
        return reservation.id


def test_set_then_show_budget(path: str, capsys) -> None:
    code, out, _ = run(
        [
            "budget",
            "set",
            "--ledger",
            path,
            "--analyst",
            "alice",
            "--dataset",
            "adult",
            "--epsilon",
            "1",
            "--refresh-days",
            "30",
        ],
        capsys,
    )
    assert code == EXIT_OK and "ε=1" in out
    spend(path, Fraction(1, 4))
    code, out, _ = run(["budget", "show", "--ledger", path], capsys)
    assert code == EXIT_OK
    header, row = out.splitlines()[:2]
    assert header.split() == [
        "analyst",
        "dataset",
        "definition",
        "budget",
        "spent",
        "remaining",
        "refresh",
    ]
    assert row.split() == ["alice", "adult", "pure", "ε=1", "ε=0.25", "ε=0.75", "30", "days"]
    code, out, _ = run(["budget", "show", "--ledger", path, "--json"], capsys)
    shown = json.loads(out)
    [budget] = shown["budgets"]
    assert budget["remaining"] == {"epsilon": 0.75, "epsilon_exact": "3/4"}
    assert budget["refresh_days"] == 30
    assert shown["datasets"] == [
        {
            "dataset": "adult",
            "definition": "pure",
            "total_cap": None,
            "total_spent": {"epsilon": 0.25, "epsilon_exact": "1/4"},
            "fail_closed": False,
            "failures": 0,
        }
    ]


def test_set_total_cap_and_other_definitions(path: str, capsys) -> None:
    code, _, _ = run(
        ["budget", "set", "--ledger", path, "--dataset", "pums", "--total", "--rho", "2"], capsys
    )
    assert code == EXIT_OK
    code, _, _ = run(
        [
            "budget",
            "set",
            "--ledger",
            path,
            "--dataset",
            "pums",
            "--analyst",
            "bob",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
        ],
        capsys,
    )
    assert code == EXIT_OK
    with open_ledger(path) as ledger:
        [info] = ledger.datasets()
        assert (info.definition, info.total_cap) == ("zcdp", ZCDP(Fraction(2)))
        cap = ledger.get_budget("bob", "pums")
        assert isinstance(cap, ZCDP) and 0 < cap.rho < Fraction(1, 50)
    code, _, _ = run(
        [
            "budget",
            "set",
            "--ledger",
            path,
            "--dataset",
            "census",
            "--analyst",
            "carol",
            "--epsilon",
            "2",
            "--delta",
            "1e-7",
            "--definition",
            "approx",
        ],
        capsys,
    )
    assert code == EXIT_OK
    with open_ledger(path) as ledger:
        assert ledger.get_budget("carol", "census") == ApproxDP(Fraction(2), Fraction(1, 10**7))


def test_a_delta_budget_on_a_pure_dataset_keeps_delta(path: str, capsys) -> None:
    """The budget trap: the first spending fixed the dataset as pure ε; δ must not be dropped."""
    base = ["budget", "set", "--ledger", path, "--dataset", "adult", "--analyst", "alice"]
    assert run([*base, "--epsilon", "1"], capsys)[0] == EXIT_OK
    spend(path, Fraction(1, 4))
    code, out, _ = run([*base, "--epsilon", "10", "--delta", "1e-5"], capsys)
    assert code == EXIT_OK
    assert "(pure)" not in out
    assert "switched from pure to approx" in out
    assert "δ=1e-05" in out and "(approx)" in out
    with open_ledger(path) as ledger:
        assert ledger.get_budget("alice", "adult") == ApproxDP(Fraction(10), Fraction(1, 10**5))
        assert ledger.spent("alice", "adult") == ApproxDP(Fraction(1, 4), Fraction(0))
        assert ledger.verify() == []


def test_an_empty_ledger_takes_a_delta_budget_whole(path: str, capsys) -> None:
    code, out, _ = run(
        [
            "budget",
            "set",
            "--ledger",
            path,
            "--dataset",
            "adult",
            "--analyst",
            "alice",
            "--epsilon",
            "10",
            "--delta",
            "1e-5",
            "--json",
        ],
        capsys,
    )
    assert code == EXIT_OK
    doc = json.loads(out)
    assert doc["definition"] == "approx" and doc["cap"]["delta_exact"] == "1/100000"


def test_switching_a_used_dataset_is_reported(path: str, capsys) -> None:
    base = ["budget", "set", "--ledger", path, "--dataset", "adult", "--analyst", "alice"]
    assert run([*base, "--epsilon", "1"], capsys)[0] == EXIT_OK
    spend(path, Fraction(1, 2))
    code, out, _ = run([*base, "--epsilon", "1", "--definition", "approx", "--json"], capsys)
    assert code == EXIT_OK
    assert json.loads(out)["switched_from"] == "pure"
    code, _, err = run([*base, "--rho", "1", "--definition", "zcdp"], capsys)
    assert code == EXIT_USER
    assert "cannot switch from 'approx' to 'zcdp'" in err and "Fix:" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--analyst", "a"], "No budget given"),
        (["--analyst", "a", "--rho", "1", "--epsilon", "1"], "either --rho or --epsilon"),
        (["--analyst", "a", "--epsilon", "-1"], "epsilon must be >= 0"),
        (["--analyst", "a", "--epsilon", "nan"], "finite"),
        (["--analyst", "a", "--epsilon", "1", "--delta", "1"], "delta must be in [0, 1)"),
        (["--epsilon", "1"], "needs --analyst"),
        (["--total", "--analyst", "a", "--epsilon", "1"], "takes no --analyst"),
        (["--analyst", "a", "--epsilon", "1", "--refresh-days", "0"], "refresh_days"),
    ],
)
def test_bad_budget_set_is_refused_clearly(path: str, capsys, extra, message) -> None:
    code, _, err = run(["budget", "set", "--ledger", path, "--dataset", "adult", *extra], capsys)
    assert code == EXIT_USER
    assert message in err
    assert "Fix:" in err


def test_reading_commands_do_not_create_a_ledger(tmp_path: Path, capsys) -> None:
    missing = str(tmp_path / "nope.sqlite")
    for argv in (["budget", "show"], ["ledger", "list"], ["ledger", "export"]):
        code, _, err = run([*argv, "--ledger", missing], capsys)
        assert code == EXIT_USER and "There is no ledger" in err
    assert not Path(missing).exists()


def test_default_ledger_comes_from_the_environment(path: str, capsys, monkeypatch) -> None:
    monkeypatch.setenv("DALENIUS_LEDGER", path)
    code, _, _ = run(
        ["budget", "set", "--analyst", "alice", "--dataset", "adult", "--epsilon", "1"], capsys
    )
    assert code == EXIT_OK
    with open_ledger(path) as ledger:
        assert ledger.get_budget("alice", "adult") == PureDP(Fraction(1))


def test_ledger_list_and_export(path: str, capsys, tmp_path: Path) -> None:
    with open_ledger(path) as ledger:
        ledger.set_budget("alice", "adult", PureDP(Fraction(1)))
    first = spend(path, Fraction(1, 10), sql="SELECT COUNT(*) FROM adult")
    spend(path, Fraction(1, 5), commit=False, sql="SELECT SUM(age) FROM adult")

    code, out, _ = run(["ledger", "list", "--ledger", path], capsys)
    assert code == EXIT_OK
    lines = out.splitlines()
    assert lines[0].split() == ["created", "id", "analyst", "dataset", "status", "charged", "sql"]
    assert "committed" in lines[1] and "SELECT COUNT(*) FROM adult" in lines[1]
    assert "charged" in lines[2]

    code, out, _ = run(["ledger", "list", "--ledger", path, "--audit", "--json"], capsys)
    outcomes = [row["outcome"] for row in json.loads(out)["audit"]]
    assert outcomes == ["budget_set", "reserved", "charged", "answered", "reserved", "charged"]

    code, out, _ = run(["ledger", "export", "--ledger", path, "--format", "csv"], capsys)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == list(ledger_cmd.ENTRY_FIELDS)
    assert rows[0]["id"] == first and rows[0]["loss_exact"] == "epsilon=1/10"
    assert json.loads(rows[0]["answer"]) == {"count": 12}

    target = tmp_path / "audit.json"
    code, _, err = run(
        ["ledger", "export", "--ledger", path, "--audit", "--json", "-o", str(target)], capsys
    )
    assert code == EXIT_OK and "wrote 6 audit lines" in err
    exported = json.loads(target.read_text())
    assert [r["outcome"] for r in exported] == outcomes
    assert set(exported[0]) == set(ledger_cmd.AUDIT_FIELDS)

    code, out, _ = run(["ledger", "list", "--ledger", path, "--analyst", "bob"], capsys)
    assert out.strip() == "(no entries)"


def test_ledger_recover_and_verify(path: str, capsys) -> None:
    with open_ledger(path) as ledger:
        ledger.set_budget("alice", "adult", PureDP(Fraction(1)))
    charged = spend(path, Fraction(1, 2), commit=False)
    pending = spend(path, Fraction(1, 4), commit=False, gate=False, sql="SELECT 2")
    code, out, _ = run(
        ["ledger", "recover", "--ledger", path, "--older-than-minutes", "0", "--json"], capsys
    )
    assert code == EXIT_OK and json.loads(out) == {"lost": [charged], "returned": [pending]}
    with open_ledger(path) as ledger:
        assert ledger.spent("alice", "adult") == PureDP(Fraction(1, 2))
    code, out, _ = run(["ledger", "verify", "--ledger", path], capsys)
    assert (code, out.strip()) == (EXIT_OK, "ledger ok")
    code, _, err = run(
        ["ledger", "recover", "--ledger", path, "--older-than-minutes", "-1"], capsys
    )
    assert code == EXIT_USER and ">= 0" in err


def test_ledger_recount_repairs_what_verify_reports(path: str, capsys) -> None:
    with open_ledger(path) as ledger:
        ledger.set_budget("alice", "adult", PureDP(Fraction(1)))
    spend(path, Fraction(1, 2))
    import sqlite3

    with sqlite3.connect(path) as con:  # a damaged store: the analyst's count lost
        con.execute("UPDATE dalenius_spent SET releases = 0 WHERE principal = 'alice'")
    with open_ledger(path) as ledger:
        assert ledger.spent("alice", "adult") == PureDP(Fraction(0))
    code, out, _ = run(["ledger", "verify", "--ledger", path], capsys)
    assert code == EXIT_USER
    assert "running count of pure:1/2 charges of analyst 'alice' on 'adult' is 0" in out
    assert "dalenius ledger recount" in out
    code, out, _ = run(["ledger", "recount", "--ledger", path, "--json"], capsys)
    assert code == EXIT_OK and len(json.loads(out)["recounted"]) == 1
    code, out, _ = run(["ledger", "verify", "--ledger", path], capsys)
    assert (code, out.strip()) == (EXIT_OK, "ledger ok")
    with open_ledger(path) as ledger:
        assert ledger.spent("alice", "adult") == PureDP(Fraction(1, 2))
        audit = [a.detail for a in ledger.audit() if a.outcome == "dataset_set"]
        assert any("recounted from the charges" in detail for detail in audit)
    code, out, _ = run(["ledger", "recount", "--ledger", path], capsys)
    assert code == EXIT_OK and "already matched" in out


def test_every_command_and_option_is_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    root = parser()
    commands = root._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name, command in commands.items():
        actions = command._subparsers._group_actions[0].choices  # type: ignore[union-attr]
        for action_name, action in actions.items():
            assert f"dalenius {name} {action_name}" in text
            for option in action._actions:
                for flag in option.option_strings:
                    if flag.startswith("--") and flag != "--help":
                        assert flag in text, (
                            f"{flag} of `dalenius {name} {action_name}` is undocumented"
                        )
