"""TPC-H under a person-level unit: the 22 questions, asked in aggregate form, privately.

Run ``.venv/bin/python bench/tpch.py --scale 0.1 1`` (see ``docs/engines.md``). For each scale
factor it generates the eight tables once with ``tpchgen-cli`` (PyPI; ``pip install
'dalenius[bench]'``) into Parquet under
``--data`` (default ``~/.cache/dalenius-tpch``, outside the repository), with a progress line per
step, and writes a catalog in which ``customer`` is the privacy unit:

* ``customer`` (one row per customer), ``orders`` (its ``o_custkey``, at most ``--orders`` per
  customer) and ``lineitem`` (at most ``--lines`` per customer) are private. The generator writes
  ``lineitem`` with its order's customer beside it (``l_custkey``, from ``orders``), and the
  catalog makes that column the unit; with ``--unit-through-orders`` the catalog instead declares
  that a line reaches its customer through its order (``privacy_unit.through``: ``l_orderkey`` →
  ``orders.o_orderkey``), and Dalenius joins the customer in from ``orders`` (the written column
  is then read by the raw queries only);
* ``nation``, ``region``, ``part``, ``supplier`` and ``partsupp`` are public.

Each of the 22 queries is written as the question it asks in aggregate form (a query that lists
rows becomes the aggregate over them: a count, a total, the groups' sums), with explicit ``JOIN``
clauses and the specification's own date arithmetic (``DATE '1993-07-01' + INTERVAL '3' MONTH``).
A subquery over a private table that TPC-H correlates on the order (Q4, Q21) also correlates on
the customer (``AND l_custkey = o_custkey``), which every line of an order satisfies: the answer
is the same, and the question is then one about each customer's own lines. Q18's per-order totals
are likewise grouped by customer and order and correlated on both. Q2, Q11 and Q16 read public
tables alone and are asked as the specification writes them (answered exactly and free). For each it prints
whether Dalenius answers it (and, if not, the first line of the refusal), the median relative
error of its released values against the exact answer at ``--epsilon``, and its time beside raw
DuckDB running the same SQL on the same files (medians of ``--repeats`` runs after a warm-up; no
answer comes from the ledger's cache). With ``--unit-through-orders`` on DuckDB it also times the
same SQL in raw DuckDB with ``lineitem`` defined as the declaration defines it (each line's
customer joined in from ``orders``): what the declaration itself costs a query that reads
``lineitem`` without joining ``orders``.

This is a benchmark, not a test: it prints one table per scale factor and asserts nothing.
"""

from __future__ import annotations

import argparse
import decimal
import math
import numbers
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import DaleniusError, PublicAnswer
from dalenius.core.loss import ApproxDP
from dalenius.engine.session import Session
from dalenius.executors.factory import executor_for
from dalenius.ledger import open_ledger
from dalenius.plan.protocol import ReleasePlan

TABLES = ("customer", "orders", "lineitem", "nation", "region", "part", "supplier", "partsupp")
MKTSEGMENTS = ["AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"]
PRIORITIES = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"]
SHIPMODES = ["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"]
NATIONS = [
    "ALGERIA", "ARGENTINA", "BRAZIL", "CANADA", "EGYPT", "ETHIOPIA", "FRANCE", "GERMANY", "INDIA",
    "INDONESIA", "IRAN", "IRAQ", "JAPAN", "JORDAN", "KENYA", "MOROCCO", "MOZAMBIQUE", "PERU",
    "CHINA", "ROMANIA", "SAUDI ARABIA", "VIETNAM", "RUSSIA", "UNITED KINGDOM", "UNITED STATES",
]  # fmt: skip
REGIONS = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]
INSTRUCTIONS = ["COLLECT COD", "DELIVER IN PERSON", "NONE", "TAKE BACK RETURN"]


def catalog_text(
    folder: Path,
    orders: int,
    lines: int,
    engine: str = "duckdb",
    schema: str = "",
    through: bool = False,
) -> str:
    """The catalog: customer the unit of the three private tables, the rest public, computed by
    ``engine`` (PostgreSQL reads the tables :func:`load_postgres` made in ``schema``). With
    ``through``, ``lineitem`` reaches its customer through ``l_orderkey`` → ``orders`` (the
    written ``l_custkey`` column is not declared, and the engine joins the customer in).

    Bounds and key lists are the TPC-H specification's (clause 4.2.3), public by definition;
    ``o_orderkey`` is the orders' primary key (clause 1.4.2), declared ``join_rows_per_key = 1``:
    a line joined with its order on the customer and the order key meets one order, so the
    joined customer keeps at most ``--lines`` rows rather than ``--lines`` × ``--orders``.
    """

    def keys(values: list[str]) -> str:
        return "[" + ", ".join(f'"{v}"' for v in values) + "]"

    def source(name: str) -> str:
        if engine == "postgres":
            return f'{{ postgres = "{POSTGRES_URL}", table = "{schema}.{name}" }}'
        return f'{{ parquet = "{folder / (name + ".parquet")}" }}'

    reach = (
        ', through = { column = "l_orderkey", table = "orders", key = "o_orderkey" }'
        if through
        else ""
    )
    stored = "" if through else 'l_custkey = "int"\n'
    public = ""
    for name, columns in {
        "nation": (
            f'n_nationkey = "int"\nn_name = {{ type = "str", keys = {keys(NATIONS)} }}\n'
            'n_regionkey = "int"\nn_comment = "str"'
        ),
        "region": (
            f'r_regionkey = "int"\nr_name = {{ type = "str", keys = {keys(REGIONS)} }}\n'
            'r_comment = "str"'
        ),
        "part": (
            'p_partkey = "int"\np_name = "str"\np_mfgr = "str"\np_brand = "str"\np_type = "str"\n'
            'p_size = "int"\np_container = "str"\np_retailprice = "float"\np_comment = "str"'
        ),
        "supplier": (
            's_suppkey = "int"\ns_name = "str"\ns_address = "str"\ns_nationkey = "int"\n'
            's_phone = "str"\ns_acctbal = "float"\ns_comment = "str"'
        ),
        "partsupp": (
            'ps_partkey = "int"\nps_suppkey = "int"\nps_availqty = "int"\n'
            'ps_supplycost = { type = "float", bounds = [1, 1000] }\nps_comment = "str"'
        ),
    }.items():
        public += f"\n[tables.{name}]\nsource = {source(name)}\npublic = true\n\n"
        public += f"[tables.{name}.columns]\n{columns}\n"
    text = f"""[dataset]
name = "tpch"
engine = "{engine}"

[tables.customer]
source = {source("customer")}
privacy_unit = {{ column = "c_custkey", max_rows = 1 }}

[tables.customer.columns]
c_custkey = "int"
c_name = "str"
c_address = "str"
c_nationkey = {{ type = "int", keys = {list(range(25))} }}
c_phone = "str"
c_acctbal = {{ type = "float", bounds = [-999.99, 9999.99] }}
c_mktsegment = {{ type = "str", keys = {keys(MKTSEGMENTS)} }}
c_comment = "str"

[tables.orders]
source = {source("orders")}
privacy_unit = {{ column = "o_custkey", max_rows = {orders} }}

[tables.orders.columns]
o_orderkey = {{ type = "int", join_rows_per_key = 1 }}
o_custkey = "int"
o_orderstatus = {{ type = "str", keys = ["F", "O", "P"] }}
o_totalprice = {{ type = "float", bounds = [0, 600000] }}
o_orderdate = "date"
o_orderpriority = {{ type = "str", keys = {keys(PRIORITIES)} }}
o_clerk = "str"
o_shippriority = {{ type = "int", keys = [0] }}
o_comment = "str"

[tables.lineitem]
source = {source("lineitem")}
privacy_unit = {{ column = "l_custkey", max_rows = {lines}{reach} }}

[tables.lineitem.columns]
l_orderkey = "int"
l_partkey = "int"
l_suppkey = "int"
l_linenumber = {{ type = "int", bounds = [1, 7] }}
l_quantity = {{ type = "float", bounds = [1, 50] }}
l_extendedprice = {{ type = "float", bounds = [900, 105000] }}
l_discount = {{ type = "float", bounds = [0, 0.1] }}
l_tax = {{ type = "float", bounds = [0, 0.08] }}
l_returnflag = {{ type = "str", keys = ["A", "N", "R"] }}
l_linestatus = {{ type = "str", keys = ["F", "O"] }}
l_shipdate = "date"
l_commitdate = "date"
l_receiptdate = "date"
l_shipinstruct = {{ type = "str", keys = {keys(INSTRUCTIONS)} }}
l_shipmode = {{ type = "str", keys = {keys(SHIPMODES)} }}
l_comment = "str"
{stored}{public}"""
    return _not_null(text)


def _not_null(text: str) -> str:
    """``text`` with every column declared ``nullable = false``: the specification defines every
    TPC-H column NOT NULL (clause 1.4), so ``COUNT(col)`` is ``COUNT(*)`` and shares its
    measurement (an average needs no count of its own).
    """
    lines = []
    for written in text.splitlines():
        simple = re.fullmatch(r'(\w+) = "(int|str|float|date|bool)"', written)
        if simple:
            lines.append(f'{simple[1]} = {{ type = "{simple[2]}", nullable = false }}')
        elif re.fullmatch(r"\w+ = \{ type = .* \}", written):
            lines.append(written[: -len(" }")] + ", nullable = false }")
        else:
            lines.append(written)
    return "\n".join(lines) + "\n"


REVENUE = "l_extendedprice * (1 - l_discount)"

QUERIES: dict[str, str] = {
    "Q1": f"""SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS sum_qty,
        SUM(l_extendedprice) AS sum_base_price, SUM({REVENUE}) AS sum_disc_price,
        SUM({REVENUE} * (1 + l_tax)) AS sum_charge, AVG(l_quantity) AS avg_qty,
        AVG(l_extendedprice) AS avg_price, AVG(l_discount) AS avg_disc, COUNT(*) AS count_order
        FROM lineitem WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY
        GROUP BY l_returnflag, l_linestatus""",
    # Over public tables only: answered exactly and free, as the specification writes it.
    "Q2": """SELECT s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
        FROM part, supplier, partsupp, nation, region
        WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND p_size = 15
        AND p_type LIKE '%BRASS' AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey
        AND r_name = 'EUROPE' AND ps_supplycost = (
            SELECT MIN(ps_supplycost) FROM partsupp, supplier, nation, region
            WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey
            AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'EUROPE')
        ORDER BY s_acctbal DESC, n_name, s_name, p_partkey LIMIT 100""",
    "Q3": f"""SELECT o_shippriority, SUM({REVENUE}) AS revenue, COUNT(*) AS lines
        FROM lineitem JOIN orders ON l_orderkey = o_orderkey AND l_custkey = o_custkey
        JOIN customer ON c_custkey = o_custkey
        WHERE c_mktsegment = 'BUILDING' AND o_orderdate < DATE '1995-03-15'
        AND l_shipdate > DATE '1995-03-15' GROUP BY o_shippriority""",
    "Q4": """SELECT o_orderpriority, COUNT(*) AS order_count FROM orders
        WHERE o_orderdate >= DATE '1993-07-01'
        AND o_orderdate < DATE '1993-07-01' + INTERVAL '3' MONTH
        AND EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey
                    AND l_custkey = o_custkey AND l_commitdate < l_receiptdate)
        GROUP BY o_orderpriority""",
    "Q5": f"""SELECT n_name, SUM({REVENUE}) AS revenue
        FROM lineitem JOIN orders ON l_orderkey = o_orderkey AND l_custkey = o_custkey
        JOIN customer ON c_custkey = o_custkey JOIN supplier ON l_suppkey = s_suppkey
        JOIN nation ON s_nationkey = n_nationkey JOIN region ON n_regionkey = r_regionkey
        WHERE c_nationkey = s_nationkey AND r_name = 'ASIA'
        AND o_orderdate >= DATE '1994-01-01'
        AND o_orderdate < DATE '1994-01-01' + INTERVAL '1' YEAR
        GROUP BY n_name""",
    "Q6": """SELECT SUM(l_extendedprice * l_discount) AS revenue FROM lineitem
        WHERE l_shipdate >= DATE '1994-01-01'
        AND l_shipdate < DATE '1994-01-01' + INTERVAL '1' YEAR
        AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24""",
    "Q7": f"""SELECT n1.n_name AS supp_nation, n2.n_name AS cust_nation,
        EXTRACT(year FROM l_shipdate) AS l_year, SUM({REVENUE}) AS revenue
        FROM lineitem JOIN orders ON l_orderkey = o_orderkey AND l_custkey = o_custkey
        JOIN customer ON c_custkey = o_custkey JOIN supplier ON s_suppkey = l_suppkey
        JOIN nation n1 ON s_nationkey = n1.n_nationkey
        JOIN nation n2 ON c_nationkey = n2.n_nationkey
        WHERE ((n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY')
               OR (n1.n_name = 'GERMANY' AND n2.n_name = 'FRANCE'))
        AND l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'
        GROUP BY supp_nation, cust_nation, l_year""",
    "Q8": f"""SELECT EXTRACT(year FROM o_orderdate) AS o_year,
        SUM(CASE WHEN n2.n_name = 'BRAZIL' THEN {REVENUE} ELSE 0 END) / SUM({REVENUE})
            AS mkt_share
        FROM lineitem JOIN orders ON l_orderkey = o_orderkey AND l_custkey = o_custkey
        JOIN customer ON o_custkey = c_custkey JOIN part ON p_partkey = l_partkey
        JOIN supplier ON s_suppkey = l_suppkey JOIN nation n1 ON c_nationkey = n1.n_nationkey
        JOIN region ON n1.n_regionkey = r_regionkey JOIN nation n2 ON s_nationkey = n2.n_nationkey
        WHERE r_name = 'AMERICA' AND o_orderdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'
        AND p_type = 'ECONOMY ANODIZED STEEL' GROUP BY o_year""",
    "Q9": f"""SELECT n_name AS nation, EXTRACT(year FROM o_orderdate) AS o_year,
        SUM({REVENUE} - ps_supplycost * l_quantity) AS sum_profit
        FROM lineitem JOIN orders ON o_orderkey = l_orderkey AND l_custkey = o_custkey
        JOIN part ON p_partkey = l_partkey JOIN supplier ON s_suppkey = l_suppkey
        JOIN partsupp ON ps_suppkey = l_suppkey AND ps_partkey = l_partkey
        JOIN nation ON s_nationkey = n_nationkey WHERE p_name LIKE '%green%'
        GROUP BY n_name, o_year""",
    # The top-20 customers by lost revenue, as the lost revenue per nation.
    "Q10": f"""SELECT n_name, SUM({REVENUE}) AS revenue, COUNT(*) AS lines
        FROM lineitem JOIN orders ON l_orderkey = o_orderkey AND l_custkey = o_custkey
        JOIN customer ON c_custkey = o_custkey JOIN nation ON c_nationkey = n_nationkey
        WHERE o_orderdate >= DATE '1993-10-01'
        AND o_orderdate < DATE '1993-10-01' + INTERVAL '3' MONTH
        AND l_returnflag = 'R' GROUP BY n_name""",
    # Over public tables only (FRACTION 0.0001 at SF 1, divided by the scale factor: {fraction}).
    "Q11": """SELECT ps_partkey, SUM(ps_supplycost * ps_availqty) AS value
        FROM partsupp, supplier, nation
        WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY'
        GROUP BY ps_partkey HAVING SUM(ps_supplycost * ps_availqty) > (
            SELECT SUM(ps_supplycost * ps_availqty) * {fraction} FROM partsupp, supplier, nation
            WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY')
        ORDER BY value DESC""",
    "Q12": """SELECT l_shipmode,
        SUM(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH'
            THEN 1 ELSE 0 END) AS high_line_count,
        SUM(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH'
            THEN 1 ELSE 0 END) AS low_line_count
        FROM lineitem JOIN orders ON o_orderkey = l_orderkey AND l_custkey = o_custkey
        WHERE l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate
        AND l_shipdate < l_commitdate AND l_receiptdate >= DATE '1994-01-01'
        AND l_receiptdate < DATE '1994-01-01' + INTERVAL '1' YEAR GROUP BY l_shipmode""",
    "Q13": """SELECT c_count, COUNT(*) AS custdist FROM (
            SELECT c_custkey, COUNT(o_orderkey) AS c_count
            FROM customer LEFT OUTER JOIN orders
                ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%'
            GROUP BY c_custkey) AS c_orders
        GROUP BY c_count""",
    "Q14": f"""SELECT 100.00 * SUM(CASE WHEN p_type LIKE 'PROMO%' THEN {REVENUE} ELSE 0 END)
            / SUM({REVENUE}) AS promo_revenue
        FROM lineitem JOIN part ON l_partkey = p_partkey
        WHERE l_shipdate >= DATE '1995-09-01'
        AND l_shipdate < DATE '1995-09-01' + INTERVAL '1' MONTH""",
    # The top supplier's revenue, as the revenue per supplier of the quarter.
    # Each supplier's revenue in the quarter (the specification's view revenue0, joined with
    # supplier as its query does): the suppliers are a public table's keys.
    "Q15": f"""SELECT s_suppkey, SUM({REVENUE}) AS total_revenue
        FROM lineitem JOIN supplier ON l_suppkey = s_suppkey
        WHERE l_shipdate >= DATE '1996-01-01'
        AND l_shipdate < DATE '1996-01-01' + INTERVAL '3' MONTH
        GROUP BY s_suppkey""",
    # Over public tables only.
    "Q16": """SELECT p_brand, p_type, p_size, COUNT(DISTINCT ps_suppkey) AS supplier_cnt
        FROM partsupp, part WHERE p_partkey = ps_partkey AND p_brand <> 'Brand#45'
        AND p_type NOT LIKE 'MEDIUM POLISHED%' AND p_size IN (49, 14, 23, 45, 19, 3, 36, 9)
        AND ps_suppkey NOT IN (
            SELECT s_suppkey FROM supplier WHERE s_comment LIKE '%Customer%Complaints%')
        GROUP BY p_brand, p_type, p_size
        ORDER BY supplier_cnt DESC, p_brand, p_type, p_size""",
    "Q17": """SELECT SUM(l_extendedprice) / 7.0 AS avg_yearly FROM lineitem
        JOIN part ON p_partkey = l_partkey
        WHERE p_brand = 'Brand#23' AND p_container = 'MED BOX'
        AND l_quantity < (SELECT 0.2 * AVG(l_quantity) FROM lineitem
                          WHERE l_partkey = p_partkey)""",
    # Large-volume customers, as how many orders hold more than 300 units and what they cost.
    # The per-order totals are per (customer, order), correlated on both (an order belongs to
    # one customer, so the totals are the specification's).
    "Q18": """SELECT COUNT(*) AS orders, SUM(o_totalprice) AS total FROM orders
        WHERE EXISTS (SELECT * FROM (SELECT l_custkey, l_orderkey, SUM(l_quantity) AS quantity
                                     FROM lineitem GROUP BY l_custkey, l_orderkey) AS big
                      WHERE big.l_custkey = o_custkey AND big.l_orderkey = o_orderkey
                      AND big.quantity > 300)""",
    "Q19": f"""SELECT SUM({REVENUE}) AS revenue FROM lineitem JOIN part ON p_partkey = l_partkey
        WHERE l_shipinstruct = 'DELIVER IN PERSON' AND l_shipmode IN ('AIR', 'REG AIR') AND (
            (p_brand = 'Brand#12' AND p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG')
             AND l_quantity >= 1 AND l_quantity <= 11 AND p_size BETWEEN 1 AND 5)
         OR (p_brand = 'Brand#23' AND p_container IN ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK')
             AND l_quantity >= 10 AND l_quantity <= 20 AND p_size BETWEEN 1 AND 10)
         OR (p_brand = 'Brand#34' AND p_container IN ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')
             AND l_quantity >= 20 AND l_quantity <= 30 AND p_size BETWEEN 1 AND 15))""",
    # Suppliers with excess stock, as how many there are.
    "Q20": """SELECT COUNT(*) FROM supplier JOIN nation ON s_nationkey = n_nationkey
        WHERE n_name = 'CANADA' AND s_suppkey IN (
            SELECT ps_suppkey FROM partsupp WHERE ps_partkey IN (
                SELECT p_partkey FROM part WHERE p_name LIKE 'forest%')
            AND ps_availqty > (SELECT 0.5 * SUM(l_quantity) FROM lineitem
                WHERE l_partkey = ps_partkey AND l_suppkey = ps_suppkey
                AND l_shipdate >= DATE '1994-01-01'
                AND l_shipdate < DATE '1994-01-01' + INTERVAL '1' YEAR))""",
    # Suppliers who kept orders waiting, as how many such lines there are.
    "Q21": """SELECT COUNT(*) AS numwait FROM lineitem l1
        JOIN orders ON o_orderkey = l1.l_orderkey AND l1.l_custkey = o_custkey
        JOIN supplier ON s_suppkey = l1.l_suppkey JOIN nation ON s_nationkey = n_nationkey
        WHERE o_orderstatus = 'F' AND l1.l_receiptdate > l1.l_commitdate
        AND EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey
                    AND l2.l_custkey = l1.l_custkey AND l2.l_suppkey <> l1.l_suppkey)
        AND NOT EXISTS (SELECT * FROM lineitem l3 WHERE l3.l_orderkey = l1.l_orderkey
                        AND l3.l_custkey = l1.l_custkey AND l3.l_suppkey <> l1.l_suppkey
                        AND l3.l_receiptdate > l3.l_commitdate)
        AND n_name = 'SAUDI ARABIA'""",
    "Q22": """SELECT SUBSTRING(c_phone, 1, 2) AS cntrycode, COUNT(*) AS numcust,
        SUM(c_acctbal) AS totacctbal FROM customer
        WHERE SUBSTRING(c_phone, 1, 2) IN ('13', '31', '23', '29', '30', '18', '17')
        AND c_acctbal > (SELECT AVG(c_acctbal) FROM customer WHERE c_acctbal > 0.00)
        AND NOT EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey)
        GROUP BY cntrycode""",
}

NEEDS_DELTA = {"Q7", "Q8", "Q9"}
"""Queries grouping by keys without a public list (private partition selection spends δ)."""


POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
"""Where ``--engines postgres`` loads the tables (once per scale factor, schema ``tpch_sf<N>``)."""


def progress(text: str) -> None:
    print(f"  … {text}", file=sys.stderr, flush=True)


def generate(scale: float, root: Path) -> Path:
    """The eight tables at ``scale`` as Parquet (generated once; lineitem with its l_custkey)."""
    folder = root / f"sf{scale:g}"
    raw = folder / "raw"
    # Done once the raw files are gone (removed last): a conversion cut short starts again.
    if not raw.exists() and all((folder / f"{name}.parquet").exists() for name in TABLES):
        return folder
    raw.mkdir(parents=True, exist_ok=True)
    generated = raw / ".generated"  # tpchgen-cli finished: a run cut short starts again
    if not generated.exists():
        cli = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
        progress(f"generating TPC-H SF {scale:g} with tpchgen-cli into {raw}")
        subprocess.run([cli, "parquet", "-s", f"{scale:g}", "--output-dir", str(raw)], check=True)
        generated.touch()
    con = duckdb.connect()
    try:
        for name in TABLES:
            source = raw / f"{name}.parquet"
            target = folder / f"{name}.parquet"
            if name == "lineitem":
                progress("writing lineitem with its order's customer (l_custkey)")
                partial = target.with_suffix(".partial")
                con.execute(
                    f"COPY (SELECT l.*, o.o_custkey AS l_custkey FROM '{source}' l "
                    f"JOIN '{raw / 'orders.parquet'}' o ON l.l_orderkey = o.o_orderkey) "
                    f"TO '{partial}' (FORMAT PARQUET)"
                )
                partial.replace(target)
            else:
                shutil.copyfile(source, target)
    finally:
        con.close()
    shutil.rmtree(raw)
    return folder


class RawTimeout(Exception):
    """The engine's own run of a query passed ``--timeout`` and was cancelled."""


@dataclass
class Outcome:
    """One query's line of the table."""

    name: str
    answered: bool
    reason: str = ""
    error: float = math.nan
    dalenius: float = math.nan
    raw: float = math.nan
    public: bool = False
    """Answered exactly and free: the query reads public tables alone."""
    nulls: int = 0
    """Cells released as NULL where the exact answer has a number (counted as error 1)."""
    joined: float = math.nan
    """With ``--unit-through-orders`` on DuckDB: the raw query with each line's customer joined
    in from ``orders`` as the declaration defines it (the floor of a query reading ``lineitem``
    without joining ``orders`` itself)."""


class FreshSession(Session):
    """A session whose every release reads the data (never answered from the ledger's cache)."""

    count = 0

    def _request_key(self, plan: ReleasePlan[Any]) -> str:
        FreshSession.count += 1
        return f"{super()._request_key(plan)}:{FreshSession.count}"


def numeric_cells(rows: Any, skip: list[int]) -> list[float | None]:
    """Every numeric value of the rows but their key columns (``skip``), in order (DuckDB's
    DECIMALs included); a NULL cell is ``None`` (a ratio whose released denominator is 0).
    """
    out: list[float | None] = []
    for row in rows:
        for i, value in enumerate(row):
            if i in skip:
                continue
            if value is None:
                out.append(None)
            elif isinstance(value, numbers.Real | decimal.Decimal) and not isinstance(value, bool):
                out.append(float(value))
    return out


def relative_error(released: list[float | None], exact: list[float | None]) -> float:
    """The median over cells of |released − exact| / max(|exact|, 1), cells matched by the
    groups' keys (a group the private selection did not release has no cell).

    A cell released as NULL where the exact one is a number (a ratio whose noisy denominator
    came out 0) counts as an error of 1, as if nothing were known of it; NaN if no group was
    released.
    """
    if not released or len(released) != len(exact):
        return math.nan

    def error(r: float | None, e: float | None) -> float:
        if r is None or e is None:
            return 0.0 if r is None and e is None else 1.0
        return abs(r - e) / max(abs(e), 1.0)

    return statistics.median(error(r, e) for r, e in zip(released, exact, strict=True))


def null_cells(released: list[float | None], exact: list[float | None]) -> int:
    """How many cells were released as NULL where the exact answer has a number."""
    return sum(r is None and e is not None for r, e in zip(released, exact, strict=True))


def same_rows(released: Any, exact: Any) -> bool:
    """Whether an exact answer is the raw engine's, cell by cell (floats to 1e-9 relative).

    Rows are compared in order, then, failing that, sorted: ``ORDER BY`` leaves the order of
    ties to the engine (Q11 at SF 10 has two parts of equal value, listed either way round).
    """
    return _rows_match(released, exact) or _rows_match(_sorted(released), _sorted(exact))


def _sorted(rows: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (tuple(r) for r in rows),
        key=lambda r: [float(v) if isinstance(v, float | decimal.Decimal) else repr(v) for v in r],
    )


def _rows_match(released: Any, exact: Any) -> bool:
    if len(released) != len(exact):
        return False
    for r, e in zip(released, exact, strict=True):
        for a, b in zip(r, e, strict=True):
            if isinstance(b, float | decimal.Decimal) and not math.isclose(
                float(a), float(b), rel_tol=1e-9
            ):
                return False
            if not isinstance(b, float | decimal.Decimal) and a != b:
                return False
    return True


def run_query(
    session: Session,
    raw: Any,
    name: str,
    sql: str,
    args: argparse.Namespace,
    joined: Any = None,
) -> Outcome:
    """Answer or refuse ``sql``; time it against the engine itself (``raw``) on the same tables,
    and, where given, against ``joined`` (the engine itself, each line's customer joined in)."""
    delta = 1e-6 if name in NEEDS_DELTA else None
    public = False
    try:
        session.explain(sql, args.epsilon, delta=delta)
    except PublicAnswer:
        public = True  # over public tables alone: answered exactly, free
    except DaleniusError as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        return Outcome(name, False, first)
    started = time.perf_counter()
    try:
        exact_rows = raw(sql)
    except RawTimeout:
        return Outcome(name, True, f"the raw engine ran over {args.timeout:g} s: not timed")
    if time.perf_counter() - started > args.timeout:
        return Outcome(name, True, f"the raw engine ran over {args.timeout:g} s: not timed")
    times: list[float] = []
    raw_times: list[float] = []
    joined_times: list[float] = []
    result = None
    for i in range(args.repeats + 1):
        if joined is not None:
            started = time.perf_counter()
            joined(sql)
            if i:
                joined_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        raw(sql)
        raw_elapsed = time.perf_counter() - started
        started = time.perf_counter()
        try:
            result = session.query(sql, args.epsilon, delta=delta)
        except DaleniusError as failure:  # the executor's time limit (--timeout)
            return Outcome(name, True, f"Dalenius: {str(failure).splitlines()[0][:90]}")
        elapsed = time.perf_counter() - started
        if i:  # the first run of each warms up
            raw_times.append(raw_elapsed)
            times.append(elapsed)
    assert result is not None
    if public:
        error = 0.0 if same_rows(result.rows, exact_rows) else math.nan
        return Outcome(
            name,
            True,
            error=error,
            dalenius=statistics.median(times),
            raw=statistics.median(raw_times),
            public=True,
        )
    keys = [i for i, kind in enumerate(result.kinds) if kind == "key"]
    exact = {tuple(str(row[i]) for i in keys): row for row in exact_rows}
    pairs = [(row, exact.get(tuple(str(row[i]) for i in keys))) for row in result.rows]
    released_cells = numeric_cells([r for r, e in pairs if e is not None], skip=keys)
    exact_cells = numeric_cells([e for _, e in pairs if e is not None], skip=keys)
    return Outcome(
        name,
        True,
        error=relative_error(released_cells, exact_cells),
        nulls=null_cells(released_cells, exact_cells),
        dalenius=statistics.median(times),
        raw=statistics.median(raw_times),
        joined=statistics.median(joined_times) if joined_times else math.nan,
    )


def load_postgres(folder: Path, schema: str) -> None:
    """Copy the eight Parquet files into ``schema`` of the PostgreSQL test database, once (a
    schema whose lineitem has rows is kept), through CSV written by DuckDB.
    """
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as pg:
        found = pg.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
            "AND table_name = 'lineitem'",
            (schema,),
        ).fetchone()
        if found and pg.execute(f"SELECT EXISTS (SELECT 1 FROM {schema}.lineitem)").fetchone()[0]:
            return
        pg.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        pg.execute(f"CREATE SCHEMA {schema}")
        con = duckdb.connect()
        for name in TABLES:
            progress(f"loading {name} into PostgreSQL ({schema})")
            source = folder / f"{name}.parquet"
            columns = con.execute(f"DESCRIBE SELECT * FROM '{source}'").fetchall()
            pg_types = {
                "BIGINT": "bigint",
                "INTEGER": "integer",
                "DATE": "date",
                "DOUBLE": "double precision",
            }
            declared = ", ".join(
                f"{c} {pg_types.get(t, 'numeric' if t.startswith('DECIMAL') else 'text')}"
                for c, t, *_ in columns
            )
            pg.execute(f"CREATE TABLE {schema}.{name} ({declared})")
            with tempfile.TemporaryDirectory() as tmp:
                csv = Path(tmp) / f"{name}.csv"
                con.execute(f"COPY (SELECT * FROM '{source}') TO '{csv}' (HEADER, DELIMITER ',')")
                with (
                    pg.cursor() as cur,
                    cur.copy(f"COPY {schema}.{name} FROM STDIN (FORMAT csv, HEADER true)") as copy,
                    csv.open("rb") as data,
                ):
                    while chunk := data.read(1 << 20):
                        copy.write(chunk)
            pg.execute(f"ANALYZE {schema}.{name}")
        con.close()


def raw_runner(
    engine: str,
    folder: Path,
    schema: str,
    session: Session,
    timeout: float,
    reached: bool = False,
) -> tuple[Any, Any]:
    """The same SQL run by the engine itself on the same tables (no Dalenius), and its closer;
    a run past ``timeout`` seconds is cancelled and raises RawTimeout. With ``reached``
    (DuckDB), ``lineitem`` is the file's lines with each one's customer joined in from
    ``orders``, as ``privacy_unit.through`` defines it, instead of the column written beside it.
    """
    if engine == "postgres":
        import psycopg

        pg = psycopg.connect(POSTGRES_URL, autocommit=True)
        pg.execute(f"SET search_path = {schema}")
        # The same planner setting as Dalenius's executor (dalenius.executors.postgres): the
        # ratio then measures Dalenius's own work, not a join method PostgreSQL chose.
        pg.execute("SET enable_nestloop = off")
        pg.execute(f"SET statement_timeout = {int(timeout * 1000)}")

        def run_pg(sql: str) -> Any:
            try:
                return pg.execute(sql).fetchall()
            except psycopg.errors.QueryCanceled:
                raise RawTimeout from None

        return run_pg, pg.close
    if engine == "spark":
        from dalenius.executors.spark import input_bytes, shared_session, shuffle_partitions

        spark = shared_session().newSession()
        for name in TABLES:  # the files as they are, as raw DuckDB reads them
            spark.read.parquet(str(folder / f"{name}.parquet")).createOrReplaceTempView(name)

        def run_spark(sql: str) -> Any:
            timer = threading.Timer(timeout, spark.sparkContext.cancelAllJobs)
            timer.start()
            try:
                frame = spark.sql(sql)  # shuffled as Dalenius's executor would shuffle it
                count = shuffle_partitions(input_bytes(frame))
                spark.conf.set("spark.sql.shuffle.partitions", str(count))
                return [tuple(r) for r in frame.collect()]
            except Exception as exc:  # py4j's error for a cancelled job
                if not timer.is_alive():
                    raise RawTimeout from exc
                raise
            finally:
                timer.cancel()

        return run_spark, (lambda: None)
    con = duckdb.connect()
    for name in TABLES:
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM '{folder / (name + '.parquet')}'")
    if reached:
        con.execute(
            "CREATE OR REPLACE VIEW lineitem AS SELECT l.* EXCLUDE (l_custkey), "
            f"o_custkey AS l_custkey FROM '{folder / 'lineitem.parquet'}' AS l "
            "LEFT JOIN (SELECT o_orderkey, o_custkey FROM orders) ON l_orderkey = o_orderkey"
        )

    def run_duckdb(sql: str) -> Any:
        timer = threading.Timer(timeout, con.interrupt)
        timer.start()
        try:
            return con.execute(sql).fetchall()
        except duckdb.InterruptException:
            raise RawTimeout from None
        finally:
            timer.cancel()

    return run_duckdb, con.close


def run_scale(scale: float, engine: str, args: argparse.Namespace) -> list[Outcome]:
    folder = generate(scale, Path(args.data).expanduser())
    schema = f"tpch_sf{scale:g}".replace(".", "_")
    if engine == "postgres":
        load_postgres(folder, schema)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tpch.toml"
        path.write_text(
            catalog_text(folder, args.orders, args.lines, engine, schema, args.unit_through_orders)
        )
        catalog = load_catalog(path)
        ledger = open_ledger(None)
        ledger.set_budget("analyst", catalog.name, ApproxDP(Fraction(10**6), Fraction(1, 2)))
        session = FreshSession(catalog, ledger=ledger, executor=executor_for(catalog))
        raw, close = raw_runner(engine, folder, schema, session, args.timeout)
        joined = None
        if args.unit_through_orders and engine == "duckdb":
            joined, close_joined = raw_runner(engine, folder, schema, session, args.timeout, True)
        session.executor.time_limit = args.timeout
        outcomes = []
        try:
            for name, written in QUERIES.items():
                if args.queries and name not in args.queries:
                    continue
                progress(f"SF {scale:g} on {engine}: {name}")
                sql = written.replace("{fraction}", f"{0.0001 / scale:g}")
                outcomes.append(run_query(session, raw, name, sql, args, joined))
                progress(line(outcomes[-1]))
        finally:
            session.close()
            close()
            if joined is not None:
                close_joined()
    return outcomes


def line(o: Outcome) -> str:
    """One query's line of the table (also printed as each query finishes)."""
    if o.answered and o.reason:
        return f"{o.name:6} {'yes':9} {o.reason}"
    if not o.answered:
        return f"{o.name:6} {'refused':9} {o.reason[:100]}"
    error = "no group" if math.isnan(o.error) else f"{o.error:.4f}"
    if o.nulls:
        error = f"{o.nulls} NULL, {error}"
    if o.public:
        error = "exact" if o.error == 0 else "MISMATCH"
    text = (
        f"{o.name:6} {'yes':9} {error:>10} {o.dalenius * 1000:8.1f}ms "
        f"{o.raw * 1000:7.1f}ms {o.dalenius / o.raw:6.2f}"
    )
    if not math.isnan(o.joined):
        text += f" {o.joined * 1000:9.1f}ms {o.joined / o.raw:6.2f} {o.dalenius / o.joined:6.2f}"
    return text


def report(
    scale: float, engine: str, outcomes: list[Outcome], epsilon: float, through: bool = False
) -> None:
    answered = sum(o.answered for o in outcomes)
    unit = "customer as the privacy unit"
    if through:
        unit += " (lineitem's reached through its order)"
    print(f"\nTPC-H SF {scale:g}, {unit}, epsilon = {epsilon:g} ({engine})")
    header = (
        f"{'query':6} {'answered':9} {'rel. error':>10} {'dalenius':>10} {'raw':>9} {'ratio':>6}"
    )
    if any(not math.isnan(o.joined) for o in outcomes):
        header += f" {'joined':>11} {'÷ raw':>6} {'÷ it':>6}"
    print(header)
    for o in outcomes:
        print(line(o))
    print(f"answered {answered} of {len(outcomes)}")
    if any(not math.isnan(o.joined) for o in outcomes):
        print(
            "joined: raw DuckDB with each line's customer joined in from orders (the view the "
            "declaration defines), its ratio to raw, and Dalenius's ratio to it"
        )
    if any(o.nulls for o in outcomes):
        print(
            "n NULL: cells released as NULL (a ratio whose noisy denominator came out 0), "
            "each counted as a relative error of 1"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, nargs="+", default=[0.1])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--orders", type=int, default=40, help="orders per customer (cap)")
    parser.add_argument("--lines", type=int, default=280, help="lines per customer (cap)")
    parser.add_argument("--data", default="~/.cache/dalenius-tpch")
    parser.add_argument(
        "--engines",
        nargs="+",
        default=["duckdb"],
        choices=["duckdb", "postgres", "spark"],
        help="engines to run on (PostgreSQL: the test server, loaded once per scale factor)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600,
        help="seconds one run of a query may take (raw engine or Dalenius) before it is skipped",
    )
    parser.add_argument(
        "--queries", nargs="+", default=None, help="only these queries (Q1 … Q22; default all)"
    )
    parser.add_argument(
        "--unit-through-orders",
        action="store_true",
        help="declare lineitem's customer as reached through l_orderkey -> orders.o_orderkey "
        "(privacy_unit.through) instead of reading the l_custkey column written beside it",
    )
    args = parser.parse_args()
    print(f"load average before: {Path('/proc/loadavg').read_text().split()[:3]}")
    for scale in args.scale:
        for engine in args.engines:
            outcomes = run_scale(scale, engine, args)
            report(scale, engine, outcomes, args.epsilon, args.unit_through_orders)
    print(f"load average after: {Path('/proc/loadavg').read_text().split()[:3]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
