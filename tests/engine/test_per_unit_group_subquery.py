"""Per-(person, group) pre-aggregation written as a plain SQL subquery is answered like BigQuery's
per-unit form: the same per-unit values, bounded the same way, so the same exact measurements
for the same hash key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.exact import exact_data

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import PrivacyRefusal
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

PLAIN = (
    "SELECT race, SUM(n), SUM(inc) FROM (SELECT pid, race, COUNT(*) AS n, SUM(income) AS inc "
    "FROM pums GROUP BY pid, race) AS t GROUP BY race"
)
BIGQUERY = (
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = pid) "
    "race, COUNT(*), SUM(income) FROM pums GROUP BY race"
)


@pytest.fixture(scope="module")
def session(shared_data: Path) -> Iterator[Session]:
    catalog = load_catalog(FIXTURES / "pums.toml")
    with Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog)) as s:
        yield s


def test_the_plain_subquery_measures_what_bigquerys_form_measures(session: Session) -> None:
    for salt in (3, 1_000_017):
        plain_plan, plain = exact_data(session, PLAIN, salt=salt)
        bq_plan, bq = exact_data(session, BIGQUERY, salt=salt)
        assert plain_plan.query.group_by[0].keys == (1, 2, 3, 4, 5, 6)
        assert plain.groups == bq.groups
        for a, b in zip(plain_plan.measurements, bq_plan.measurements, strict=True):
            assert a.sensitivity_units == b.sensitivity_units
            assert plain.scalars[a.name].tolist() == bq.scalars[b.name].tolist()


def test_the_unit_must_be_among_the_subquerys_keys(session: Session) -> None:
    with pytest.raises(PrivacyRefusal, match="must GROUP BY the privacy unit"):
        session.prepare(
            "SELECT race, AVG(n) FROM (SELECT race, COUNT(*) AS n FROM pums GROUP BY race) AS t "
            "GROUP BY race",
            1,
        )
