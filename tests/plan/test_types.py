"""One type checker over plan expressions (dalenius.plan.derive.type_of): strict with a ``fail``,
lenient without, the same type either way for every expression the strict mode accepts."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dalenius.plan import expr as e
from dalenius.plan.derive import FieldInfo, type_of
from dalenius.plan.expr import Col, Expr, Lit

FIELDS = {
    "age": FieldInfo("int", (Fraction(0), Fraction(100)), None, False),
    "income": FieldInfo("float", (Fraction(0), Fraction(10**6)), None, True),
    "name": FieldInfo("str", None, None, True),
    "born": FieldInfo("date", None, None, True),
    "ok": FieldInfo("bool", None, None, True),
}


class Refused(Exception):
    """What the test's ``fail`` raises."""


def fail(what: str, fix: str) -> Exception:
    return Refused(what, fix)


ACCEPTED: list[tuple[Expr, str]] = [
    (e.BinOp("+", Col("age"), Lit(1)), "int"),
    (e.BinOp("/", Col("age"), Col("income")), "float"),
    (e.BinOp("||", Col("name"), Lit("x")), "str"),
    (e.BinOp("AND", e.BinOp(">", Col("age"), Lit(3)), Col("ok")), "bool"),
    (e.BinOp("=", Col("born"), Lit("2020-01-01")), "bool"),
    (e.Neg(Col("income")), "float"),
    (e.Not(e.IsNull(Col("name"))), "bool"),
    (e.InList(Col("age"), (Lit(1), Lit(2.5))), "bool"),
    (e.Between(Col("age"), Lit(1), Lit(9)), "bool"),
    (e.Like(Col("name"), Lit("a%")), "bool"),
    (e.Func("ROUND", (Col("income"), Lit(2))), "float"),
    (e.Func("ROUND", (Col("age"), Lit(-1))), "int"),
    (e.Func("ABS", (Lit(None),)), "int"),
    (e.Func("LENGTH", (Col("name"),)), "int"),
    (e.Func("YEAR", (Col("born"),)), "int"),
    (e.Func("COALESCE", (Col("age"), Col("income"))), "float"),
    (e.Func("GREATEST", (Lit(None), Lit(None))), "null"),
    (e.Case(((Col("ok"), Lit("a")),), Lit(None)), "str"),
    (e.Case(((Col("ok"), Col("age")),), Col("income")), "float"),
]


@pytest.mark.parametrize(("expr", "expected"), ACCEPTED)
def test_strict_and_lenient_agree_where_strict_accepts(expr: Expr, expected: str) -> None:
    assert type_of(expr, FIELDS, fail) == expected
    assert type_of(expr, FIELDS) == expected


REFUSED: list[tuple[Expr, str]] = [
    (e.BinOp("=", Col("age"), Col("name")), "cannot compare a int with a str."),
    (e.BinOp("=", Col("born"), Col("name")), "cannot compare a date with a str."),
    (e.BinOp("AND", Col("age"), Col("ok")), "AND needs true/false operands."),
    (e.BinOp("||", Col("age"), Col("name")), "|| joins strings only."),
    (e.BinOp("*", Col("name"), Lit(2)), "arithmetic * needs numbers, got str and int."),
    (e.Not(Col("age")), "NOT needs a true/false operand."),
    (e.Neg(Col("name")), "unary minus needs a number."),
    (e.InList(Col("age"), (Lit("a"),)), "IN mixes a int with a str."),
    (e.Between(Col("name"), Lit(1), Lit(2)), "BETWEEN mixes a str with a int."),
    (e.Like(Col("age"), Lit("1%")), "LIKE applies to text."),
    (e.Func("LOWER", (Col("age"),)), "LOWER needs text."),
    (e.Func("ROUND", (Col("name"),)), "ROUND needs numbers."),
    (e.Func("MONTH", (Col("age"),)), "MONTH needs a date."),
    (e.Func("COALESCE", (Col("age"), Col("name"))), "values of different types are mixed"),
    (e.Case(((Col("age"), Lit(1)),)), "a CASE WHEN condition must be true/false."),
]


@pytest.mark.parametrize(("expr", "message"), REFUSED)
def test_strict_refuses_row_value_conversions_with_a_fix(expr: Expr, message: str) -> None:
    with pytest.raises(Refused) as info:
        type_of(expr, FIELDS, fail)
    what, fix = info.value.args
    assert what.startswith(message) and fix
    type_of(expr, FIELDS)  # the lenient mode derives a type and never refuses


def test_strict_mode_checks_inside_an_expression_the_lenient_mode_does_not_read() -> None:
    inner = e.BinOp("=", Col("age"), Col("name"))
    expr = e.BinOp("OR", inner, Col("ok"))
    assert type_of(expr, FIELDS) == "bool"
    with pytest.raises(Refused):
        type_of(expr, FIELDS, fail)
