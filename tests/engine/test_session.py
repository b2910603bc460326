"""The query protocol: cost known up front, refusals free, reserve → run → noise → commit."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest

import dalenius
from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.errors import (
    BudgetExceededError,
    ConfigurationError,
    EvaluationFailed,
    ExecutionError,
    InvalidLossError,
    PostGateOutcome,
    QueryError,
)
from dalenius.core.loss import PureDP
from dalenius.engine.session import Session, connect
from dalenius.executors.base import Executor, Row
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import Ledger, open_ledger


@pytest.fixture(scope="module")
def catalog(adult_catalog_path: Path) -> Catalog:
    return load_catalog(adult_catalog_path)


@pytest.fixture
def session(catalog: Catalog) -> Iterator[Session]:
    with connect(catalog, budget=1) as s:
        yield s


def test_query_spends_exactly_what_explain_said(session: Session) -> None:
    sql = "SELECT education, COUNT(*), AVG(age), SUM(capital_gain) FROM adult GROUP BY education"
    explained = session.explain(sql, epsilon="0.3")
    assert session.remaining() == PureDP(Fraction(1))  # explain spends nothing
    result = session.query(sql, epsilon="0.3")
    assert result.loss == explained.loss == PureDP(Fraction(3, 10))
    assert session.remaining() == PureDP(Fraction(7, 10))
    assert result.remaining == session.remaining()
    assert sum(m.epsilon for m in explained.measurements) == Fraction(3, 10)


def test_result_shapes_and_conversions(session: Session) -> None:
    result = session.query(
        "SELECT sex, COUNT(*) AS n, AVG(hours_per_week) AS h FROM adult GROUP BY sex", epsilon=1
    )
    assert result.columns == ("sex", "n", "h")
    assert result.column("sex") == ["Female", "Male", "Unknown"]
    for i in range(3):
        lo, hi = result.interval(i, "h")
        assert 1.5 <= lo <= result.rows[i][2] <= hi <= 60.25
    frame = result.to_pandas()
    assert list(frame.columns) == ["sex", "n", "n_low", "n_high", "h", "h_low", "h_high"]
    assert result.to_arrow().num_rows == 3
    doc = result.to_dict()
    assert doc["rows"][0][1].keys() == {"value", "low", "high"}
    assert doc["spent"]["epsilon_exact"] == "1/1"
    assert "95% interval" in str(result)


def test_identical_query_is_free_and_identical(session: Session) -> None:
    sql = "SELECT COUNT(*) FROM adult WHERE age >= 40"
    first = session.query(sql, epsilon="0.25")
    again = session.query(sql, epsilon="0.25")
    assert again.rows == first.rows and again.cached and not first.cached
    assert again.spent == PureDP(Fraction(0))
    assert session.remaining() == PureDP(Fraction(3, 4))
    # A different ε is a different release, at its own cost.
    session.query(sql, epsilon="0.25000001")
    assert session.remaining().epsilon < Fraction(1, 2)


def test_budget_refusal_spends_nothing_and_reads_nothing(catalog: Catalog) -> None:
    executor = CountingExecutor(catalog)
    with Session(catalog, ledger=budgeted(catalog, "0.5"), executor=executor) as s:
        with pytest.raises(BudgetExceededError) as info:
            s.query("SELECT COUNT(*) FROM adult", epsilon="0.75")
        assert (info.value.requested, info.value.remaining) == (Fraction(3, 4), Fraction(1, 2))
        assert executor.fetches == 0
        assert s.remaining() == PureDP(Fraction(1, 2))
        outcomes = [a.outcome for a in s.ledger.audit()]
        assert outcomes.count("refused") == 1


@pytest.mark.parametrize("epsilon", [0, -1, "nan", float("inf"), "x", True])
def test_bad_epsilon_is_refused_for_free(session: Session, epsilon: object) -> None:
    with pytest.raises(InvalidLossError):
        session.query("SELECT COUNT(*) FROM adult", epsilon=epsilon)
    assert session.remaining() == PureDP(Fraction(1))


def test_bad_sql_is_refused_for_free_with_an_audit_line(session: Session) -> None:
    with pytest.raises(QueryError):
        session.query("SELECT * FROM adult", epsilon=0.1)
    assert session.remaining() == PureDP(Fraction(1))
    audit = session.ledger.audit()
    assert audit[-1].outcome == "refused" and "SELECT *" in audit[-1].sql
    assert session.ledger.entries() == []


def test_engine_failure_after_the_gate_is_charged(catalog: Catalog) -> None:
    with Session(catalog, ledger=budgeted(catalog, "1"), executor=FailingExecutor(catalog)) as s:
        with pytest.raises(EvaluationFailed) as caught:
            s.query("SELECT COUNT(*) FROM adult", epsilon="0.5")
        assert str(caught.value) == PostGateOutcome.FAILED.message
        assert s.remaining() == PureDP(Fraction(1, 2))
        assert [e.status for e in s.ledger.entries()] == ["failed"]


def test_connect_budget_rules(catalog: Catalog, tmp_path: Path) -> None:
    path = str(tmp_path / "l.sqlite")
    with pytest.raises(ConfigurationError, match="no budget is recorded"):
        connect(catalog, ledger=path)
    connect(catalog, budget=2, ledger=path).close()
    connect(catalog, ledger=path).close()  # the recorded budget is used
    connect(catalog, budget=2, ledger=path).close()  # the same value is fine
    with pytest.raises(ConfigurationError, match="cannot raise their own budget"):
        connect(catalog, budget=3, ledger=path)


def test_budget_survives_a_restart(catalog: Catalog, tmp_path: Path) -> None:
    path = str(tmp_path / "l.sqlite")
    with connect(catalog, budget=1, ledger=path) as s:
        first = s.query("SELECT COUNT(*) FROM adult", epsilon="0.5")
    with connect(catalog, ledger=path) as s:
        assert s.remaining() == PureDP(Fraction(1, 2))
        again = s.query("SELECT COUNT(*) FROM adult", epsilon="0.5")
        assert again.cached and again.rows == first.rows


def test_public_api_is_complete_and_importable() -> None:
    # ruff (RUF022) keeps __all__ sorted; here: no drift between __all__ and the lazy exports.
    assert set(dalenius.__all__) == set(dalenius._EXPORTS) | {"__version__"}
    assert len(set(dalenius.__all__)) == len(dalenius.__all__)
    for name in dalenius.__all__:
        assert getattr(dalenius, name) is not None


def budgeted(catalog: Catalog, epsilon: str) -> Ledger:
    ledger = open_ledger(None)
    ledger.set_budget("analyst", catalog.name, PureDP(Fraction(epsilon)))
    return ledger


class CountingExecutor(DuckDBExecutor):
    def __init__(self, catalog: Catalog) -> None:
        super().__init__(catalog)
        self.fetches = 0

    def fetch(self, sql: str) -> list[Row]:
        self.fetches += 1
        return super().fetch(sql)


class FailingExecutor(Executor):
    dialect = "duckdb"

    def fetch(self, sql: str) -> list[Row]:
        raise ExecutionError("the engine fell over")

    def data_version(self, table: object) -> str:
        return "v1"


def test_explain_shows_every_hidden_cost(catalog: Catalog) -> None:
    with connect(catalog, budget=1) as s:
        text = str(
            s.explain(
                "SELECT occupation, AVG(age), MEDIAN(hours_per_week) FROM adult GROUP BY occupation "
                "HAVING COUNT(*) > 100",
                epsilon=1,
                delta=1e-6,
            )
        )
    # AVG's split into a centred sum and a count, the private selection, the quantile search,
    # and the aggregate used only in HAVING are all listed with their ε.
    assert "SUM(age - 48.5)" in text and "COUNT(*)" in text
    assert "groups are selected privately" in text and "no public keys" in text
    assert "select a bin of" in text and "q=0.5" in text
    assert "(hidden) COUNT(*)" in text
    assert "ε=1, δ=1e-06" in text
