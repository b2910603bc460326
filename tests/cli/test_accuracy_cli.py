"""``--target-error`` / ``--target-relative`` on query and explain, and ``dalenius batch``."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.cli.main import main
from dalenius.core.loss import PureDP
from dalenius.ledger import open_ledger

SQL = "SELECT sex, COUNT(*) AS n, SUM(age) AS years FROM adult GROUP BY sex"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_explain_and_query_with_targets(
    adult_catalog_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = str(adult_catalog_path)
    code, out, _ = run(
        capsys,
        "explain",
        "--catalog",
        catalog,
        "--target-error",
        "n=40",
        "--target-error",
        "years=5000",
        "--json",
        SQL,
    )
    assert code == 0
    plan = json.loads(out)
    chosen = plan["accuracy"]
    assert {t["output"] for t in chosen["targets"]} == {"n", "years"}
    assert all(
        t["error"] <= t["target"] < t["error_at_99_percent_of_epsilon"] for t in chosen["targets"]
    )
    assert plan["loss"]["epsilon_exact"] == chosen["epsilon_exact"]
    ledger = str(tmp_path / "l.sqlite")
    code, out, _ = run(
        capsys,
        "query",
        "--catalog",
        catalog,
        "--ledger",
        ledger,
        "--budget",
        "5",
        "--target-error",
        "n=40",
        "--target-error",
        "years=5000",
        "--json",
        SQL,
    )
    assert code == 0
    result = json.loads(out)
    assert result["spent"]["epsilon_exact"] == chosen["epsilon_exact"]
    with open_ledger(ledger) as book:
        spent = book.spent("analyst", "adult").epsilon  # type: ignore[attr-defined]
    numerator, denominator = map(int, chosen["epsilon_exact"].split("/"))
    assert spent == Fraction(numerator, denominator)
    code, out, _ = run(
        capsys,
        "explain",
        "--catalog",
        catalog,
        "--target-relative",
        "0.01",
        "--expected",
        "10000",
        "SELECT COUNT(*) FROM adult",
    )
    assert code == 0 and "1% of 10000" in out and "ε − 1% gives" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--target-error", "10", "--epsilon", "1"], "both epsilon and an error target"),
        (["--target-error", "10", "--target-error", "20"], "without column names"),
        (["--target-relative", "0.1"], "expected"),
        (["--target-error", "n=10"], "not an aggregate column"),
    ],
)
def test_bad_targets_are_refused(
    adult_catalog_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code, _, err = run(
        capsys,
        "explain",
        "--catalog",
        str(adult_catalog_path),
        *extra,
        "SELECT COUNT(*) FROM adult",
    )
    assert code != 0
    assert message in err and "Fix:" in err


def test_batch_plans_and_runs(
    adult_catalog_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = tmp_path / "batch.toml"
    batch.write_text(
        '[[query]]\nsql = "SELECT COUNT(*) AS n FROM adult WHERE age > 40"\n'
        "target_relative = 0.01\nexpected = 10000\n\n"
        f'[[query]]\nsql = "{SQL}"\ntarget_error = {{ n = 50, years = 8000 }}\n',
        encoding="utf-8",
    )
    catalog = str(adult_catalog_path)
    code, out, _ = run(
        capsys, "batch", str(batch), "--catalog", catalog, "--epsilon", "0.2", "--json"
    )
    assert code == 0
    plan = json.loads(out)
    assert plan["epsilon"] <= 0.2 and plan["scale"] > 0 and plan["results"] == []
    ledger = str(tmp_path / "l.sqlite")
    with open_ledger(ledger) as book:
        book.set_budget("analyst", "adult", PureDP(Fraction(1)))
    code, out, _ = run(
        capsys, "batch", str(batch), "--catalog", catalog, "--ledger", ledger, "--run"
    )
    assert code == 0
    assert out.startswith("Batch of 2 queries: ε = ")
    assert out.count("[low, high]") == 2
    bad = tmp_path / "bad.toml"
    bad.write_text('[[query]]\nsql = "SELECT 1"\ntarget = 3\n', encoding="utf-8")
    code, _, err = run(capsys, "batch", str(bad), "--catalog", catalog)
    assert code != 0 and "unknown keys: target" in err
