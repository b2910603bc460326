"""EXISTS / NOT EXISTS / IN (SELECT ...) in WHERE: a semi-join that keeps or drops each row.

Admitted when a row's fate depends on that row and public data (the subquery reads public
tables), or on rows of its own privacy unit (a private subquery correlated on the unit); the
sensitivity is then the outer relation's. The neighbour tests are in
``tests/engine/test_neighbours.py``, the answers on every engine in the conformance tables.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from tests.support.csv_catalog import csv_session
from tests.support.exact import exact_answer

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import PrivacyRefusal, QueryError
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger
from dalenius.plan.nodes import Filter, SemiJoin, scans
from dalenius.sql.bind import to_query

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def pums(shared_data: Path) -> Session:
    catalog = load_catalog(FIXTURES / "pums.toml")
    return Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))


def _semi_join(sql: str, session: Session) -> SemiJoin:
    relation = to_query(sql, session.catalog).query.relation
    while isinstance(relation, Filter):
        relation = relation.child
    assert isinstance(relation, SemiJoin)
    return relation


def test_a_private_subquery_on_the_unit_keeps_the_outer_sensitivity(pums: Session) -> None:
    sql = (
        "SELECT COUNT(*) FROM pums p WHERE age > 20 AND EXISTS "
        "(SELECT * FROM visits v WHERE v.pid = p.pid AND v.income > 100)"
    )
    semi = _semi_join(sql, pums)
    assert semi.on_unit and not semi.negated and semi.operand is None
    # The subquery's own condition filters its rows; the correlated one sits in the semi-join.
    assert isinstance(semi.right, Filter) and semi.condition is not None
    assert [s.table for s in scans(semi.right)] == ["visits"]
    plain = pums.plan("SELECT COUNT(*) FROM pums p WHERE age > 20", 1)
    plan = pums.plan(sql, 1)
    assert [m.sensitivity_units for m in plan.measurements] == [
        m.sensitivity_units for m in plain.measurements
    ]
    assert plan.query.unit == plain.query.unit


def test_in_on_the_unit_is_the_same_correlation(pums: Session) -> None:
    semi = _semi_join(
        "SELECT COUNT(*) FROM pums WHERE pid NOT IN (SELECT pid FROM visits WHERE income < 2e4)",
        pums,
    )
    assert semi.on_unit and semi.negated and semi.operand is not None and semi.condition is None


def test_a_public_subquery_needs_no_correlation(pums: Session) -> None:
    semi = _semi_join(
        "SELECT COUNT(*) FROM pums WHERE educ IN (SELECT educ FROM educ_names WHERE label <> 'x')",
        pums,
    )
    assert not semi.on_unit and semi.column is not None


def test_explain_shows_the_test_and_its_conditions(pums: Session) -> None:
    text = pums.explain(
        "SELECT COUNT(*) FROM pums p WHERE NOT EXISTS "
        "(SELECT 1 FROM visits v WHERE v.pid = p.pid AND v.income > 100)",
        1,
    )
    assert "NOT EXISTS a row of visits where" in str(text)


@pytest.mark.parametrize(
    ("sql", "fix"),
    [
        (
            "SELECT COUNT(*) FROM pums p WHERE EXISTS (SELECT * FROM visits v WHERE v.income > 4e5)",
            "add AND v.pid = p.pid",
        ),
        (
            "SELECT COUNT(*) FROM pums p WHERE EXISTS "
            "(SELECT * FROM visits v WHERE v.income = p.income)",
            "add AND v.pid = p.pid",
        ),
        (
            "SELECT COUNT(*) FROM pums WHERE age IN (SELECT pid FROM visits)",
            "add AND visits.pid = pums.pid",
        ),
    ],
)
def test_a_private_subquery_not_on_the_unit_is_refused_with_the_correlation_to_add(
    pums: Session, sql: str, fix: str
) -> None:
    """One person's rows in the subquery could decide whether everyone else's rows count."""
    with pytest.raises(PrivacyRefusal) as caught:
        pums.plan(sql, 1)
    assert caught.value.clause == "WHERE"
    assert fix in (caught.value.fix or "")


def test_a_name_the_subquery_lacks_is_the_outer_query_s(pums: Session) -> None:
    """visits has no age: age is pums.age, a correlated condition, as SQL scopes it."""
    semi = _semi_join(
        "SELECT COUNT(*) FROM pums p WHERE EXISTS (SELECT * FROM visits v WHERE v.pid = p.pid "
        "AND age < 30)",
        pums,
    )
    assert semi.condition is not None and "p__age" in repr(semi.condition)
    assert not isinstance(semi.right, Filter)


def test_a_correlated_name_resolves_inside_first_as_sql_scopes_it(pums: Session) -> None:
    # Unqualified income is the subquery's own (visits.income), so this is uncorrelated.
    with pytest.raises(PrivacyRefusal):
        pums.plan(
            "SELECT COUNT(*) FROM pums WHERE EXISTS (SELECT * FROM visits WHERE income > 5)", 1
        )


def test_an_unknown_name_in_the_subquery_is_named(pums: Session) -> None:
    with pytest.raises(QueryError, match="unknown column 'incme'"):
        pums.plan(
            "SELECT COUNT(*) FROM pums p WHERE EXISTS (SELECT * FROM visits v WHERE v.incme = 1)", 1
        )


def test_the_where_still_narrows_public_keys_below_a_semi_join(pums: Session) -> None:
    """The WHERE's filter sits below the EXISTS (so the engine decides it for fewer rows), and
    its conditions still rule out the keys no row can have."""
    query = to_query(
        "SELECT sex, COUNT(*) FROM pums p WHERE sex = 1 AND EXISTS "
        "(SELECT * FROM visits v WHERE v.pid = p.pid AND v.income > 100) GROUP BY sex",
        pums.catalog,
    ).query
    assert isinstance(query.relation, SemiJoin) and isinstance(query.relation.child, Filter)
    assert query.group_by[0].keys == (1,)


SEMI_JOIN_FORMS = [
    # Correlated by equalities over a table's filtered rows: a join DuckDB hashes either way.
    ("EXISTS (SELECT 1 FROM codes c WHERE c.k = p.k)", "SEMI JOIN"),
    ("NOT EXISTS (SELECT 1 FROM codes c WHERE c.k = p.k)", "ANTI JOIN"),
    ("NOT EXISTS (SELECT 1 FROM codes c WHERE c.k = p.k AND c.k > 1)", "ANTI JOIN"),
    ("NOT EXISTS (SELECT 1 FROM codes c WHERE c.k = p.k AND c.id = p.id)", "ANTI JOIN"),
    # The others keep their SQL.
    ("NOT EXISTS (SELECT 1 FROM codes c WHERE c.k = p.k AND c.id <> p.id)", "EXISTS"),
    ("EXISTS (SELECT 1 FROM codes WHERE k > 5)", "EXISTS"),
    ("NOT EXISTS (SELECT 1 FROM codes WHERE k > 5)", "EXISTS"),
    ("k IN (SELECT k FROM codes)", "IN (SELECT"),
    ("k NOT IN (SELECT k FROM codes)", "IN (SELECT"),
    ("k NOT IN (SELECT k FROM codes WHERE NOT k IS NULL)", "IN (SELECT"),
]


@pytest.mark.parametrize(("test", "form"), SEMI_JOIN_FORMS)
def test_duckdb_writes_a_semi_join_that_keeps_the_same_rows(
    test: str, form: str, tmp_path: Path
) -> None:
    """DuckDB's exact SQL writes ``[NOT] EXISTS`` correlated by equalities alone as a ``SEMI`` /
    ``ANTI JOIN``, and keeps the others' SQL; with NULL keys on both sides the kept rows are the
    ones DuckDB keeps for the query as written."""
    session = csv_session(
        tmp_path,
        {
            "p.csv": "id,k\n1,1\n2,2\n3,2\n4,3\n5,\n6,4\n7,\n",
            "codes.csv": "id,k\n1,2\n2,3\n3,\n4,9\n",
        },
        '[dataset]\nname = "semi"\n'
        '[tables.p]\nsource = { csv = "p.csv" }\nprivacy_unit = "row"\n'
        'columns = { id = "int", k = { type = "int", bounds = [0, 10] } }\n'
        '[tables.codes]\nsource = { csv = "codes.csv" }\npublic = true\n'
        'columns = { id = "int", k = "int" }\n',
    )
    sql = f"SELECT COUNT(*), SUM(k) FROM p WHERE {test}"
    main = session.prepare(sql, 1).exact.main
    assert form in main
    assert ("JOIN" in main) == form.endswith("JOIN")
    answer = exact_answer(session, sql)
    raw = duckdb.connect()
    raw.execute(f"CREATE VIEW p AS SELECT * FROM read_csv('{tmp_path / 'p.csv'}')")
    raw.execute(f"CREATE VIEW codes AS SELECT * FROM read_csv('{tmp_path / 'codes.csv'}')")
    count, total = raw.execute(sql).fetchone()  # type: ignore[misc]
    assert [float(v) for v in answer.rows[0]] == [float(count), float(total or 0)]
