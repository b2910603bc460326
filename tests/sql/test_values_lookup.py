"""A long CASE of constants per key (a correlated subquery's released values, a branch per key)
written for DuckDB as a subquery over VALUES: the same value as the CASE for every row — the
first branch of a repeated key, NULL for a key with no branch, for a NULL key and for a NULL
value, the CASE's type — and the CASE where it is shorter or not a lookup."""

from __future__ import annotations

import dataclasses
import random

import duckdb
import pytest

from dalenius.core.dialect import DUCKDB, POSTGRES, SPARK
from dalenius.plan.derive import FieldInfo
from dalenius.plan.expr import BinOp, Case, Col, Expr, Lit
from dalenius.sql.emit import Compiler
from dalenius.sql.emit.expressions import VALUES_BRANCHES

FIELDS = {
    "k": FieldInfo("int", None, None, True),
    "s": FieldInfo("str", None, None, True),
    "x": FieldInfo("float", None, None, True),
}
FLAT = dataclasses.replace(DUCKDB, values_lookup=False)


def lookup(column: str, keys: list[object], values: list[object]) -> Case:
    return Case(
        tuple((BinOp("=", Col(column), Lit(k)), Lit(v)) for k, v in zip(keys, values, strict=True)),
        None,
    )


def answers(expr: Expr, dialect: object, con: duckdb.DuckDBPyConnection) -> list[tuple]:
    sql = Compiler(FIELDS, dialect).expression(expr).sql(dialect="duckdb")  # type: ignore[arg-type]
    query = f"SELECT k, s, ({sql}) AS v FROM t"
    return con.execute(f"SELECT k, s, v, typeof(v) FROM ({query}) ORDER BY k, s").fetchall()


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    rng = random.Random(7)
    connection = duckdb.connect()
    connection.execute("CREATE TABLE t (k BIGINT, s VARCHAR, x DOUBLE)")
    rows = [
        (rng.randrange(-50, 3000), f"key{rng.randrange(3000)}", rng.random()) for _ in range(4000)
    ]
    rows += [(None, None, 1.0), (2**40, "it's", 2.0)]
    connection.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    return connection


def branches(rng: random.Random, n: int) -> tuple[list[int], list[object]]:
    keys = [rng.randrange(-50, 3000) for _ in range(n)]  # repeats: the first branch wins
    values: list[object] = [
        rng.choice([rng.uniform(-1e3, 1e3), rng.randrange(-9, 9), None, 1e300, 5.1000000000000005])
        for _ in range(n)
    ]
    return keys, values


def test_a_long_case_of_doubles_per_key_gives_what_the_case_gives(
    con: duckdb.DuckDBPyConnection,
) -> None:
    keys, values = branches(random.Random(1), VALUES_BRANCHES + 200)
    keys.append(2**40)
    values.append(0.25)
    expr = lookup("k", keys, values)
    written = Compiler(FIELDS, DUCKDB).expression(expr).sql(dialect="duckdb")
    assert written.startswith("(SELECT") and "VALUES" in written and "CASE" not in written
    assert answers(expr, DUCKDB, con) == answers(expr, FLAT, con)
    assert {row[3] for row in answers(expr, DUCKDB, con)} == {"DOUBLE"}


def test_a_long_case_of_integers_per_text_key_gives_what_the_case_gives(
    con: duckdb.DuckDBPyConnection,
) -> None:
    rng = random.Random(2)
    keys = [f"key{rng.randrange(3000)}" for _ in range(VALUES_BRANCHES + 10)] + ["it's"]
    values = [rng.randrange(-(2**40), 2**40) for _ in keys]
    expr = lookup("s", keys, values)
    assert "VALUES" in Compiler(FIELDS, DUCKDB).expression(expr).sql(dialect="duckdb")
    assert answers(expr, DUCKDB, con) == answers(expr, FLAT, con)
    assert {row[3] for row in answers(expr, DUCKDB, con)} == {"BIGINT"}


def test_shorter_cases_and_other_shapes_stay_cases_and_other_engines_keep_their_form() -> None:
    keys, values = branches(random.Random(3), VALUES_BRANCHES)
    long = lookup("k", keys, values)
    short = lookup("k", keys[:-1], values[:-1])
    with_else = Case(long.whens, Lit(0.0))
    on_an_expression = Case(
        tuple((BinOp("=", BinOp("+", Col("k"), Lit(1)), c.right), v) for c, v in long.whens),  # type: ignore[attr-defined]
        None,
    )
    assert "VALUES" in Compiler(FIELDS, DUCKDB).expression(long).sql(dialect="duckdb")
    for expr in (short, with_else, on_an_expression):
        assert "VALUES" not in Compiler(FIELDS, DUCKDB).expression(expr).sql(dialect="duckdb")
    assert "VALUES" not in Compiler(FIELDS, POSTGRES).expression(long).sql(dialect="postgres")
    assert "TRY_ELEMENT_AT(MAP(" in Compiler(FIELDS, SPARK).expression(long).sql(dialect="spark")
