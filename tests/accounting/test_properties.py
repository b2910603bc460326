"""Property tests of the loss arithmetic: composition, conversions, budget checks, bad input."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dalenius.accounting import (
    advanced_composition,
    approx_to_zcdp_cap,
    cap_as,
    compose,
    compose_counted,
    convert,
    fits,
    leq,
    parallel,
    remaining,
    zcdp_to_approx,
)
from dalenius.core.errors import InvalidLossError
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP, as_fraction

amounts = st.fractions(min_value=0, max_value=50, max_denominator=10**6)
deltas = st.fractions(min_value=0, max_value=Fraction(1, 10**3), max_denominator=10**12)
open_deltas = st.fractions(
    min_value=Fraction(1, 10**15), max_value=Fraction(1, 2), max_denominator=10**15
)

pure = st.builds(PureDP, amounts)
approx = st.builds(ApproxDP, amounts, deltas)
zcdp = st.builds(ZCDP, amounts)
by_definition = {"pure": pure, "approx": st.one_of(approx, pure), "zcdp": st.one_of(zcdp, pure)}


@st.composite
def loss_lists(draw: st.DrawFn) -> tuple[str, list[Loss]]:
    definition = draw(st.sampled_from(sorted(by_definition)))
    return definition, draw(st.lists(by_definition[definition], max_size=8))


def ref_zcdp_epsilon(rho: Fraction, delta: Fraction) -> Decimal:
    """ρ + 2·√(ρ·ln(1/δ)) at 60 digits (correctly rounded decimal functions)."""
    with localcontext() as context:
        context.prec = 60
        r = Decimal(rho.numerator) / Decimal(rho.denominator)
        d = Decimal(delta.numerator) / Decimal(delta.denominator)
        return r + 2 * (r * (1 / d).ln()).sqrt()


# -- composition ---------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(loss_lists(), st.data())
def test_counted_composition_equals_composing_every_copy(
    case: tuple[str, list[Loss]], data: st.DataObject
) -> None:
    definition, losses = case
    counts = [data.draw(st.integers(0, 5)) for _ in losses]
    expanded = [loss for loss, n in zip(losses, counts, strict=True) for _ in range(n)]
    assert compose_counted(zip(losses, counts, strict=True), definition) == compose(
        expanded, definition
    )
    with pytest.raises(ValueError, match="composed"):
        compose_counted([(PureDP(Fraction(1)), -1)], "pure")


@settings(max_examples=100, deadline=None)
@given(loss_lists(), st.data())
def test_composition_is_monotone(case: tuple[str, list[Loss]], data: st.DataObject) -> None:
    definition, losses = case
    extra = data.draw(by_definition[definition])
    before = compose(losses, definition)
    after = compose([*losses, extra], definition)
    assert leq(before, after)
    assert leq(convert(extra, definition), after)


@settings(max_examples=100, deadline=None)
@given(loss_lists(), loss_lists())
def test_composition_is_associative_and_order_free(
    left: tuple[str, list[Loss]], right: tuple[str, list[Loss]]
) -> None:
    definition, a = left
    b = [x for x in right[1] if _convertible(x, definition)]
    whole = compose([*a, *b], definition)
    assert compose([compose(a, definition), compose(b, definition)], definition) == whole
    assert compose([*reversed(b), *reversed(a)], definition) == whole


def _convertible(loss: Loss, definition: str) -> bool:
    if definition == "pure":
        return isinstance(loss, PureDP) or (isinstance(loss, ApproxDP) and loss.delta == 0)
    if definition == "zcdp":
        return not isinstance(loss, ApproxDP) or loss.delta == 0
    return not isinstance(loss, ZCDP)


@settings(max_examples=100, deadline=None)
@given(loss_lists())
def test_parallel_composition_is_the_maximum_and_never_exceeds_sequential(
    case: tuple[str, list[Loss]],
) -> None:
    definition, losses = case
    best = parallel(losses, definition)
    assert leq(best, compose(losses, definition))
    for loss in losses:
        assert leq(convert(loss, definition), best)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["pure", "approx", "zcdp"]), st.data())
def test_fits_agrees_with_remaining(definition: str, data: st.DataObject) -> None:
    native = {"pure": pure, "approx": approx, "zcdp": zcdp}[definition]
    spent, request, cap = (data.draw(native) for _ in range(3))
    assert fits(spent, request, cap) == leq(compose([spent, request], definition), cap)
    if leq(spent, cap):
        assert fits(spent, request, cap) == leq(request, remaining(spent, cap))


# -- conversions -----------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(amounts, open_deltas)
def test_zcdp_to_approx_is_never_below_the_formula(rho: Fraction, delta: Fraction) -> None:
    converted = zcdp_to_approx(rho, delta)
    reference = ref_zcdp_epsilon(rho, delta)
    assert Decimal(converted.epsilon.numerator) / Decimal(converted.epsilon.denominator) >= (
        reference - Decimal(10) ** -50
    )
    assert converted.epsilon - Fraction(reference) <= Fraction(1, 10**30)  # and it is tight
    assert converted.delta == delta


@settings(max_examples=200, deadline=None)
@given(amounts)
def test_pure_to_zcdp_is_exactly_half_the_square(epsilon: Fraction) -> None:
    assert convert(PureDP(epsilon), "zcdp") == ZCDP(epsilon**2 / 2)
    assert convert(PureDP(epsilon), "approx") == ApproxDP(epsilon, Fraction(0))


@settings(max_examples=100, deadline=None)
@given(st.fractions(min_value=Fraction(1, 100), max_value=20, max_denominator=1000), open_deltas)
def test_zcdp_cap_from_approx_is_safe_and_nearly_tight(epsilon: Fraction, delta: Fraction) -> None:
    cap = approx_to_zcdp_cap(epsilon, delta)
    assert zcdp_to_approx(cap.rho, delta).epsilon <= epsilon  # safe by our own upward bound
    assert float(ref_zcdp_epsilon(cap.rho, delta)) <= float(epsilon)
    log = math.log(1 / float(delta))
    ideal = (math.sqrt(log + float(epsilon)) - math.sqrt(log)) ** 2
    assert float(cap.rho) == pytest.approx(ideal, rel=1e-9)


@settings(max_examples=100, deadline=None)
@given(amounts)
def test_zcdp_cap_on_a_pure_dataset_rounds_down(rho: Fraction) -> None:
    cap = cap_as(ZCDP(rho), "pure")
    assert isinstance(cap, PureDP)
    assert cap.epsilon**2 / 2 <= rho


@settings(max_examples=100, deadline=None)
@given(
    st.fractions(min_value=0, max_value=2, max_denominator=1000),
    st.integers(min_value=1, max_value=10**4),
    open_deltas,
)
def test_advanced_composition_is_never_below_the_formula(
    epsilon: Fraction, k: int, slack: Fraction
) -> None:
    result = advanced_composition(PureDP(epsilon), k, slack)
    with localcontext() as context:
        context.prec = 60
        e = Decimal(epsilon.numerator) / Decimal(epsilon.denominator)
        d = Decimal(slack.numerator) / Decimal(slack.denominator)
        reference = e * (2 * k * (1 / d).ln()).sqrt() + k * e * (e.exp() - 1)
    assert Fraction(reference) - result.epsilon <= Fraction(1, 10**40)
    assert result.epsilon - Fraction(reference) <= Fraction(1, 10**25) * max(1, k)
    assert result.delta == slack


# -- invalid losses --------------------------------------------------------------------------


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_invalid_numbers_are_rejected(value: float) -> None:
    assume(not math.isfinite(value) or value < 0)
    for name in ("epsilon", "delta", "rho"):
        with pytest.raises(InvalidLossError):
            as_fraction(value, name)


@given(st.fractions(max_value=Fraction(-1, 10**9)))
def test_negative_losses_are_rejected(value: Fraction) -> None:
    with pytest.raises(InvalidLossError):
        PureDP(value)
    with pytest.raises(InvalidLossError):
        ZCDP(value)
    with pytest.raises(InvalidLossError):
        ApproxDP(Fraction(1), value)


@given(st.fractions(min_value=1, max_value=10**6))
def test_delta_of_one_or_more_is_rejected(delta: Fraction) -> None:
    with pytest.raises(InvalidLossError):
        ApproxDP(Fraction(1), delta)
    with pytest.raises(InvalidLossError):
        zcdp_to_approx(Fraction(1), delta)
    with pytest.raises(InvalidLossError):
        advanced_composition(PureDP(Fraction(1)), 3, delta)


@given(st.lists(st.fractions(min_value=Fraction(1, 2), max_value=Fraction(9, 10)), min_size=2))
def test_composed_delta_reaching_one_is_rejected(values: list[Fraction]) -> None:
    with pytest.raises(InvalidLossError):
        compose([ApproxDP(Fraction(1), d) for d in values], "approx")
