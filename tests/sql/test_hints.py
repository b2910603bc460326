"""Free hints from the catalog, decided before anything is spent and without reading data:
"did you mean" for tables and columns, a string written in double quotes, and a literal compared
with a keyed column that is not among its keys (a note, or with ``--strict`` a refusal)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.cli.main import main
from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.errors import QueryError
from dalenius.core.loss import PureDP
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger
from dalenius.plan.hints import query_hints
from dalenius.sql.bind import to_query

TYPO = "SELECT COUNT(*) FROM adult WHERE income = '<=50k'"


@pytest.fixture(scope="module")
def adult(adult_catalog_path: Path) -> Catalog:
    return load_catalog(adult_catalog_path)


@pytest.mark.parametrize(
    ("sql", "fix"),
    [
        ("SELECT COUNT(*) FROM adults", "did you mean 'adult'?"),
        ("SELECT COUNT(*) FROM adult WHERE sexx = 'Male'", "did you mean 'sex'?"),
        ("SELECT AVG(hours_per_wek) FROM adult", "did you mean 'hours_per_week'?"),
        (
            'SELECT COUNT(*) FROM adult WHERE sex = "Male"',
            "\"Male\" in double quotes names a column; for the text, write 'Male'",
        ),
    ],
)
def test_unknown_names_get_the_closest_fix(adult: Catalog, sql: str, fix: str) -> None:
    with pytest.raises(QueryError) as err:
        to_query(sql, adult)
    assert fix in (err.value.fix or "")


@pytest.mark.parametrize(
    ("sql", "hint"),
    [
        (TYPO, "'<=50k' is not among the declared keys of income; did you mean '<=50K'?"),
        ("SELECT COUNT(*) FROM adult WHERE race IN ('White', 'Martian')", "'Martian' is not"),
        (
            "SELECT SUM(CASE WHEN sex = 'male' THEN 1 ELSE 0 END) FROM adult",
            "did you mean 'Male'?",
        ),
        (
            "SELECT COUNT(*) FROM (SELECT age FROM adult WHERE workclass <> 'Privat') AS t",
            "did you mean 'Private'?",
        ),
    ],
)
def test_a_literal_outside_the_keys_is_hinted(adult: Catalog, sql: str, hint: str) -> None:
    (found,) = query_hints(to_query(sql, adult).query)
    assert hint in found


def test_declared_keys_get_no_hint_whatever_the_data_hold(adult: Catalog) -> None:
    # 'Unknown' is declared for sex; whether any row holds it does not matter.
    sql = "SELECT COUNT(*) FROM adult WHERE sex = 'Unknown' AND income IN ('<=50K', '>50K')"
    assert query_hints(to_query(sql, adult).query) == ()
    # A column without keys is never hinted.
    assert (
        query_hints(to_query("SELECT COUNT(*) FROM adult WHERE occupation = 'x'", adult).query)
        == ()
    )


def test_the_hint_reaches_explain_and_the_result(adult: Catalog) -> None:
    ledger = open_ledger(None)
    ledger.set_budget("analyst", adult.name, PureDP(Fraction(1)))
    with Session(adult, ledger=ledger, executor=DuckDBExecutor(adult)) as session:
        assert any("did you mean '<=50K'" in n for n in session.explain(TYPO, epsilon=1).notes)
        result = session.query(TYPO, epsilon="0.5")
    assert any("did you mean '<=50K'" in n for n in result.notes)
    assert result.to_dict()["notes"] == list(result.notes)


def test_strict_refuses_before_spending(
    adult_catalog_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.sqlite")
    common = ["--catalog", str(adult_catalog_path), "--ledger", ledger, "--budget", "1"]
    code = main(["query", *common, "--epsilon", "0.5", "--strict", "--json", TYPO])
    out, _ = capsys.readouterr().out, None
    assert code != 0
    assert "did you mean '<=50K'" in out and "--strict" in out
    code = main(["query", *common, "--epsilon", "0.5", "--json", TYPO])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["remaining"]["epsilon"] == 0.5  # the refusal above spent nothing of the 1
    assert "did you mean '<=50K'" in doc["notes"][0]
    code = main(
        ["explain", "--catalog", str(adult_catalog_path), "--epsilon", "1", "--strict", TYPO]
    )
    assert code != 0
    assert "did you mean '<=50K'" in capsys.readouterr().err
