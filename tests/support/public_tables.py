"""A tiny catalog shaped like TPC-H's public tables (nation, region, supplier, part, partsupp)
beside one private table (customer), for the queries over public tables alone.

The values are made up and small enough to check answers by hand; the queries are TPC-H's Q2,
Q11 and Q16 as the specification writes them (correlated subquery, HAVING over a scalar subquery,
NOT IN and COUNT(DISTINCT)), with parameters that select rows of these tables.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

TABLES: dict[str, dict[str, list[object]]] = {
    "nation": {
        "n_nationkey": [0, 1, 2],
        "n_name": ["FRANCE", "GERMANY", "PERU"],
        "n_regionkey": [0, 0, 1],
    },
    "region": {"r_regionkey": [0, 1], "r_name": ["EUROPE", "AMERICA"]},
    "supplier": {
        "s_suppkey": [1, 2, 3, 4],
        "s_name": ["s1", "s2", "s3", "s4"],
        "s_nationkey": [0, 1, 1, 2],
        "s_acctbal": [10.5, 20.0, 30.0, 40.0],
        "s_comment": ["ok", "Customer late Complaints", "ok", "ok"],
    },
    "part": {
        "p_partkey": [1, 2, 3, 4],
        "p_brand": ["Brand#1", "Brand#45", "Brand#1", "Brand#2"],
        "p_type": ["SMALL BRASS", "LARGE BRASS", "MEDIUM POLISHED TIN", "SMALL TIN"],
        "p_size": [15, 15, 3, 3],
        "p_mfgr": ["m1", "m2", "m3", "m4"],
    },
    "partsupp": {
        "ps_partkey": [1, 1, 2, 2, 3, 3, 4, 4, 4],
        "ps_suppkey": [1, 2, 2, 3, 3, 4, 1, 3, 4],
        "ps_supplycost": [5.0, 4.0, 7.0, 3.0, 2.0, 9.0, 1.0, 6.0, 2.0],
        "ps_availqty": [10, 20, 30, 40, 50, 60, 70, 80, 90],
    },
    "customer": {"c_custkey": [1, 2, 3], "c_nationkey": [0, 1, 1], "c_acctbal": [5.0, 6.0, 7.0]},
}

COLUMNS = {
    "nation": {"n_nationkey": "int", "n_name": "str", "n_regionkey": "int"},
    "region": {"r_regionkey": "int", "r_name": "str"},
    "supplier": {
        "s_suppkey": "int",
        "s_name": "str",
        "s_nationkey": "int",
        "s_acctbal": "float",
        "s_comment": "str",
    },
    "part": {
        "p_partkey": "int",
        "p_brand": "str",
        "p_type": "str",
        "p_size": "int",
        "p_mfgr": "str",
    },
    "partsupp": {
        "ps_partkey": "int",
        "ps_suppkey": "int",
        "ps_supplycost": "float",
        "ps_availqty": "int",
    },
}

Q2 = """SELECT s_acctbal, s_name, n_name, p_partkey, p_mfgr
FROM part, supplier, partsupp, nation, region
WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND p_size = 15 AND p_type LIKE '%BRASS'
AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'EUROPE'
AND ps_supplycost = (SELECT MIN(ps_supplycost) FROM partsupp, supplier, nation, region
    WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND s_nationkey = n_nationkey
    AND n_regionkey = r_regionkey AND r_name = 'EUROPE')
ORDER BY s_acctbal DESC, n_name, s_name, p_partkey LIMIT 100"""
"""Each BRASS part of size 15 with its cheapest European supplier: part 1 (s2 at 4.0 beats s1 at
5.0) and part 2 (s3 at 3.0 beats s2 at 7.0)."""
Q2_ROWS = ((30.0, "s3", "GERMANY", 2, "m2"), (20.0, "s2", "GERMANY", 1, "m1"))

Q11 = """SELECT ps_partkey, SUM(ps_supplycost * ps_availqty) AS value
FROM partsupp, supplier, nation
WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY'
GROUP BY ps_partkey HAVING SUM(ps_supplycost * ps_availqty) > (
    SELECT SUM(ps_supplycost * ps_availqty) * 0.3 FROM partsupp, supplier, nation
    WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY')
ORDER BY value DESC"""
"""German suppliers s2 and s3 hold stock worth 80 (part 1), 330 (part 2), 100 (part 3) and 480
(part 4), 990 in all: parts worth more than 0.3 × 990 = 297."""
Q11_ROWS = ((4, 480.0), (2, 330.0))

Q16 = """SELECT p_brand, p_type, p_size, COUNT(DISTINCT ps_suppkey) AS supplier_cnt
FROM partsupp, part
WHERE p_partkey = ps_partkey AND p_brand <> 'Brand#45' AND p_type NOT LIKE 'MEDIUM POLISHED%'
AND p_size IN (49, 14, 23, 45, 19, 3, 36, 9, 15)
AND ps_suppkey NOT IN (SELECT s_suppkey FROM supplier WHERE s_comment LIKE '%Customer%Complaints%')
GROUP BY p_brand, p_type, p_size ORDER BY supplier_cnt DESC, p_brand, p_type, p_size"""
"""Parts 1 and 4 pass the filters; supplier 2 (complaints) is not counted: part 4 has s1, s3, s4;
part 1 has s1 only."""
Q16_ROWS = (("Brand#2", "SMALL TIN", 3, 3), ("Brand#1", "SMALL BRASS", 15, 1))


def catalog_text(folder: Path) -> str:
    """The catalog: customer private (one row per customer), the five others public."""
    out = [
        "[dataset]",
        'name = "shop"',
        "",
        "[tables.customer]",
        f'source = {{ csv = "{folder / "customer.csv"}" }}',
        'privacy_unit = { column = "c_custkey", max_rows = 1 }',
        "",
        "[tables.customer.columns]",
        'c_custkey = "int"',
        'c_nationkey = { type = "int", keys = [0, 1, 2] }',
        'c_acctbal = { type = "float", bounds = [0, 10] }',
    ]
    for name, columns in COLUMNS.items():
        out += ["", f"[tables.{name}]", f'source = {{ csv = "{folder / (name + ".csv")}" }}']
        out += ["public = true", "", f"[tables.{name}.columns]"]
        out += [f'{column} = "{kind}"' for column, kind in columns.items()]
    return "\n".join(out) + "\n"


def write(folder: Path) -> Path:
    """Write the six tables as CSV and the catalog ``shop.toml`` into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, columns in TABLES.items():
        pd.DataFrame(columns).to_csv(folder / f"{name}.csv", index=False)
    path = folder / "shop.toml"
    path.write_text(catalog_text(folder))
    return path
