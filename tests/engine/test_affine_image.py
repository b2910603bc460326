"""A derived output's interval when it is affine in one aggregate (``0.2 * AVG(x)``, a
correlated subquery's thousands of values): the ends taken at the aggregate's interval ends are
the ends interval arithmetic derives (:func:`dalenius.plan.derive.bounds_of`), bit for bit."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from dalenius.engine.postprocess import _affine_image, _image, _num
from dalenius.plan.derive import FieldInfo, bounds_of
from dalenius.plan.expr import BinOp, Col, Expr, Func, Lit, Neg

REF = "@a0"

constants = st.one_of(
    st.integers(-1000, 1000),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
).map(Lit)


def affine(depth: int = 3) -> st.SearchStrategy[Expr]:
    """Expressions affine in REF: the reference, constants, +, -, negation, products with a
    constant and quotients by a double constant."""
    if depth == 0:
        return st.just(Col(REF))
    inner = affine(depth - 1)
    return st.one_of(
        st.just(Col(REF)),
        st.builds(lambda a, c: BinOp("+", a, c), inner, constants),
        st.builds(lambda c, a: BinOp("-", c, a), constants, inner),
        st.builds(lambda a, c: BinOp("*", a, c), inner, constants),
        st.builds(lambda c, a: BinOp("*", c, a), constants, inner),
        st.builds(
            lambda a, c: BinOp("/", a, Lit(c)),
            inner,
            st.floats(0.01, 100).flatmap(lambda v: st.sampled_from([v, -v])),
        ),
        st.builds(Neg, inner),
    )


ends = st.one_of(
    st.tuples(st.integers(-(10**9), 10**9), st.integers(0, 10**9)).map(
        lambda t: (t[0], t[0] + t[1])
    ),
    st.tuples(st.floats(-1e9, 1e9, allow_nan=False), st.floats(0, 1e9, allow_nan=False)).map(
        lambda t: (t[0], t[0] + t[1])
    ),
)


def by_interval_arithmetic(expr: Expr, low: float, high: float) -> tuple[object, object]:
    kind = "int" if isinstance(low, int) else "float"
    info = FieldInfo(kind, (Fraction(low), Fraction(high)), None, True)
    enclosure = bounds_of(expr, {REF: info})
    assert enclosure is not None
    return _num(enclosure[0]), _num(enclosure[1])


@settings(max_examples=400, deadline=None)
@given(affine(), ends)
def test_the_ends_of_an_affine_output_are_those_interval_arithmetic_derives(
    expr: Expr, interval: tuple[float, float]
) -> None:
    low, high = interval
    fast = _affine_image(expr, REF, low, high)
    assert fast is not None
    derived = by_interval_arithmetic(expr, low, high)
    assert fast == derived
    assert [type(a) for a in fast] == [type(b) for b in derived]


def test_what_is_not_affine_in_the_aggregate_alone_is_left_to_interval_arithmetic() -> None:
    ref = Col(REF)
    not_affine = [
        BinOp("*", ref, ref),  # a square
        BinOp("/", ref, Lit(2)),  # an integer divisor may truncate
        BinOp("/", Lit(1.0), ref),  # a reciprocal
        BinOp("/", ref, Lit(0.0)),
        BinOp("+", ref, Col("@a1")),  # another aggregate
        BinOp("+", ref, Lit(math.inf)),
        BinOp("+", ref, Lit(None)),
        Func("ABS", (ref,)),
    ]
    for expr in not_affine:
        assert _affine_image(expr, REF, -1.0, 2.0) is None, expr
    assert _affine_image(BinOp("*", Lit(0.2), ref), REF, -math.inf, 2.0) is None


def test_the_released_value_stays_inside_its_interval() -> None:
    expr = BinOp("*", Lit(0.2), Col(REF))
    # A released value outside the image (rounding of the post-processing) widens it.
    low, high = _image(expr, {REF: 5.0}, REF, 4.0, 6.0, 1.3)
    assert (low, high) == (0.8, 1.3)
    assert _image(expr, {REF: 5.0}, REF, 4.0, 6.0, None) == (None, None)
