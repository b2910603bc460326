"""Neighbouring datasets: removing one privacy unit moves each exact measurement by at most the
sensitivity the plan charges — for every aggregate and every join form.

The removed unit is adversarial: many rows, in many groups, with extreme values and many join
partners. Each query runs several times with fresh hash keys, since contribution bounding's choice
of rows must respect the bound whatever it keeps.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.support.exact import exact_data

from dalenius.core.catalog import load_catalog
from dalenius.core.loss import ZCDP
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

CATALOG = """
[dataset]
name = "neighbours"

[tables.people]
source = {{ csv = "people.csv" }}
privacy_unit = {{ column = "pid", max_rows = 3, max_groups = 2 }}

[tables.people.columns]
pid = {{ type = "int" }}
day = {{ type = "str", keys = ["mon", "tue", "wed", "thu", "fri"] }}
shop = {{ type = "str" }}
amount = {{ type = "float", bounds = [0, 100] }}
items = {{ type = "int", bounds = [0, 10] }}
visited = {{ type = "date" }}

[tables.accounts]
source = {{ csv = "accounts.csv" }}
privacy_unit = {{ column = "pid", max_rows = 3, max_groups = 2 }}

[tables.accounts.columns]
pid = {{ type = "int" }}
balance = {{ type = "int", bounds = [-50, 50] }}

[tables.shops]
source = {{ csv = "shops.csv" }}
public = true

[tables.shops.columns]
shop = {{ type = "str" }}
region = {{ type = "str", keys = ["north", "south"] }}

[tables.zones]
source = {{ csv = "zones.csv" }}
public = true

[tables.zones.columns]
region = {{ type = "str" }}
zone = {{ type = "str", keys = ["z1", "z2", "z3"] }}
"""

DAYS = ["mon", "tue", "wed", "thu", "fri"]
SHOPS = [f"s{i}" for i in range(6)]


def write(
    folder: Path, people: pd.DataFrame, accounts: pd.DataFrame, *, zcdp: bool = False
) -> Session:
    folder.mkdir()
    people.to_csv(folder / "people.csv", index=False)
    accounts.to_csv(folder / "accounts.csv", index=False)
    # Each shop appears in two regions: a join partner that doubles rows.
    pd.DataFrame({"shop": SHOPS * 2, "region": ["north"] * 6 + ["south"] * 6}).to_csv(
        folder / "shops.csv", index=False
    )
    # Each region lies in two zones: a public table joined to a public table, doubling again.
    pd.DataFrame(
        {"region": ["north", "north", "south", "south"], "zone": ["z1", "z2", "z2", "z3"]}
    ).to_csv(folder / "zones.csv", index=False)
    (folder / "cat.toml").write_text(CATALOG.format())
    catalog = load_catalog(folder / "cat.toml")
    ledger = open_ledger(None)
    if zcdp:  # a dataset accounted in zCDP: SQL aggregates may get Gaussian noise
        ledger.set_budget("analyst", "neighbours", ZCDP(Fraction(100)))
    return Session(catalog, ledger=ledger, executor=DuckDBExecutor(catalog))


def _pair(base: Path, zcdp: bool) -> tuple[Session, Session]:
    rng = np.random.Generator(np.random.PCG64(11))  # test data only, not noise
    n = 300
    people = pd.DataFrame(
        {
            "pid": np.arange(2, n + 2).repeat(2),
            "day": rng.choice(DAYS, 2 * n),
            "shop": rng.choice(SHOPS, 2 * n),
            "amount": rng.uniform(-10, 120, 2 * n).round(2),
            "items": rng.integers(-3, 14, 2 * n),
        }
    )
    people["visited"] = pd.Timestamp("2021-01-01") + pd.to_timedelta(
        rng.integers(0, 365, 2 * n), unit="D"
    )
    people["visited"] = people["visited"].dt.strftime("%Y-%m-%d")
    heavy = pd.DataFrame(
        {
            "pid": 1,
            "day": np.tile(DAYS, 12),
            "shop": np.tile(SHOPS, 10),
            "amount": 1e6,
            "items": 1000,
            "visited": "2021-02-28",
        }
    )
    accounts = pd.DataFrame({"pid": np.arange(2, n + 2), "balance": rng.integers(-80, 80, n)})
    heavy_acc = pd.DataFrame({"pid": [1] * 9, "balance": [10**6] * 9})
    with_unit = write(
        base / "with", pd.concat([people, heavy]), pd.concat([accounts, heavy_acc]), zcdp=zcdp
    )
    without = write(base / "without", people, accounts, zcdp=zcdp)
    return with_unit, without


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Session, Session]:
    return _pair(tmp_path_factory.mktemp("neighbours"), zcdp=False)


@pytest.fixture(scope="module")
def zcdp_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Session, Session]:
    return _pair(tmp_path_factory.mktemp("neighbours-zcdp"), zcdp=True)


QUERIES = [
    ("count", "SELECT COUNT(*) FROM people", None),
    ("count-col", "SELECT COUNT(amount) FROM people", None),
    ("count-distinct-unit", "SELECT day, COUNT(DISTINCT pid) FROM people GROUP BY day", None),
    ("count-distinct-value", "SELECT day, COUNT(DISTINCT shop) FROM people GROUP BY day", None),
    ("sum-float", "SELECT day, SUM(amount) FROM people GROUP BY day", None),
    ("sum-int", "SELECT SUM(items) FROM people", None),
    ("avg", "SELECT day, AVG(amount) FROM people GROUP BY day", None),
    ("var", "SELECT day, VAR_SAMP(items), STDDEV_POP(amount) FROM people GROUP BY day", None),
    (
        "quantiles",
        "SELECT day, MEDIAN(amount), MIN(items), MAX(items), QUANTILE(amount, 0.9) FROM people GROUP BY day",
        None,
    ),
    ("expression", "SELECT SUM(CASE WHEN amount > 50 THEN items ELSE 0 END) FROM people", None),
    ("private-keys", "SELECT shop, COUNT(*), AVG(amount) FROM people GROUP BY shop", 1e-6),
    ("derived-keys", "SELECT items / 5 AS b, COUNT(*) FROM people GROUP BY b", None),
    (
        "join-public",
        "SELECT s.region, COUNT(*), SUM(p.amount) FROM people p JOIN shops s ON p.shop = s.shop GROUP BY s.region",
        None,
    ),
    (
        "left-join-public",
        "SELECT COUNT(s.region), SUM(p.items) FROM people p LEFT JOIN shops s ON p.shop = s.shop",
        None,
    ),
    (
        "exists-per-unit-and-key-subquery",
        "SELECT COUNT(*), SUM(items) FROM people p WHERE EXISTS (SELECT * FROM "
        "(SELECT pid, day, SUM(amount) AS s FROM people GROUP BY pid, day) t "
        "WHERE t.pid = p.pid AND t.day = p.day AND t.s > 100)",
        None,
    ),
    (
        "left-join-on-unit-right-filtered",
        "SELECT COUNT(*), COUNT(a.balance), SUM(a.balance) FROM people p LEFT JOIN accounts a "
        "ON p.pid = a.pid AND a.balance > 0",
        None,
    ),
    (
        "left-join-filtered-histogram",
        "SELECT n, COUNT(*) FROM (SELECT p.pid, COUNT(a.balance) AS n FROM people p "
        "LEFT JOIN accounts a ON p.pid = a.pid AND a.balance > 0 GROUP BY p.pid) t GROUP BY n",
        None,
    ),
    (
        "public-chain-written-first",
        "SELECT z.zone, COUNT(*), SUM(p.amount) FROM zones z JOIN shops s ON s.region = z.region "
        "JOIN people p ON p.shop = s.shop GROUP BY z.zone",
        None,
    ),
    (
        "exists-on-unit",
        "SELECT day, COUNT(*), SUM(amount) FROM people p WHERE items > 0 AND EXISTS "
        "(SELECT * FROM accounts a WHERE a.pid = p.pid AND a.balance > 0) GROUP BY day",
        None,
    ),
    (
        "not-exists-on-unit",
        "SELECT COUNT(*), SUM(items) FROM people p WHERE NOT EXISTS "
        "(SELECT 1 FROM accounts a WHERE a.pid = p.pid AND a.balance < 0)",
        None,
    ),
    (
        "in-on-unit",
        "SELECT day, COUNT(*) FROM people WHERE pid IN (SELECT pid FROM accounts WHERE balance > 5) "
        "GROUP BY day",
        None,
    ),
    (
        "exists-per-unit-subquery",
        "SELECT COUNT(*), SUM(amount) FROM people p WHERE EXISTS (SELECT * FROM "
        "(SELECT pid, SUM(balance) AS b FROM accounts GROUP BY pid) t WHERE t.pid = p.pid "
        "AND t.b > 0)",
        None,
    ),
    (
        "exists-over-per-unit",
        "SELECT AVG(n), SUM(s) FROM (SELECT pid, COUNT(*) AS n, SUM(amount) AS s FROM people "
        "GROUP BY pid) t WHERE EXISTS (SELECT 1 FROM accounts a WHERE a.pid = t.pid "
        "AND a.balance > 0)",
        None,
    ),
    (
        "in-public",
        "SELECT COUNT(*), SUM(items) FROM people WHERE shop IN "
        "(SELECT shop FROM shops WHERE region = 'north')",
        None,
    ),
    (
        "not-exists-public-chain",
        "SELECT day, SUM(amount) FROM people p WHERE NOT EXISTS (SELECT 1 FROM shops s "
        "JOIN zones z ON z.region = s.region WHERE s.shop = p.shop AND z.zone = 'z3') GROUP BY day",
        None,
    ),
    (
        "join-private-on-unit",
        "SELECT p.day, COUNT(*), SUM(a.balance) FROM people p JOIN accounts a ON p.pid = a.pid GROUP BY p.day",
        None,
    ),
    (
        # The third table joins on the second's unit column, equal to the first's after the
        # inner join: a join on the unit (TPC-H's customer ⋈ orders ⋈ lineitem shape).
        "join-private-chain-on-unit",
        "SELECT p.day, COUNT(*), SUM(b.balance) FROM people p JOIN accounts a ON p.pid = a.pid "
        "JOIN accounts b ON a.pid = b.pid GROUP BY p.day",
        None,
    ),
    (
        "cte",
        "WITH t AS (SELECT pid, day, amount * 2 AS a2 FROM people WHERE items > 0) SELECT day, AVG(a2) FROM t GROUP BY day",
        None,
    ),
    (
        "per-unit",
        "SELECT AVG(n), SUM(s) FROM (SELECT pid, COUNT(*) AS n, SUM(amount) AS s FROM people GROUP BY pid) t",
        None,
    ),
    (
        "per-unit-grouped",
        "SELECT n, COUNT(*) FROM (SELECT pid, COUNT(*) AS n FROM people GROUP BY pid) t GROUP BY n",
        None,
    ),
    (
        "date-interval",
        "SELECT day, COUNT(*), SUM(amount) FROM people "
        "WHERE visited < DATE '2021-01-31' + INTERVAL '1' MONTH GROUP BY day",
        None,
    ),
    (
        "substring-keys",
        "SELECT SUBSTRING(day, 1, 1) AS d, COUNT(*), SUM(items) FROM people "
        "WHERE SUBSTRING(shop, 2) <> '0' GROUP BY d",
        None,
    ),
    (
        "bigquery",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, max_groups_contributed = 2) "
        "day, COUNT(*), SUM(items, contribution_bounds_per_group => (0, 20)), AVG(amount) FROM people GROUP BY day",
        None,
    ),
]


@pytest.mark.parametrize(("name", "sql", "delta"), QUERIES, ids=[q[0] for q in QUERIES])
def test_removing_one_unit_respects_the_charged_sensitivity(
    pair: tuple[Session, Session], name: str, sql: str, delta: float | None
) -> None:
    with_unit, without = pair
    for salt in (1, 2**40 + 7, 12345, 2**61 - 1):
        # The same hash key on both sides: the bound holds for each key the engine may draw.
        plan, a = exact_data(with_unit, sql, 1, delta, salt=salt)
        _, b = exact_data(without, sql, 1, delta, salt=salt)
        groups = sorted(set(a.groups) | set(b.groups), key=repr)
        ia = {g: i for i, g in enumerate(a.groups)}
        ib = {g: i for i, g in enumerate(b.groups)}
        for m in plan.measurements:
            if m.kind == "histogram":
                va = np.array(
                    [
                        a.histograms[m.name][ia[g]] if g in ia else 0 * a.histograms[m.name][0]
                        for g in groups
                    ]
                )
                vb = np.array(
                    [
                        b.histograms[m.name][ib[g]] if g in ib else 0 * b.histograms[m.name][0]
                        for g in groups
                    ]
                )
            else:
                va = np.array([a.scalars[m.name][ia[g]] if g in ia else 0 for g in groups])
                vb = np.array([b.scalars[m.name][ib[g]] if g in ib else 0 for g in groups])
            l1 = int(np.abs(va.astype(object) - vb.astype(object)).sum())
            assert l1 <= m.sensitivity_units, (name, m.describe(), l1, m.sensitivity_units)
        if plan.selection is not None:
            # A new group may appear with a count of at most one unit's contribution.
            new = set(a.groups) - set(b.groups)
            sel = a.scalars[plan.selection.measurement]
            assert len(new) <= 2 and all(sel[ia[g]] <= 3 for g in new)


GAUSSIAN = ["count", "avg", "var", "join-public", "join-private-on-unit", "per-unit"]


@pytest.mark.parametrize("name", GAUSSIAN)
def test_removing_one_unit_moves_a_gaussian_measurement_by_at_most_its_l2_sensitivity(
    zcdp_pair: tuple[Session, Session], name: str
) -> None:
    """On a zCDP dataset the measurements get discrete Gaussian noise calibrated to
    ``sensitivity_units`` as an L2 sensitivity: the L2 distance of neighbours stays within it."""
    sql = next(q for n, q, _ in QUERIES if n == name)
    with_unit, without = zcdp_pair
    for salt in (1, 2**40 + 7, 2**61 - 1):
        plan, a = exact_data(with_unit, sql, 1, None, salt=salt)
        _, b = exact_data(without, sql, 1, None, salt=salt)
        assert any(m.gaussian for m in plan.measurements), name
        groups = sorted(set(a.groups) | set(b.groups), key=repr)
        ia = {g: i for i, g in enumerate(a.groups)}
        ib = {g: i for i, g in enumerate(b.groups)}
        for m in plan.measurements:
            if not m.gaussian:
                continue
            va = [int(a.scalars[m.name][ia[g]]) if g in ia else 0 for g in groups]
            vb = [int(b.scalars[m.name][ib[g]]) if g in ib else 0 for g in groups]
            l2_squared = sum((x - y) ** 2 for x, y in zip(va, vb, strict=True))
            assert l2_squared <= m.sensitivity_units**2, (name, m.describe(), l2_squared)
