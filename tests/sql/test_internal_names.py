"""No internal name ever reaches an error message (a property over generated bad queries).

Dalenius names fields it adds itself (the privacy unit carried through a subquery, BigQuery's
per-unit values) and refers to aggregates and keys by encoded ids; none of these may be offered
to the analyst (a subquery's fix once read ``use one of: __unit, age``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import UserError
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
INTERNAL = re.compile(r"__|@[ak]\d|\bpums__|\bs__")

SOURCES = [
    "pums",
    "(SELECT age, sex FROM pums) s",
    "(SELECT age FROM pums WHERE sex = 1) s",
    "(SELECT pid, SUM(income) AS total FROM pums GROUP BY pid) s",
    "pums p JOIN visits v ON p.pid = v.pid",
    "pums p JOIN educ_names e ON p.educ = e.educ",
    "w",
]
SELECTS = [
    "COUNT(*)",
    "COUNT(foo)",
    "SUM(foo)",
    "FOOBAR(age)",
    "age",
    "SUM(pid)",
    "COUNT(*) + SUM(age)",
    "AVG(age), nosuch",
    "VARIANSE(age)",
]
CONDITIONS = ["", "WHERE foo = 1", "WHERE age = 'x'", "WHERE s.nothing > 2", "WHERE age LIKE 'a%'"]
TAILS = ["", "GROUP BY foo", "ORDER BY foo", "HAVING foo > 1", "GROUP BY sex HAVING bar > 1"]
CLAUSES = ["", "WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6) "]


@pytest.fixture(scope="module")
def session(shared_data: Path) -> Iterator[Session]:
    catalog = load_catalog(FIXTURES / "pums.toml")
    with Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog)) as s:
        yield s


bad_queries = st.builds(
    lambda clause, select, source, where, tail: (
        ("WITH w AS (SELECT age, sex FROM pums) " if source == "w" else "")
        + f"SELECT {clause}{select} FROM {source} {where} {tail}"
    ),
    st.sampled_from(CLAUSES),
    st.sampled_from(SELECTS),
    st.sampled_from(SOURCES),
    st.sampled_from(CONDITIONS),
    st.sampled_from(TAILS),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(bad_queries)
def test_no_internal_name_in_any_error(session: Session, sql: str) -> None:
    try:
        session.explain(sql, 1, delta=1e-6)
    except UserError as exc:
        message = "\n".join(str(part) for part in (exc.what, exc.why, exc.fix) if part)
        assert not INTERNAL.search(message), (sql, message)


def test_the_reported_leak_is_gone(session: Session) -> None:
    with pytest.raises(UserError) as info:
        session.explain("SELECT COUNT(*) FROM (SELECT age FROM pums) s WHERE foo = 1", 1)
    assert info.value.fix == "use one of: age."
