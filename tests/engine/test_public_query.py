"""A query over public tables alone is answered exactly and free, after an allow-list that keeps
the pass-through away from private tables, files, system catalogs and unlisted functions (issue
"Speed on data as it comes": "a query over public tables only should be answered exactly, free").
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import duckdb
import pytest
from tests.support import public_tables as shop

import dalenius
from dalenius.core.errors import PublicAnswer, PublicQuery, QueryError
from dalenius.core.loss import PureDP
from dalenius.engine.session import Session


@pytest.fixture(scope="module")
def catalog_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shop.write(tmp_path_factory.mktemp("shop"))


@pytest.fixture
def session(catalog_path: Path) -> Session:
    return dalenius.connect(catalog_path, ledger="memory:", budget=1)


def _raw(catalog_path: Path, sql: str) -> list[tuple[object, ...]]:
    """``sql`` run by DuckDB itself over the same files: the answer a pass-through must give."""
    con = duckdb.connect()
    for name in shop.TABLES:
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM '{catalog_path.parent / name}.csv'")
    return con.execute(sql).fetchall()


@pytest.mark.parametrize(
    ("sql", "expected"),
    [(shop.Q2, shop.Q2_ROWS), (shop.Q11, shop.Q11_ROWS), (shop.Q16, shop.Q16_ROWS)],
    ids=["Q2", "Q11", "Q16"],
)
def test_tpch_shapes_are_answered_exactly(
    session: Session, catalog_path: Path, sql: str, expected: tuple[tuple[object, ...], ...]
) -> None:
    result = session.query(sql)
    assert result.rows == expected
    assert [tuple(r) for r in result.rows] == _raw(catalog_path, sql)


def test_the_answer_is_free_writes_no_ledger_entry_and_one_audit_line(session: Session) -> None:
    result = session.query(shop.Q11, epsilon=0.5)
    assert result.loss == PureDP(Fraction(0)) and result.spent == PureDP(Fraction(0))
    assert session.remaining() == PureDP(Fraction(1)) and session.ledger.entries() == []
    (line,) = [a for a in session.ledger.audit() if a.sql == shop.Q11]
    assert line.outcome == "answered" and "public tables" in line.detail
    assert any("public tables (partsupp, supplier, nation)" in n for n in result.notes)


def test_an_aggregate_s_interval_is_its_value_and_keys_have_none(session: Session) -> None:
    result = session.query(
        "SELECT n_name, COUNT(*) AS n, SUM(s_acctbal) FROM supplier JOIN nation "
        "ON s_nationkey = n_nationkey GROUP BY n_name ORDER BY n_name"
    )
    assert result.columns == ("n_name", "n", "SUM(s_acctbal)")
    assert result.kinds == ("key", "count", "exact")
    assert result.rows == (("FRANCE", 1, 10.5), ("GERMANY", 2, 50.0), ("PERU", 1, 40.0))
    assert result.lows == result.highs == tuple((None, *row[1:]) for row in result.rows)


def test_explain_says_it_is_free_and_reads_nothing(session: Session) -> None:
    with pytest.raises(PublicQuery, match="reads only public tables") as caught:
        session.explain(shop.Q16, epsilon=0.5)
    assert caught.value.columns == ("p_brand", "p_type", "p_size", "supplier_cnt")
    assert caught.value.types == ("str", "str", "int", "int")


def _forbid_reads(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("a refused query read the data")

    monkeypatch.setattr(session.executor, "fetch", fail)
    monkeypatch.setattr(session.executor, "prepare", fail)


@pytest.mark.parametrize(
    ("sql", "clause", "what"),
    [
        ("SELECT * FROM nation, read_csv('/etc/passwd')", "FROM", "table function READ_CSV"),
        ("SELECT COUNT(*) FROM nation, read_parquet('x.parquet')", "FROM", "READ_PARQUET"),
        ("SELECT * FROM nation, duckdb_tables()", "FROM", "table function DUCKDB_TABLES"),
        ("SELECT * FROM nation, 'customer.csv'", "FROM", "unknown table 'customer.csv'"),
        ("SELECT * FROM nation JOIN pg_catalog.pg_class ON 1 = 1", "FROM", "schema-qualified"),
        ("SELECT COUNT(*) FROM nation, information_schema.tables", "FROM", "schema-qualified"),
        ("SELECT COUNT(*) FROM nation, pg_class", "FROM", "unknown table 'pg_class'"),
        ("SELECT pg_read_file('/etc/passwd') FROM nation", "SELECT", "function PG_READ_FILE"),
        ("SELECT COUNT(*) FROM nation WHERE current_setting('a') = ''", "WHERE", "CURRENT_SETTING"),
        ("SELECT CAST(n_name AS regclass) FROM nation", "SELECT", "cast to"),
        ("SELECT n_secret FROM nation", "SELECT", "unknown column 'n_secret'"),
        ("SELECT n_name FROM nation UNION SELECT s_name FROM supplier", "statement", "one SELECT"),
        ("WITH nation AS (SELECT 1 AS a) SELECT COUNT(*) FROM nation", "WITH", "hides"),
        ("SELECT COUNT(*) OVER () FROM nation", "SELECT", "not supported"),
        ("WITH RECURSIVE r AS (SELECT 1 AS a) SELECT COUNT(*) FROM nation, r", "WITH", "RECURSIVE"),
    ],
)
def test_the_allow_list_refuses_before_any_data_is_read(
    session: Session, monkeypatch: pytest.MonkeyPatch, sql: str, clause: str, what: str
) -> None:
    _forbid_reads(session, monkeypatch)
    with pytest.raises(QueryError) as caught:
        session.query(sql)
    assert not isinstance(caught.value, PublicAnswer)
    assert caught.value.clause == clause and what in caught.value.what
    assert caught.value.why and caught.value.fix
    assert session.ledger.audit()[-1].outcome == "refused"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM nation WHERE n_nationkey IN (SELECT c_nationkey FROM customer)",
        "SELECT COUNT(*) FROM nation WHERE EXISTS "
        "(SELECT * FROM customer WHERE c_nationkey = n_nationkey)",
        "WITH c AS (SELECT * FROM customer) SELECT COUNT(*) FROM nation",
        "SELECT COUNT(*) FROM nation WHERE n_nationkey = (SELECT MAX(c_nationkey) FROM customer)",
        "WITH x AS (SELECT * FROM nation) SELECT COUNT(*) FROM x JOIN customer "
        "ON c_nationkey = x.n_nationkey",
    ],
)
def test_a_private_table_anywhere_leaves_the_query_to_the_private_path(
    session: Session, monkeypatch: pytest.MonkeyPatch, sql: str
) -> None:
    """A private table in a subquery, a WITH or a join: never passed through (here refused or
    charged as a private query, never answered exactly)."""
    _forbid_reads(session, monkeypatch)
    with pytest.raises(QueryError) as caught:
        session.plan(sql, epsilon=0.5)
    assert not isinstance(caught.value, PublicAnswer)


def test_the_last_query_reads_the_private_table_as_a_private_query(session: Session) -> None:
    plan = session.plan(
        "SELECT COUNT(*) FROM customer JOIN nation ON c_nationkey = n_nationkey", epsilon=0.5
    )
    assert plan.loss == PureDP(Fraction(1, 2))


def test_a_with_name_out_of_its_scope_is_not_read_as_a_table(session: Session) -> None:
    """``secret`` is a WITH name inside the subquery only: outside it, it is an unknown table
    (the engine might hold a relation of that name)."""
    with pytest.raises(QueryError, match="secret") as caught:
        session.query(
            "SELECT COUNT(*) FROM (WITH secret AS (SELECT * FROM nation) SELECT * FROM secret) "
            "AS t, secret"
        )
    assert not isinstance(caught.value, PublicAnswer)


def test_too_many_rows_are_refused_with_the_fix(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("dalenius.sql.public_sql.MAX_PUBLIC_ROWS", 3)
    with pytest.raises(QueryError, match="more than 3 rows") as caught:
        session.query("SELECT * FROM partsupp")
    assert "LIMIT" in (caught.value.fix or "")
    assert len(session.query("SELECT * FROM partsupp LIMIT 3").rows) == 3


def test_the_cli_prints_the_exact_answer(
    catalog_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dalenius.cli.main import main

    ledger = str(tmp_path / "l.sqlite")
    args = ["query", "--catalog", str(catalog_path), "--ledger", ledger, "--budget", "1"]
    assert main([*args, "--epsilon", "0.1", shop.Q16]) == 0
    printed = capsys.readouterr()
    assert "SMALL TIN" in printed.out and "ε=0" in printed.out
    assert "public tables" in printed.err
    # An exact value's interval is the value itself: the table prints the value alone.
    sql = "SELECT n_name, COUNT(*) AS n FROM supplier JOIN nation ON s_nationkey = n_nationkey GROUP BY n_name"
    assert main([*args, "--epsilon", "0.1", sql]) == 0
    table = capsys.readouterr().out
    assert "GERMANY" in table and "[" not in table and "interval" not in table
