"""A centred integer sum counts the column itself, and still equals Σ (clip(x) − c) over non-NULL x.

``SUM(clip(x)) − c·COUNT(x)`` replaces ``SUM(clip(x)) − c·COUNT(clip(x))``: the clip maps NULL,
and only NULL, to NULL, so the two counts agree; this checks it in DuckDB on NULLs and values
outside the bounds on both sides.
"""

from __future__ import annotations

from fractions import Fraction

import duckdb

from dalenius.plan.derive import FieldInfo
from dalenius.plan.expr import Col
from dalenius.plan.nodes import Measurement
from dalenius.sql.emit import Compiler


def test_the_centred_sum_counts_the_column_and_keeps_its_value() -> None:
    bounds = (Fraction(10), Fraction(20))
    m = Measurement(
        "m0", "sum", Col("x"), "int", bounds, Fraction(15), Fraction(1), 5, 5, Fraction(1)
    )
    compiler = Compiler({"x": FieldInfo("int", bounds, None, True)})
    sql = compiler.measurement(m).sql("duckdb")
    assert 'COUNT("x")' in sql, sql
    values = [None, 3, 10, 12, 15, 20, 27, None, -(2**62), 2**62]
    con = duckdb.connect()
    con.execute("CREATE TABLE t (x BIGINT)")
    con.executemany("INSERT INTO t VALUES (?)", [[v] for v in values])
    got = con.execute(f"SELECT {sql} FROM t").fetchone()
    assert got is not None
    expected = sum(min(max(v, 10), 20) - 15 for v in values if v is not None)
    assert int(got[0]) == expected
