"""The datasets of the conformance suite, by name, as catalogs over CSV files.

* ``adult`` and ``pums``: the shared data through the fixture catalogs of the SQL conformance
  table (``tests/fixtures``), public lookup tables included.
* ``visits``: a user-level table (privacy unit ``pid``) in which every unit stays within its caps,
  so contribution bounding keeps every row and the answer does not depend on the hash key.
* ``messy``: text that must become numbers, booleans and dates, malformed values included; it is
  loaded into PostgreSQL as ``text`` columns, so PostgreSQL's guarded conversions are compared
  with DuckDB's ``TRY_CAST`` and Spark's guarded casts on the same strings.
* ``odd``: a CSV file with every kind of odd line (mixed line ends, a byte-order mark, a quoted
  line break, too many and too few fields, a NUL byte, bytes that are not UTF-8, a last line
  without a line break): DuckDB and Spark read it and skip the same lines. PostgreSQL reads tables,
  not files (``COPY`` refuses such a file), so it is given the rows DuckDB's reader keeps.
* ``heavy`` and ``light``: ``visits`` with and without one unit far above its caps (for the test
  that bounding holds on every engine).
* ``mixed``: units of every shape for contribution bounding (within the caps in one group or in
  several, over the row cap, over the group cap, NULL and boolean keys).
* ``clinics`` and ``clinics_light``: two private tables joined on a key other than the unit
  (``clinic``, truncated per key before the join), with and without one unit of many rows on
  the hot clinic of both tables; ``clinics_open``: ``clinics`` with no truncation declared
  (elastic sensitivity).
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from dalenius.core.catalog import Catalog, load_catalog

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]

VISITS_TOML = """
[dataset]
name = "{name}"

[tables.visits]
source = {{ csv = "{name}.csv" }}
privacy_unit = {{ column = "pid", max_rows = 3, max_groups = 2 }}

[tables.visits.columns]
pid = {{ type = "int" }}
day = {{ type = "str", keys = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] }}
amount = {{ type = "float", bounds = [0, 100] }}
"""

MESSY_TOML = """
[dataset]
name = "messy"

[tables.t]
source = { csv = "messy.csv" }
privacy_unit = "row"

[tables.t.columns]
n = { type = "int", bounds = [0, 10] }
x = { type = "float", bounds = [0, 2] }
k = { type = "str", keys = ["a", "b"] }
flag = { type = "bool", keys = [false, true] }
d = { type = "date" }
"""

MESSY_TEXT = [
    "5", " 7 ", "+3", "-3", "05", "2.5", "-2.5", "1e1", "1E-3", ".5", "5.", "9223372036854775807",
    "9223372036854775808", "1e309", "-1e309", "1e-400", "nan", "NaN", "+inf", "-Infinity", "",
    "n/a", "1,5", "5e", "e5", "١", "５", "5d", "\t8\n", "0.4999999999999999999999",
]  # fmt: skip
"""Strings every engine must read the same way (DuckDB's extra leniencies are in the executor tests)."""

MESSY_FLAGS = ["true", "f", "YES", "n", "1", "0", "on", " true", "2", ""]
MESSY_DATES = ["2021-02-03", "2020-02-29", "2021-02-30", "2021-2-3", " 2021-12-31 ", "2021-13-01"]
MESSY_DATES += ["0999-01-01", "20210203", "x", ""]


def fixture_catalog(name: str) -> Catalog:
    """``adult`` or ``pums``, from ``tests/fixtures``."""
    return load_catalog(FIXTURES / f"{name}.toml")


def visits_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Visits with one heavy unit (pid 1: 140 rows in 7 days) and without it.

    Every other unit has 2 rows in at most 2 days, within max_rows = 3 and max_groups = 2.
    """
    rng = np.random.Generator(np.random.PCG64(7))  # test data only, never noise
    others = pd.DataFrame(
        {
            "pid": np.arange(2, 402).repeat(2),
            "day": rng.choice(DAYS, 800),
            "amount": rng.uniform(-20, 150, 800).round(3),
        }
    )
    heavy = pd.DataFrame({"pid": 1, "day": np.tile(DAYS, 20), "amount": np.full(140, 1000.0)})
    with_heavy = pd.concat([others, heavy], ignore_index=True).sample(frac=1, random_state=3)
    return with_heavy, others


def write_visits(folder: Path, name: str, frame: pd.DataFrame) -> Catalog:
    """A ``visits`` dataset called ``name`` over ``frame``, written as CSV into ``folder``."""
    frame.to_csv(folder / f"{name}.csv", index=False)
    (folder / f"{name}.toml").write_text(VISITS_TOML.format(name=name))
    return load_catalog(folder / f"{name}.toml")


MIXED_TOML = """
[dataset]
name = "mixed"

[tables.mixed]
source = { csv = "mixed.csv" }
privacy_unit = { column = "pid", max_rows = 3, max_groups = 2 }

[tables.mixed.columns]
pid = { type = "int" }
day = { type = "str", keys = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] }
flag = { type = "bool", keys = [false, true] }
code = { type = "str" }
amount = { type = "float", bounds = [0, 100] }
"""


def write_mixed(folder: Path, name: str = "mixed") -> Catalog:
    """The ``mixed`` dataset: 600 units with 1 to 6 rows over 1 to 4 days, some keys NULL.

    ``name = "many"`` writes the same rows with caps of 6 rows in 6 groups per unit (every unit
    within them, so every engine keeps every row), and a GROUP BY without public keys uses
    weighted selection (units by degree, one to six groups).
    """
    rng = np.random.Generator(np.random.PCG64(5))  # test data only, never noise
    rows = []
    for pid in range(1, 601):
        days = rng.choice(DAYS, size=int(rng.integers(1, 5)), replace=False)
        for _ in range(int(rng.integers(1, 7))):
            code = None if rng.random() < 0.2 else f"c{int(rng.integers(0, 4))}"
            flag = None if rng.random() < 0.1 else bool(rng.random() < 0.5)
            rows.append([pid, rng.choice(days), flag, code, round(float(rng.uniform(-20, 150)), 2)])
    frame = pd.DataFrame(rows, columns=["pid", "day", "flag", "code", "amount"])
    frame.sample(frac=1, random_state=9).to_csv(folder / f"{name}.csv", index=False)
    toml = MIXED_TOML
    if name != "mixed":
        toml = toml.replace('name = "mixed"', f'name = "{name}"')
        toml = toml.replace('csv = "mixed.csv"', f'csv = "{name}.csv"')
        toml = toml.replace("max_rows = 3, max_groups = 2", "max_rows = 6, max_groups = 6")
    (folder / f"{name}.toml").write_text(toml)
    return load_catalog(folder / f"{name}.toml")


def write_messy(folder: Path) -> Catalog:
    """The ``messy`` dataset: every grammar string in every typed column, with keys and flags."""
    rows = []
    for i, text in enumerate(MESSY_TEXT):
        rows.append(
            [
                text,
                text,
                ["a", "b", "", "c"][i % 4],
                MESSY_FLAGS[i % len(MESSY_FLAGS)],
                MESSY_DATES[i % len(MESSY_DATES)],
            ]
        )
    with (folder / "messy.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["n", "x", "k", "flag", "d"])
        writer.writerows(rows)
    (folder / "messy.toml").write_text(MESSY_TOML)
    return load_catalog(folder / "messy.toml")


ODD_TOML = """
[dataset]
name = "odd"

[tables.t]
source = { csv = "odd.csv" }
privacy_unit = "row"

[tables.t.columns]
n = { type = "int", bounds = [0, 100] }
k = { type = "str", keys = ["a", "b"] }
note = "str"
"""

ODD_LINES = [
    b"\xef\xbb\xbfn,k,note\r\n",
    b"1,a,plain\r\n",
    b'2,b,"line\r\nbreak"\r\n',
    b"3,a,lf line\n",
    b"4,b,too,many\r\n",
    b"5,a\r\n",
    b"6,b,nul\x00byte\r\n",
    b"7,a,bad \xff utf8\r\n",
    b'8,b,"quoted, comma"\n',
    b"9,a,\r\n",
    b"10,b,no line break",
]
"""Odd lines; those of n = 4, 5, 6 and 7 are skipped, the rest read."""


def write_odd(folder: Path) -> Catalog:
    """The ``odd`` dataset (see the module notes)."""
    (folder / "odd.csv").write_bytes(b"".join(ODD_LINES))
    (folder / "odd.toml").write_text(ODD_TOML)
    return load_catalog(folder / "odd.toml")


def readable_rows(catalog: Catalog, folder: Path) -> Catalog:
    """``catalog`` (one CSV table) over a clean CSV file of the rows DuckDB's reader keeps: what a
    custodian loads into PostgreSQL, whose ``COPY`` would refuse the odd file."""
    import duckdb

    from dalenius.core.dialect import DUCKDB
    from dalenius.executors.csv_text import SKIP, csv_header, duckdb_reader, skip_reason

    (table,) = catalog.tables
    header = csv_header(table)
    reason = skip_reason(DUCKDB, header, lambda v, t: f"contains({v}, {t})")
    columns = ", ".join(DUCKDB.quote(name) for name in header)
    clean = folder / f"{catalog.name}_readable.csv"
    with duckdb.connect() as con:
        con.execute(
            f"COPY (SELECT {columns} FROM (SELECT *, {reason} AS {SKIP} FROM "
            f"{duckdb_reader(table.source.location, header)}) WHERE {SKIP} IS NULL) "
            f"TO '{clean}' (HEADER)"
        )
    source = replace(table.source, location=str(clean))
    return replace(catalog, tables=(replace(table, source=source),))


def shuffled_adult(folder: Path) -> Catalog:
    """``adult`` with its rows in another order (same bytes per row)."""
    source = FIXTURES.parent.parent.parent / "shared" / "data" / "adult.csv"
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    header, body = lines[0], lines[1:]
    order = np.random.Generator(np.random.PCG64(11)).permutation(len(body))  # test data only
    (folder / "adult_shuffled.csv").write_text(header + "".join(body[i] for i in order))
    text = (FIXTURES / "adult.toml").read_text()
    text = text.replace('name = "adult"', 'name = "adult_shuffled"')
    text = text.replace("../../../shared/data/adult.csv", str(folder / "adult_shuffled.csv"))
    text = text.replace('"edu_levels.csv"', f'"{FIXTURES / "edu_levels.csv"}"')
    (folder / "adult_shuffled.toml").write_text(text)
    return load_catalog(folder / "adult_shuffled.toml")


CLINICS_TOML = """
[dataset]
name = "{name}"

[tables.visits]
source = {{ csv = "{name}_visits.csv" }}
privacy_unit = {{ column = "pid", max_rows = 3 }}

[tables.visits.columns]
pid = {{ type = "int" }}
clinic = {{ type = "str", join_rows_per_key = 5 }}
cost = {{ type = "float", bounds = [0, 50] }}

[tables.staff]
source = {{ csv = "{name}_staff.csv" }}
privacy_unit = {{ column = "pid", max_rows = 2 }}

[tables.staff.columns]
pid = {{ type = "int" }}
clinic = {{ type = "str", join_rows_per_key = 3 }}
role = {{ type = "str", keys = ["nurse", "doctor"] }}
"""


def write_clinics(folder: Path) -> tuple[Catalog, Catalog, Catalog]:
    """``clinics`` (with unit 1: 40 visits and 10 staff rows on clinic ``c6``, where two other
    visits and one other staff row are) and ``clinics_light`` (without it): 300 people over 7
    clinics, half the rows on ``c0`` (over its cap of rows per key on both sides), costs with
    repeats (rows that tie in the hash order on every column but the unit).
    """
    rng = np.random.Generator(np.random.PCG64(11))  # test data only, never noise
    clinics = np.where(rng.random(600) < 0.5, "c0", rng.choice(["c1", "c2", "c3", "c4", "c5"], 600))
    visits = pd.DataFrame(
        {
            "pid": rng.integers(2, 302, 600),
            "clinic": clinics,
            "cost": rng.choice([5.25, 12.5, 40.0, 75.0], 600),
        }
    )
    staff = pd.DataFrame(
        {
            "pid": rng.integers(2, 302, 120),
            "clinic": clinics[:120],
            "role": rng.choice(["nurse", "doctor"], 120),
        }
    )
    heavy_visits = pd.DataFrame({"pid": 1, "clinic": "c6", "cost": np.full(40, 30.0)})
    heavy_staff = pd.DataFrame({"pid": 1, "clinic": "c6", "role": ["nurse", "doctor"] * 5})
    visits.loc[:1, "clinic"] = "c6"
    staff.loc[:0, "clinic"] = "c6"
    out = []
    for name, extra in (("clinics", True), ("clinics_light", False)):
        v = pd.concat([visits, heavy_visits]) if extra else visits
        st = pd.concat([staff, heavy_staff]) if extra else staff
        v.sample(frac=1, random_state=4).to_csv(folder / f"{name}_visits.csv", index=False)
        st.sample(frac=1, random_state=5).to_csv(folder / f"{name}_staff.csv", index=False)
        (folder / f"{name}.toml").write_text(CLINICS_TOML.format(name=name))
        out.append(load_catalog(folder / f"{name}.toml"))
    # The same rows with no truncation declared: counts over the join use elastic sensitivity.
    undeclared = CLINICS_TOML.replace(", join_rows_per_key = 5", "").replace(
        ", join_rows_per_key = 3", ""
    )
    (folder / "clinics_open.toml").write_text(
        undeclared.format(name="clinics_open").replace("clinics_open_", "clinics_")
    )
    out.append(load_catalog(folder / "clinics_open.toml"))
    return out[0], out[1], out[2]


SHOP_TOML = """
[dataset]
name = "shop"

[tables.orders]
source = {{ csv = "{folder}/shop_orders.csv" }}
privacy_unit = {{ column = "pid", max_rows = {max_rows} }}

[tables.orders.columns]
pid = {{ type = "int" }}
suppkey = {{ type = "int" }}
amount = {{ type = "float", bounds = [0, 100] }}

[tables.supplier]
source = {{ csv = "{folder}/shop_supplier.csv" }}
public = true

[tables.supplier.columns]
s_suppkey = {{ type = "int" }}
s_name = {{ type = "str" }}
"""


def write_shop(folder: Path) -> Catalog:
    """``shop``: 200 people with 1 to 9 orders over suppliers 1 to 11 (many over the cap of 4
    rows; supplier 11 is not in the public table), and the public ``supplier`` table, whose values
    are the GROUP BY keys of its columns (supplier 5 has no name, 12 and 13 no orders).
    """
    rng = np.random.Generator(np.random.PCG64(13))  # test data only, never noise
    counts = rng.integers(1, 10, 200)
    orders = pd.DataFrame(
        {
            "pid": np.arange(1, 201).repeat(counts),
            "suppkey": rng.integers(1, 12, int(counts.sum())),  # 11 is not a supplier
            "amount": rng.choice([3.5, 20.0, 64.25, 120.0], int(counts.sum())),
        }
    )
    orders.sample(frac=1, random_state=2).to_csv(folder / "shop_orders.csv", index=False)
    keys = [*range(1, 11), 12, 13]
    names = [f"s{k}" for k in keys]
    names[4] = ""  # read as NULL
    pd.DataFrame({"s_suppkey": keys, "s_name": names}).to_csv(
        folder / "shop_supplier.csv", index=False
    )
    (folder / "shop.toml").write_text(SHOP_TOML.format(folder=folder, max_rows=4))
    return load_catalog(folder / "shop.toml")


SALES_TOML = """
[dataset]
name = "sales"

[tables.orders]
source = {{ csv = "{folder}/sales_orders.csv" }}
privacy_unit = {{ column = "o_custkey", max_rows = 3 }}

[tables.orders.columns]
o_orderkey = {{ type = "int" }}
o_custkey = {{ type = "int" }}
o_priority = {{ type = "str", keys = ["high", "low"] }}

[tables.lines]
source = {{ csv = "{folder}/sales_lines.csv" }}
privacy_unit = {{ column = "l_custkey", max_rows = 6, max_groups = 2, through = {{ column = "l_orderkey", table = "orders", key = "o_orderkey" }} }}

[tables.lines.columns]
l_orderkey = {{ type = "int" }}
l_quantity = {{ type = "int", bounds = [0, 40] }}
l_price = {{ type = "float", bounds = [0, 500] }}
l_flag = {{ type = "str", keys = ["A", "N", "R"] }}
"""


def sales_frames(seed: int = 29) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``orders`` of 60 customers (1 to 6 each, one key shared by two customers, two orders
    without a customer) and their ``lines`` (0 to 8 per order, some pointing at no order).
    """
    rng = np.random.Generator(np.random.PCG64(seed))  # test data only, never noise
    counts = rng.integers(1, 7, 60)
    customers = np.arange(1, 61).repeat(counts).astype(float)
    customers[[3, 40]] = np.nan  # orders without a customer: their lines reach no unit
    keys = np.arange(1, len(customers) + 1)
    keys[10] = keys[11]  # one order key held by two customers: its lines reach both
    orders = pd.DataFrame(
        {
            "o_orderkey": keys,
            "o_custkey": pd.array(customers, dtype="Int64"),
            "o_priority": rng.choice(["high", "low"], len(keys)),
        }
    )
    per_order = rng.integers(0, 9, len(keys))
    line_keys = np.concatenate([keys.repeat(per_order), [9_001, 9_002, 9_002]])
    lines = pd.DataFrame(
        {
            "l_orderkey": line_keys,
            "l_quantity": rng.integers(1, 50, len(line_keys)),
            "l_price": rng.choice([12.5, 99.0, 250.25, 640.0], len(line_keys)),
            "l_flag": rng.choice(["A", "N", "R"], len(line_keys)),
        }
    )
    return orders, lines.sample(frac=1, random_state=3).reset_index(drop=True)


def write_sales(
    folder: Path, orders: pd.DataFrame | None = None, order_key: bool = False
) -> Catalog:
    """``sales``: orders with the customer as the unit, and lines that reach it through their
    order's key (``privacy_unit.through``); ``orders`` replaces the generated orders. With
    ``order_key``, ``o_orderkey`` is declared ``join_rows_per_key = 1`` (an order key: a join
    that equates it beside the customer supplies the lines' customer itself), in ``folder``'s
    ``keyed`` subfolder.
    """
    if order_key:
        folder = folder / "keyed"
        folder.mkdir(exist_ok=True)
    generated, lines = sales_frames()
    (orders if orders is not None else generated).to_csv(folder / "sales_orders.csv", index=False)
    lines.to_csv(folder / "sales_lines.csv", index=False)
    text = SALES_TOML.format(folder=folder)
    if order_key:
        text = text.replace(
            'o_orderkey = { type = "int" }', 'o_orderkey = { type = "int", join_rows_per_key = 1 }'
        )
    (folder / "sales.toml").write_text(text)
    return load_catalog(folder / "sales.toml")
