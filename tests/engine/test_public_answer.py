"""GROUP BY without an aggregate over columns with public keys: the answer is the keys
themselves, read off the catalog — exact, free, no data read — from Python, the CLI, HTTP and the
wire (issue 35's "release the set of keys; public keys free of data").
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

import dalenius
from dalenius.core.errors import PublicAnswer, QueryError
from dalenius.core.loss import PureDP
from dalenius.engine.session import Session


@pytest.fixture
def session(adult_catalog_path: Path) -> Session:
    return dalenius.connect(adult_catalog_path, ledger="memory:", budget=1)


def _forbid_reads(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("a public answer read the data")

    monkeypatch.setattr(session.executor, "fetch", fail)
    monkeypatch.setattr(session.executor, "prepare", fail)


def test_the_keys_are_answered_exactly_free_and_audited(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    _forbid_reads(session, monkeypatch)
    result = session.query("SELECT sex FROM adult GROUP BY sex", epsilon=0.5)
    assert result.columns == ("sex",) and result.rows == (("Female",), ("Male",), ("Unknown",))
    assert result.kinds == ("key",) and result.loss == PureDP(Fraction(0))
    assert session.remaining() == PureDP(Fraction(1)) and session.ledger.entries() == []
    (line,) = [a for a in session.ledger.audit() if a.sql.startswith("SELECT sex")]
    assert line.outcome == "answered" and "nothing spent" in line.detail
    assert "[low, high]" not in str(result)


def test_where_order_by_and_limit_apply_to_the_keys(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    _forbid_reads(session, monkeypatch)
    rows = session.query(
        "SELECT education_num AS e FROM adult WHERE education_num > 12 GROUP BY e "
        "ORDER BY e DESC LIMIT 3",
        epsilon=0.5,
    ).rows
    assert rows == ((16,), (15,), (14,))
    pairs = session.query(
        "SELECT race, sex FROM adult WHERE sex <> 'Unknown' GROUP BY sex, race ORDER BY race",
        epsilon=0.5,
    ).rows
    assert len(pairs) == 10 and pairs[0] == ("Amer-Indian-Eskimo", "Female")
    assert [r[0] for r in pairs] == sorted(r[0] for r in pairs)


def test_having_or_private_keys_are_not_answered_from_the_catalog(session: Session) -> None:
    with pytest.raises(QueryError, match="these are public") as refused:
        session.query("SELECT sex FROM adult GROUP BY sex HAVING sex <> 'Male'", epsilon=0.5)
    assert not isinstance(refused.value, PublicAnswer)
    with pytest.raises(QueryError, match="delta"):  # private keys: partition selection, charged
        session.query("SELECT occupation FROM adult GROUP BY occupation", epsilon=0.5)
    assert session.remaining() == PureDP(Fraction(1))


def test_explain_says_it_is_free(session: Session) -> None:
    with pytest.raises(PublicAnswer, match="reading no data and spending nothing"):
        session.explain("SELECT sex FROM adult GROUP BY sex", epsilon=0.5)


def test_the_cli_prints_the_keys(
    adult_catalog_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dalenius.cli.main import main

    ledger = str(tmp_path / "l.sqlite")
    args = ["query", "--catalog", str(adult_catalog_path), "--ledger", ledger, "--budget", "1"]
    assert main([*args, "--epsilon", "0.1", "SELECT sex FROM adult GROUP BY sex"]) == 0
    printed = capsys.readouterr()
    assert "Female" in printed.out and "Unknown" in printed.out and "ε=0" in printed.out
    assert "nothing spent" in printed.err  # notes go to stderr, as the other hints do
