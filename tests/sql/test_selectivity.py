"""The share of a table's rows a WHERE keeps, estimated from the catalog's public bounds and key
lists (:mod:`dalenius.sql.emit.selectivity`): it decides only whether a bounded query keeps its
input, so it must read nothing but the plan, and fall back to "all rows" where the catalog says
nothing."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dalenius.plan.derive import FieldInfo
from dalenius.plan.expr import Between, BinOp, Col, Expr, InList, Lit, Not
from dalenius.plan.nodes import Field, Filter, Project, Scan
from dalenius.sql.emit.selectivity import KEEP_SHARE, estimated_share

SCAN = Scan("t", "t", (Field("t__q", "q", "t", "int"),))
FIELDS = {
    "t__q": FieldInfo("int", (Fraction(1), Fraction(50)), None, False),
    "t__d": FieldInfo("float", (Fraction(0), Fraction(1, 10)), None, True),
    "t__k": FieldInfo("str", None, ("a", "b", "c", "d"), True),
    "t__s": FieldInfo("str", None, None, True),
    "t__p": FieldInfo("float", (Fraction(3), Fraction(3)), None, False),
}
Q, D, K, S = Col("t__q"), Col("t__d"), Col("t__k"), Col("t__s")


@pytest.mark.parametrize(
    ("predicate", "share"),
    [
        (BinOp("<", Q, Lit(24)), Fraction(23, 49)),
        (BinOp(">", Lit(24), Q), Fraction(23, 49)),  # the literal on the left
        (BinOp(">=", Q, Lit(100)), Fraction(0)),
        (Between(D, Lit(0.05), Lit(0.07)), (Fraction(0.07) - Fraction(0.05)) / Fraction(1, 10)),
        (BinOp("AND", BinOp("<", Q, Lit(24)), Between(D, Lit(0.05), Lit(0.07))), None),
        (BinOp("OR", BinOp("<", Q, Lit(5)), BinOp(">", Q, Lit(45))), Fraction(9, 49)),
        (BinOp("=", K, Lit("a")), Fraction(1, 4)),
        (InList(K, (Lit("a"), Lit("b"))), Fraction(1, 2)),
        (BinOp("=", Q, Lit(7)), Fraction(1, 50)),
        # What the catalog says nothing about keeps every row.
        (BinOp("=", S, Lit("x")), Fraction(1)),
        (BinOp("LIKE", S, Lit("x%")), Fraction(1)),
        (Between(D, Lit(0.05), Lit(0.07), negated=True), Fraction(1)),
        (InList(K, (Lit("a"),), negated=True), Fraction(1)),
        (Not(BinOp("<", Q, Lit(24))), Fraction(1)),
        (BinOp("<", Q, Lit(float("inf"))), Fraction(1)),
        (BinOp("<", Col("t__p"), Lit(4)), Fraction(1)),  # bounds of a single point
        (BinOp("<", Col("t__unknown"), Lit(4)), Fraction(1)),
    ],
)
def test_the_share_each_condition_keeps(predicate: Expr, share: Fraction | None) -> None:
    got = estimated_share(Filter(SCAN, predicate), FIELDS)
    if share is None:  # conditions joined by AND are taken as independent
        share = Fraction(23, 49) * ((Fraction(0.07) - Fraction(0.05)) / Fraction(1, 10))
    assert got == share


def test_filters_multiply_through_projections() -> None:
    twice = Filter(Project(Filter(SCAN, BinOp("<", Q, Lit(24))), (), ()), BinOp("=", K, Lit("a")))
    assert estimated_share(twice, FIELDS) == Fraction(23, 49) * Fraction(1, 4)
    assert estimated_share(SCAN, FIELDS) == 1


def test_tpch_q6s_where_is_kept_and_q1s_is_not() -> None:
    """Q6 keeps about 1.8% of the lines (estimated about 9%, without its dates), Q1 98%."""
    quantity = FieldInfo("int", (Fraction(1), Fraction(50)), None, False)
    discount = FieldInfo("float", (Fraction(0), Fraction(1, 10)), None, False)
    fields = {"q": quantity, "d": discount, "ship": FieldInfo("date", None, None, False)}
    q6 = BinOp(
        "AND",
        BinOp(
            "AND",
            BinOp(">=", Col("ship"), Lit("1994-01-01")),
            Between(Col("d"), Lit(0.05), Lit(0.07)),
        ),
        BinOp("<", Col("q"), Lit(24)),
    )
    q1 = BinOp("<=", Col("ship"), Lit("1998-09-02"))
    assert estimated_share(Filter(SCAN, q6), fields) <= KEEP_SHARE
    assert estimated_share(Filter(SCAN, q1), fields) > KEEP_SHARE
