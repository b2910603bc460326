"""Typed references: outputs, HAVING and ORDER BY read group keys and aggregates as KeyRef and
AggRef nodes (an index, never a name parsed back), and plans hash as before they were typed."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path

from dalenius.core.catalog import load_catalog
from dalenius.plan.compile import to_dp
from dalenius.plan.expr import AggRef, BinOp, Col, KeyRef, aggregates_read, references
from dalenius.plan.nodes import _jsonable
from dalenius.sql.bind import to_query

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_outputs_refer_to_keys_and_aggregates_by_index(shared_data: Path) -> None:
    catalog = load_catalog(FIXTURES / "pums.toml")
    sql = (
        "SELECT sex, COUNT(*) AS n, SUM(income) / 2 AS half FROM pums GROUP BY sex "
        "HAVING AVG(age) > 30 ORDER BY n DESC"
    )
    query = to_query(sql, catalog).query
    key, n, half = (o.expr for o in query.outputs)
    assert key == KeyRef.of(0) and key.index == 0
    assert n == AggRef.of(0)
    assert aggregates_read(half) == [1]
    assert query.having is not None and aggregates_read(query.having) == [2]
    assert query.aggregates[2].hidden
    assert [r.index for r in references(query.order_by[0].expr) if isinstance(r, AggRef)] == [0]


def test_a_reference_hashes_as_the_column_it_names() -> None:
    typed = BinOp("+", AggRef.of(3), KeyRef.of(1))
    named = BinOp("+", Col("@a3"), Col("@k1"))
    assert typed != named  # different nodes in the tree ...
    assert _jsonable(typed) == _jsonable(named)  # ... with the fingerprint plans always had


def test_plan_fingerprints_are_stable(shared_data: Path) -> None:
    catalog = load_catalog(FIXTURES / "pums.toml")
    query = to_query("SELECT sex, AVG(income) FROM pums GROUP BY sex", catalog).query
    plan = to_dp(query, Fraction(1))
    untyped = replace(
        plan,
        query=replace(
            query, outputs=tuple(replace(o, expr=Col(o.expr.name)) for o in query.outputs)
        ),
    )
    assert untyped.query.outputs != plan.query.outputs
    assert untyped.fingerprint() == plan.fingerprint()
