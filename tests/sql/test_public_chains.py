"""Public tables written before the private one: the inner joins are re-ordered to start at the
private table, so each public table is a lookup joined on one equality, its key multiplicity
measured, and the sensitivity is the private table's, exactly as when written private-first."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from tests.support.exact import exact_data

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import PublicAnswer, PublicQuery, QueryError
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

CATALOG = """
[dataset]
name = "chains"

[tables.people]
source = { csv = "people.csv" }
privacy_unit = "row"

[tables.people.columns]
shop = { type = "str" }
amount = { type = "int", bounds = [0, 100] }

[tables.accounts]
source = { csv = "people.csv" }
privacy_unit = "row"

[tables.accounts.columns]
shop = { type = "str" }
amount = { type = "int", bounds = [0, 100] }

[tables.shops]
source = { csv = "shops.csv" }
public = true

[tables.shops.columns]
shop = { type = "str" }
region = { type = "str" }

[tables.zones]
source = { csv = "zones.csv" }
public = true

[tables.zones.columns]
region = { type = "str" }
zone = { type = "str", keys = ["z1", "z2", "z3"] }
"""

CHAIN = (
    "SELECT z.zone, COUNT(*), SUM(p.amount) FROM zones z JOIN shops s ON s.region = z.region "
    "JOIN people p ON p.shop = s.shop GROUP BY z.zone"
)
PRIVATE_FIRST = (
    "SELECT z.zone, COUNT(*), SUM(p.amount) FROM people p JOIN shops s ON p.shop = s.shop "
    "JOIN zones z ON s.region = z.region GROUP BY z.zone"
)


def _session(folder: Path, people: pd.DataFrame) -> Session:
    folder.mkdir()
    people.to_csv(folder / "people.csv", index=False)
    # Each shop in two regions, each region in up to three zones: one row can meet six.
    pd.DataFrame({"shop": ["a", "a", "b", "b", "c"], "region": ["n", "s", "n", "e", "s"]}).to_csv(
        folder / "shops.csv", index=False
    )
    pd.DataFrame(
        {"region": ["n", "n", "n", "s", "s", "e"], "zone": ["z1", "z2", "z3", "z2", "z3", "z1"]}
    ).to_csv(folder / "zones.csv", index=False)
    (folder / "cat.toml").write_text(CATALOG)
    catalog = load_catalog(folder / "cat.toml")
    return Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))


PEOPLE = pd.DataFrame({"shop": ["a", "b", "c", "a", "b"] * 20, "amount": list(range(0, 200, 2))})


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Session, Session]:
    base = tmp_path_factory.mktemp("chains")
    heavy = pd.DataFrame({"shop": ["a"], "amount": [10**6]})  # meets six public rows
    return _session(base / "with", pd.concat([PEOPLE, heavy])), _session(base / "without", PEOPLE)


def test_written_public_first_it_is_the_plan_written_private_first(
    pair: tuple[Session, Session],
) -> None:
    session = pair[0]
    chain, direct = session.plan(CHAIN, 1), session.plan(PRIVATE_FIRST, 1)
    assert chain.fingerprint() == direct.fingerprint()
    # A row of people meets two shops rows and, through each, up to three zones rows.
    assert chain.bounding.max_rows == 2 * 3


def test_removing_one_row_moves_each_measurement_by_at_most_its_sensitivity(
    pair: tuple[Session, Session],
) -> None:
    with_row, without = pair
    plan, a = exact_data(with_row, CHAIN)
    _, b = exact_data(without, CHAIN)
    assert a.groups == b.groups
    moved = 0
    for m in plan.measurements:
        l1 = int(abs(a.scalars[m.name].astype(object) - b.scalars[m.name].astype(object)).sum())
        assert l1 <= m.sensitivity_units, (m.describe(), l1)
        moved += l1
    assert moved > 0  # the heavy row is counted: the bound is met, not vacuous


def test_on_conditions_beside_the_keys_filter_the_joined_rows(
    pair: tuple[Session, Session],
) -> None:
    session = pair[1]
    sql = (
        "SELECT COUNT(*) FROM zones z JOIN shops s ON s.region = z.region AND z.zone <> 'z3' "
        "JOIN people p ON p.shop = s.shop AND p.amount < 100"
    )
    written = (
        "SELECT COUNT(*) FROM people p JOIN shops s ON p.shop = s.shop JOIN zones z "
        "ON s.region = z.region WHERE z.zone <> 'z3' AND p.amount < 100"
    )
    _, a = exact_data(session, sql)
    _, b = exact_data(session, written)
    counts = {k: v.tolist() for k, v in a.scalars.items()}
    assert counts == {k: v.tolist() for k, v in b.scalars.items()}
    assert all(v[0] > 0 for v in counts.values())


@pytest.mark.parametrize(
    ("sql", "what"),
    [
        (
            "SELECT COUNT(*) FROM zones z JOIN shops s ON s.region = z.region "
            "JOIN people p ON p.amount > 3",
            "joined to the others by no equality",
        ),
        (
            "SELECT COUNT(*) FROM zones z JOIN shops s ON s.region = z.region "
            "LEFT JOIN people p ON p.shop = s.shop",
            "joining two public tables",
        ),
        (
            "SELECT COUNT(*) FROM zones z JOIN people p ON p.shop = z.region "
            "JOIN accounts a ON a.shop = p.shop",
            "a join of two private tables without join_rows_per_key needs a delta",
        ),
        (
            "SELECT COUNT(*) FROM zones z JOIN shops s ON s.region = z.region "
            "JOIN people z ON z.shop = s.shop",
            "the same alias is used twice",
        ),
    ],
)
def test_other_chains_are_refused_at_the_join(
    pair: tuple[Session, Session], sql: str, what: str
) -> None:
    with pytest.raises(QueryError) as caught:
        pair[1].plan(sql, 1)
    assert caught.value.clause == "JOIN"
    assert what in caught.value.what


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT COUNT(*) FROM zones", ((6,),)),
        ("SELECT COUNT(*) FROM zones z JOIN shops s ON s.region = z.region", ((11,),)),
        (
            "SELECT z.zone, COUNT(*) FROM shops s JOIN zones z ON s.region = z.region "
            "GROUP BY z.zone ORDER BY z.zone",
            (("z1", 3), ("z2", 4), ("z3", 4)),
        ),
    ],
)
def test_a_query_of_public_tables_alone_is_answered_exactly_free(
    pair: tuple[Session, Session], sql: str, expected: tuple[tuple[object, ...], ...]
) -> None:
    # shops ⋈ zones on region: n meets 2 shops × 3 zones, s 2 × 2, e 1 × 1.
    with pytest.raises(PublicQuery) as caught:
        pair[1].plan(sql, 1)
    assert caught.value.clause == "FROM" and "zones" in caught.value.what
    result = pair[1].query(sql, 1)
    assert result.rows == expected and result.spent.epsilon == 0
    assert pair[1].ledger.entries() == []


def test_a_private_table_read_only_in_a_subquery_of_public_rows_is_refused(
    pair: tuple[Session, Session],
) -> None:
    with pytest.raises(QueryError) as caught:
        pair[1].plan("WITH p AS (SELECT * FROM people) SELECT COUNT(*) FROM zones", 1)
    assert not isinstance(caught.value, PublicAnswer)
    assert caught.value.clause == "FROM" and "public tables only (zones)" in caught.value.what
    assert "no privacy unit" in (caught.value.why or "")
    assert "leave the private table out" in (caught.value.fix or "")
