"""A unit reached through another table's key (``privacy_unit.through``, docs/catalog.md).

``lines`` stores no customer: each line belongs to the customer of the order its ``l_orderkey``
names, joined in by the engine. The answers are those of the same lines with the customer
stored beside them; removing one customer's orders (and nothing from ``lines``) moves every
measurement by at most the sensitivity charged, since the customer's lines then reach no unit;
a catalog that cannot be joined this way is refused before any data is read.
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
from tests.conformance import datasets
from tests.support.exact import exact_units_for, neighbour_moves

from dalenius.core.catalog import Catalog, load_catalog, parse_catalog
from dalenius.core.errors import CatalogError
from dalenius.core.loss import PureDP
from dalenius.engine.profile import profile_catalog
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger
from dalenius.server.describe import table_json

QUERIES = [
    "SELECT COUNT(*), SUM(l_quantity) FROM lines",
    "SELECT l_flag, COUNT(*), AVG(l_price) FROM lines GROUP BY l_flag",
    "SELECT o_priority, COUNT(*), SUM(l_quantity) FROM lines "
    "JOIN orders ON l_orderkey = o_orderkey AND l_custkey = o_custkey GROUP BY o_priority",
]
THROUGH = ', through = { column = "l_orderkey", table = "orders", key = "o_orderkey" }'
ORDER_KEY = 'o_orderkey = { type = "int", join_rows_per_key = 1 }'


def _session(folder: Path, orders: pd.DataFrame | None = None) -> Session:
    folder.mkdir(parents=True, exist_ok=True)
    catalog = datasets.write_sales(folder, orders)
    return Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))


def _stored(folder: Path, order_key: bool = False) -> Session:
    """The same lines with their customers stored: one line per order row its key matches
    (``order_key``: ``o_orderkey`` declared ``join_rows_per_key = 1``)."""
    folder.mkdir(parents=True)
    orders, lines = datasets.sales_frames()
    joined = lines.merge(
        orders[["o_orderkey", "o_custkey"]], left_on="l_orderkey", right_on="o_orderkey", how="left"
    ).drop(columns="o_orderkey")
    orders.to_csv(folder / "sales_orders.csv", index=False)
    joined.rename(columns={"o_custkey": "l_custkey"}).to_csv(
        folder / "sales_lines.csv", index=False
    )
    text = datasets.SALES_TOML.format(folder=folder).replace(THROUGH, "")
    if order_key:
        text = text.replace('o_orderkey = { type = "int" }', ORDER_KEY)
    (folder / "sales.toml").write_text(text + 'l_custkey = { type = "int" }\n')
    catalog = load_catalog(folder / "sales.toml")
    return Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))


def test_the_answers_are_those_of_the_customer_stored_beside_each_line(tmp_path: Path) -> None:
    reached, stored = _session(tmp_path / "reached"), _stored(tmp_path / "stored")
    for sql in QUERIES:
        for salt in (5, 1_000_003):
            assert exact_units_for(reached, sql, salt=salt) == exact_units_for(
                stored, sql, salt=salt
            ), (sql, salt)
    # Lines of a key no order holds reach no unit and are left out; a key held by two
    # customers' orders counts its lines once for each.
    count = reached.executor.fetch("SELECT COUNT(*), COUNT(l_custkey) FROM lines")[0]
    orders, lines = datasets.sales_frames()
    assert count[0] == len(
        lines.merge(orders, left_on="l_orderkey", right_on="o_orderkey", how="left")
    )
    assert count[1] == count[0] - int((~lines.l_orderkey.isin(orders.o_orderkey)).sum()) - int(
        lines.l_orderkey.isin(orders.o_orderkey[orders.o_custkey.isna()]).sum()
    )


def test_removing_a_customer_s_orders_moves_each_measurement_by_at_most_its_sensitivity(
    tmp_path: Path,
) -> None:
    orders, _ = datasets.sales_frames()
    full = _session(tmp_path / "full")
    moved = 0
    customers = sorted(int(c) for c in orders.o_custkey.dropna().unique())
    for customer in customers[::4]:
        without = _session(tmp_path / f"without-{customer}", orders[orders.o_custkey != customer])
        for sql in QUERIES:
            for salt in (5, 1_000_003):
                moved = max(moved, neighbour_moves(full, without, sql, salt=salt))
        without.close()
    # The customers' lines do move the answers: removing one moves a count by up to its cap.
    assert moved >= 6


def test_explain_names_the_key_the_unit_is_reached_through(tmp_path: Path) -> None:
    text = str(_session(tmp_path / "s").explain(QUERIES[0], 1))
    assert "each l_custkey of lines, reached through l_orderkey = orders.o_orderkey" in text


def test_a_change_to_the_referenced_table_is_a_new_data_version(tmp_path: Path) -> None:
    """Which customer a line belongs to is read from ``orders``: a changed ``orders`` file makes
    the same question a new request (charged again), not a repeat of the recorded answer.
    """
    session = _session(tmp_path / "s")
    session.ledger.set_budget("analyst", session.catalog.name, PureDP(Fraction(10)))
    first = session.query(QUERIES[0], 1)
    assert session.query(QUERIES[0], 1).cached
    path = tmp_path / "s" / "sales_orders.csv"
    path.write_text(path.read_text() + "999,7,low\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    again = session.query(QUERIES[0], 1)
    assert not again.cached and not first.cached


BASE = """
[tables.orders]
source = {{ csv = "o.csv" }}
privacy_unit = {orders_unit}
public = {public}
[tables.orders.columns]
o_orderkey = {{ type = "{key_type}" }}
o_custkey = {{ type = "int" }}

[tables.lines]
source = {{ csv = "l.csv" }}
privacy_unit = {lines_unit}
[tables.lines.columns]
l_orderkey = {{ type = "int" }}
l_custkey_stored = {{ type = "int" }}
"""
GOOD_LINES = (
    '{ column = "l_custkey", max_rows = 5, through = { column = "l_orderkey", '
    'table = "orders", key = "o_orderkey" } }'
)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """A folder holding the two CSV files the catalogs below name."""
    (tmp_path / "o.csv").write_text("o_orderkey,o_custkey\n1,1\n")
    (tmp_path / "l.csv").write_text("l_orderkey,l_custkey_stored\n1,1\n")
    return tmp_path


def _catalog(**changes: str) -> str:
    values = {
        "orders_unit": '{ column = "o_custkey", max_rows = 2 }',
        "public": "false",
        "key_type": "int",
        "lines_unit": GOOD_LINES,
    }
    return BASE.format(**{**values, **changes})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"lines_unit": GOOD_LINES.replace('"l_orderkey"', '"l_nokey"')},
            "is not a declared column",
        ),
        (
            {"lines_unit": GOOD_LINES.replace('"l_custkey"', '"l_custkey_stored"')},
            "must be a new name",
        ),
        ({"lines_unit": GOOD_LINES.replace('"orders"', '"shipments"')}, "is not another table"),
        ({"lines_unit": GOOD_LINES.replace('"orders"', '"lines"')}, "is not another table"),
        ({"lines_unit": GOOD_LINES.replace('"o_orderkey"', '"o_nokey"')}, "has no such column"),
        ({"key_type": "str"}, "is str, not int"),
        ({"orders_unit": '"row"'}, "must be a private table whose privacy_unit is a column"),
        ({"public": "true", "orders_unit": '"row"'}, "must be a private table"),
        (
            {"lines_unit": GOOD_LINES.replace(', key = "o_orderkey"', "")},
            "with column, table and key",
        ),
        ({"lines_unit": GOOD_LINES.replace('"o_orderkey"', '"o-key"')}, "plain SQL identifiers"),
    ],
)
def test_a_catalog_that_cannot_join_the_unit_is_refused_with_a_fix(
    files: Path, changes: dict[str, str], message: str
) -> None:
    with pytest.raises(CatalogError) as caught:
        parse_catalog(_catalog(**changes), base_dir=files)
    assert message in str(caught.value)
    assert caught.value.table == "lines"
    assert caught.value.fix


def test_the_checked_catalog_adds_the_unit_column_of_the_referenced_type(files: Path) -> None:
    catalog = parse_catalog(_catalog(), base_dir=files)
    lines = catalog.table("lines")
    assert lines is not None and lines.reach is not None
    assert lines.column_names == ("l_orderkey", "l_custkey_stored", "l_custkey")
    assert [c.name for c in lines.stored_columns] == ["l_orderkey", "l_custkey_stored"]
    assert lines.reach.unit == "o_custkey"


def test_constant_time_mode_refuses_a_reached_unit(files: Path) -> None:
    text = "[dataset]\nconstant_time = true\n" + _catalog().replace(
        "[tables.lines]\n", "[tables.lines]\nmax_row_count = 10\n"
    ).replace("[tables.orders]\n", "[tables.orders]\nmax_row_count = 10\n")
    with pytest.raises(CatalogError, match="constant_time does not support"):
        parse_catalog(text, base_dir=files)


def test_the_custodian_s_check_counts_the_stored_rows_and_names_what_reaches_no_unit(
    tmp_path: Path,
) -> None:
    session = _session(tmp_path / "s")
    (_, lines) = profile_catalog(session.catalog)
    orders, stored = datasets.sales_frames()
    assert all(not c.unreadable for c in lines.columns)  # counted over the stored rows
    assert lines.unit is not None
    assert lines.unit["stored_rows"] == len(stored)
    shared = orders.o_orderkey[orders.o_orderkey.duplicated()]
    assert lines.unit["repeated_rows"] == int(stored.l_orderkey.isin(shared).sum())
    text = "\n".join(lines.findings)
    assert "reach no unit through l_orderkey = orders.o_orderkey" in text
    assert "gives its rows once to each of their units" in text


def test_a_catalog_built_in_python_reaches_the_unit_of_in_memory_frames(tmp_path: Path) -> None:
    orders, lines = datasets.sales_frames()
    catalog = Catalog.from_dict(
        {
            "tables": {
                "orders": {
                    "source": orders,
                    "privacy_unit": {"column": "o_custkey", "max_rows": 3},
                    "columns": {"o_orderkey": "int", "o_custkey": "int"},
                },
                "lines": {
                    "source": lines,
                    "privacy_unit": {
                        "column": "l_custkey",
                        "max_rows": 6,
                        "max_groups": 2,
                        "through": {"column": "l_orderkey", "table": "orders", "key": "o_orderkey"},
                    },
                    "columns": {
                        "l_orderkey": "int",
                        "l_quantity": {"type": "int", "bounds": [0, 40]},
                        "l_flag": {"type": "str", "keys": ["A", "N", "R"]},
                    },
                },
            }
        }
    )
    frames = Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))
    files = _session(tmp_path / "files")
    sql = "SELECT l_flag, COUNT(*), SUM(l_quantity) FROM lines GROUP BY l_flag"
    assert exact_units_for(frames, sql, salt=9) == exact_units_for(files, sql, salt=9)
    info = table_json(catalog.tables[1], {})["privacy_unit"]
    assert info["through"] == "l_orderkey = orders.o_orderkey"


JOINED = (
    "SELECT o_priority, COUNT(*), SUM(l_quantity) FROM lines "
    "JOIN orders ON l_orderkey = o_orderkey AND l_custkey = o_custkey GROUP BY o_priority"
)


EXISTS = (
    "SELECT o_priority, COUNT(*) FROM orders WHERE EXISTS (SELECT * FROM lines "
    "WHERE l_orderkey = o_orderkey AND l_custkey = o_custkey AND l_quantity > 20) "
    "GROUP BY o_priority"
)


def _keyed(folder: Path, orders: pd.DataFrame | None = None, per_key: str = "1") -> Session:
    """The sales session with ``o_orderkey`` declared ``join_rows_per_key`` (an order key)."""
    session = _session(folder, orders)
    session.close()
    path = folder / "sales.toml"
    text = path.read_text().replace(
        'o_orderkey = { type = "int" }', ORDER_KEY.replace("1", per_key)
    )
    path.write_text(text)
    catalog = load_catalog(path)
    return Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))


def test_a_key_declared_beside_the_unit_caps_the_joined_rows_at_r_times_tau(
    tmp_path: Path,
) -> None:
    """Lines (6 per customer) join orders (3 per customer) on the customer and the order key:
    with ``o_orderkey`` at most 1 row per key a line meets one order, so 6 joined rows, not 18.
    """
    assert _session(tmp_path / "plain").prepare(JOINED, 1).plan.bounding.max_rows == 18
    keyed = _keyed(tmp_path / "keyed")
    assert keyed.prepare(JOINED, 1).plan.bounding.max_rows == 6
    assert _keyed(tmp_path / "two", per_key="2").prepare(JOINED, 1).plan.bounding.max_rows == 12
    text = str(keyed.explain(JOINED, 1))
    assert (
        "on l_orderkey = o_orderkey, at most 1 per o_orderkey (at most 6 joined rows each)" in text
    )


def test_removing_a_customer_moves_the_keyed_join_by_at_most_its_sensitivity(
    tmp_path: Path,
) -> None:
    orders, _ = datasets.sales_frames()
    full = _keyed(tmp_path / "full")
    sensitivity = full.prepare(JOINED, 1).plan.measurements[0].sensitivity_units
    assert sensitivity == 6
    moved = 0
    for customer in sorted(int(c) for c in orders.o_custkey.dropna().unique())[::3]:
        without = _keyed(tmp_path / f"without-{customer}", orders[orders.o_custkey != customer])
        for salt in (5, 1_000_003):
            neighbour_moves(full, without, JOINED, salt=salt)  # every measurement within
            neighbour_moves(full, without, EXISTS, salt=salt)
            counts = (exact_units_for(s, JOINED, salt=salt)["m0"] for s in (full, without))
            moved = max(moved, sum(abs(a - b) for a, b in zip(*counts, strict=True)))
        without.close()
    # Customers hold up to 35 lines: without the cap after the join a count would move by more.
    assert moved == 6


def test_rows_another_private_table_repeats_on_the_key_s_side_raise_its_cap(
    tmp_path: Path,
) -> None:
    """``orders ⋈ notes`` on the customer repeats each order up to 2 times (2 notes per
    customer), so a line meets up to 2 rows of that order key: 6 lines × 2, not 6 × 1.
    """
    session = _keyed(tmp_path / "s")
    session.close()
    folder = tmp_path / "s"
    (folder / "notes.csv").write_text("n_custkey,n_text\n1,a\n1,b\n2,c\n")
    path = folder / "sales.toml"
    path.write_text(
        path.read_text()
        + '\n[tables.notes]\nsource = { csv = "notes.csv" }\n'
        + 'privacy_unit = { column = "n_custkey", max_rows = 2 }\n'
        + '[tables.notes.columns]\nn_custkey = { type = "int" }\nn_text = { type = "str" }\n'
    )
    catalog = load_catalog(path)
    notes = Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))
    sql = (
        "SELECT COUNT(*) FROM orders JOIN notes ON o_custkey = n_custkey "
        "JOIN lines ON l_orderkey = o_orderkey AND l_custkey = o_custkey"
    )
    assert notes.prepare(sql, 1).plan.bounding.max_rows == 6 * 2


SUPPLIED = [
    JOINED,
    "SELECT l_flag, COUNT(*), AVG(l_price) FROM orders "
    "JOIN lines ON o_custkey = l_custkey AND o_orderkey = l_orderkey "
    "WHERE o_priority = 'high' GROUP BY l_flag",
    "SELECT COUNT(*) FROM orders AS a JOIN lines ON l_custkey = a.o_custkey "
    "AND l_orderkey = a.o_orderkey JOIN orders AS b ON b.o_custkey = l_custkey",
    EXISTS,
    "SELECT COUNT(*) FROM orders WHERE NOT EXISTS (SELECT 1 FROM lines "
    "WHERE o_custkey = l_custkey AND o_orderkey = l_orderkey AND l_flag = 'R')",
]


def test_a_join_on_the_order_key_takes_each_line_s_customer_from_its_order(
    tmp_path: Path,
) -> None:
    """With the order key declared, a join equating it beside the customer reads the lines as
    stored and takes each line's customer from the order it joins (one join of ``orders``, not
    two): the exact cells are those of the customer stored beside each line, for two hash keys,
    on data with a key held by two customers, lines that reach no order and orders without one.
    """
    keyed, stored = _keyed(tmp_path / "keyed"), _stored(tmp_path / "stored", order_key=True)
    for sql in SUPPLIED:
        main = keyed.prepare(sql, 1).exact.main
        assert '"__stored_lines"' in main and 'FROM "lines"' not in main, sql
        for salt in (5, 1_000_003):
            assert exact_units_for(keyed, sql, salt=salt) == exact_units_for(
                stored, sql, salt=salt
            ), (sql, salt)
    assert "each row's reached unit taken from the row it joins" in str(keyed.explain(JOINED, 1))


def test_a_join_that_cannot_supply_the_customer_reads_the_lines_with_theirs(
    tmp_path: Path,
) -> None:
    """Without the declaration, without the key equated in the ON condition or with a LEFT
    JOIN, each line's customer comes from the engine's own join of ``orders``, as before; an
    EXISTS correlated on both needs no declaration (it only asks whether a line exists)."""
    keyed = _keyed(tmp_path / "keyed")
    for session, sql in (
        (_session(tmp_path / "plain"), JOINED),
        (keyed, "SELECT COUNT(*) FROM lines JOIN orders ON l_custkey = o_custkey"),
        (keyed, "SELECT COUNT(*) FROM lines LEFT JOIN orders ON l_custkey = o_custkey"),
    ):
        assert '"__stored_lines"' not in session.prepare(sql, 1).exact.main, sql
    exists = _session(tmp_path / "exists")
    assert '"__stored_lines"' in exists.prepare(SUPPLIED[3], 1).exact.main
    for sql in (
        "SELECT COUNT(*) FROM orders WHERE EXISTS (SELECT 1 FROM lines WHERE l_custkey = o_custkey)",
        "SELECT COUNT(*) FROM orders WHERE EXISTS (SELECT 1 FROM lines WHERE l_custkey = o_custkey "
        "AND l_orderkey = o_orderkey AND l_custkey > 3)",
    ):
        assert '"__stored_lines"' not in exists.prepare(sql, 1).exact.main, sql
