"""A subquery used as a value and correlated with a public table's column of the outer query is
released per value of that column, then written into the outer query as a CASE over it
(:mod:`dalenius.sql.correlated`, :mod:`dalenius.engine.staged_release`).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from tests.conformance.datasets import SHOP_TOML
from tests.support.refusals import refused_free

import dalenius
from dalenius.core.errors import QueryError
from dalenius.core.loss import PureDP
from dalenius.engine import staged_release
from dalenius.engine.session import Session
from dalenius.sql import validate

QUERY = (
    "SELECT COUNT(*) AS n FROM orders JOIN supplier ON suppkey = s_suppkey "
    "WHERE s_name <> 's3' AND amount < (SELECT AVG(amount) FROM orders o2 "
    "WHERE o2.suppkey = s_suppkey)"
)
"""Orders below their own supplier's average amount, suppliers other than s3."""


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """120 people with 1 to 6 orders (within the cap of 6 rows: nothing is truncated) over
    suppliers 1 to 6, amounts 3.5, 20, 64.25 or 100: each supplier's average lies between 20 and
    64.25, far from every amount, so the exact count does not move with a released average's
    tiny noise at a huge ε."""
    rng = np.random.Generator(np.random.PCG64(21))  # test data only, never noise
    counts = rng.integers(1, 7, 120)
    orders = pd.DataFrame(
        {
            "pid": np.arange(1, 121).repeat(counts),
            "suppkey": rng.integers(1, 7, int(counts.sum())),
            "amount": rng.choice([3.5, 20.0, 64.25, 100.0], int(counts.sum())),
        }
    )
    orders.to_csv(tmp_path / "shop_orders.csv", index=False)
    suppliers = pd.DataFrame(
        {
            "s_suppkey": range(1, 8),
            "s_name": [f"s{k}" for k in range(1, 8)],
            "s_group": [1, 1, 1, 1, 2, 2, 3],  # not unique: no correlation on it
        }
    )
    suppliers.to_csv(tmp_path / "shop_supplier.csv", index=False)
    path = tmp_path / "shop.toml"
    path.write_text(SHOP_TOML.format(folder=tmp_path, max_rows=6) + 's_group = { type = "int" }\n')
    return path


@pytest.fixture
def session(shop: Path) -> Session:
    return dalenius.connect(shop, ledger="memory:", budget=10**7)


def _exact(shop: Path, sql: str) -> int:
    """``sql`` run as written by DuckDB itself on the CSV files (correlated subquery and all)."""
    con = duckdb.connect()
    for name in ("orders", "supplier"):
        con.execute(
            f"CREATE VIEW {name} AS SELECT * FROM read_csv('{shop.parent}/shop_{name}.csv')"
        )
    return int(con.execute(sql).fetchone()[0])  # type: ignore[index]


def test_the_answer_is_the_correlated_query_s_at_a_huge_epsilon(
    session: Session, shop: Path
) -> None:
    """At ε = 1000 every released value is within 0.1 of its exact value, so the answer is the
    query's own, as DuckDB answers the correlated SQL."""
    result = session.query(QUERY, epsilon=1000)
    assert result.rows[0][0] == _exact(shop, QUERY) > 0
    assert result.loss == PureDP(Fraction(1000))
    (note,) = [n for n in result.notes if n.startswith("The subquery")]
    # Suppliers 1-7 but s3: supplier 7 has no order, and is answered too (a noisy average).
    assert "per value of s_suppkey: 6 values of the public table supplier" in note
    # The supplier s_name <> 's3' keeps, and no other, is asked for.
    stage = session._staged(QUERY, 1, None, None)
    assert isinstance(stage, staged_release.StagedRelease)
    assert staged_release._keys(stage.stages[0].release.prepared) == [1, 2, 4, 5, 6, 7]


def test_it_is_one_ledger_entry_and_a_repeat_is_free(session: Session) -> None:
    before = session.remaining()
    first = session.query(QUERY, epsilon=1)
    after = session.remaining()
    assert isinstance(before, PureDP) and isinstance(after, PureDP)
    assert before.epsilon - after.epsilon == 1
    again = session.query(QUERY, epsilon=1)
    assert again.cached and again.rows == first.rows
    assert session.remaining() == after
    outcomes = [e.outcome for e in session.ledger.audit("analyst")]
    assert outcomes.count("answered") == 1 and outcomes.count("cached") == 1


def test_explain_names_the_per_value_release_and_its_share(session: Session) -> None:
    shown = session.explain(QUERY, epsilon=3)
    text = str(shown)
    assert "(subquery 1)" in text
    assert (
        "released first per value of s_suppkey (the 6 values of the public table supplier" in text
    )
    assert "-- subquery 1, released first:" in shown.exact_sql
    assert str(shown.loss) == "ε=3"
    # The per-supplier AVG measures a sum and a count, the outer query one count: 2 + 1.
    assert [m.epsilon for m in shown.measurements] == [1.0, 1.0, 1.0]


REFUSED = [
    (
        "SELECT COUNT(*) FROM orders WHERE amount < (SELECT AVG(amount) FROM orders o2 "
        "WHERE o2.pid = orders.pid)",
        "correlated with orders.pid of the private table orders",
    ),
    (
        "SELECT COUNT(*) FROM orders JOIN supplier ON suppkey = s_suppkey WHERE amount < "
        "(SELECT AVG(amount) FROM orders o2 WHERE o2.suppkey < s_suppkey)",
        "refers to the outer query other than by one equality (s_suppkey)",
    ),
    (
        "SELECT COUNT(*) FROM orders JOIN supplier ON suppkey = s_suppkey WHERE amount < "
        "(SELECT AVG(amount) FROM orders o2 WHERE o2.suppkey = s_suppkey AND o2.pid = s_suppkey)",
        "other than by one equality",
    ),
    (
        "SELECT s_name, COUNT(*) - (SELECT COUNT(*) FROM orders o2 WHERE o2.suppkey = s_suppkey) "
        "FROM orders JOIN supplier ON suppkey = s_suppkey GROUP BY s_name",
        "is answered in WHERE, not in SELECT",
    ),
    (
        "SELECT COUNT(*) FROM orders JOIN supplier ON suppkey = s_suppkey WHERE amount < "
        "(SELECT SUM(amount) FROM orders o2 WHERE o2.pid = s_group)",
        "correlated with s_group, which is not unique in supplier (up to 4 rows share a value)",
    ),
    (
        "SELECT COUNT(*) FROM orders JOIN supplier ON suppkey = s_suppkey WHERE amount < "
        "(SELECT AVG(amount) FROM orders o2 WHERE o2.suppkey = s_suppkey GROUP BY o2.pid "
        "ORDER BY 1 LIMIT 1)",
        "one aggregate over its FROM and WHERE, with no GROUP BY, LIMIT, ORDER BY",
    ),
    (
        "SELECT COUNT(*) FROM orders JOIN supplier sp ON suppkey = s_suppkey WHERE amount < "
        "(SELECT AVG(amount) FROM orders AS sp WHERE sp.suppkey = s_suppkey)",
        "the subquery and the outer query both name sp",
    ),
    (
        "SELECT COUNT(*) FROM orders JOIN supplier ON suppkey = s_suppkey WHERE amount < "
        "(SELECT MAX(s2.s_suppkey) FROM supplier s2 WHERE s2.s_name = supplier.s_name)",
        "reads public tables alone and is correlated with supplier.s_name",
    ),
]


@pytest.mark.parametrize(("sql", "message"), REFUSED)
def test_other_correlations_are_refused_free_at_the_subquery(
    session: Session, sql: str, message: str
) -> None:
    refused = refused_free(session, sql, message)
    assert refused.span is not None and refused.span.column == sql.index("(SELECT") + 1


def test_too_many_values_are_refused_before_any_data_is_read(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(staged_release, "MAX_CORRELATED_KEYS", 5)
    with pytest.raises(QueryError, match="takes 6 values in supplier") as refused:
        session.query(QUERY, epsilon=1)
    assert "narrow the outer query's conditions on supplier" in str(refused.value)
    assert session.ledger.audit("analyst")[-1].outcome == "refused"


def test_the_text_limits_grow_with_the_values_written_in(
    session: Session, shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The analyst's text is checked against the limits; the outer query with a CASE branch
    per key may exceed them by what the keys need, and no more."""
    tokens = len(validate.tokenize(QUERY))
    monkeypatch.setattr(validate, "MAX_TOKENS", tokens + 2)
    monkeypatch.setattr(validate, "MAX_SQL_CHARS", len(QUERY) + 2)
    result = session.query(QUERY, epsilon=1000)
    assert result.rows[0][0] == _exact(shop, QUERY)
    with validate.written_in(10, 1), pytest.raises(QueryError, match="tokens"):
        validate.check_text(QUERY + " AND 1 = 1")


def test_a_text_key_and_a_null_key_are_answered(shop: Path) -> None:
    """Correlated on supplier names (unique; supplier 6's is NULL): the NULL key matches no row,
    as in SQL, and has no branch; the text keys are quoted in the CASE."""
    suppliers = pd.read_csv(shop.parent / "shop_supplier.csv")
    suppliers.loc[suppliers.s_suppkey == 6, "s_name"] = None
    suppliers.to_csv(shop.parent / "shop_supplier.csv", index=False)
    session = dalenius.connect(shop, ledger="memory:", budget=1000)
    sql = (
        "SELECT COUNT(*) FROM orders JOIN supplier s ON suppkey = s.s_suppkey WHERE amount < "
        "(SELECT AVG(amount) FROM orders o2 JOIN supplier s2 ON o2.suppkey = s2.s_suppkey "
        "WHERE s2.s_name = s.s_name)"
    )
    result = session.query(sql, epsilon=1000)
    assert result.rows[0][0] == _exact(shop, sql) > 0
    (note,) = [n for n in result.notes if n.startswith("The subquery")]
    assert "per value of s.s_name: 6 values of the public table supplier" in note
