"""Worked examples of the accounting rules, and the errors for conversions that are unsound."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dalenius.accounting import (
    DEFINITIONS,
    advanced_composition,
    best_composition,
    cap_as,
    components,
    compose,
    convert,
    definition_of,
    minimum,
    parse_definition,
    pure_to_zcdp,
    shortfall,
    zero_loss,
)
from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import ZCDP, ApproxDP, PureDP

F = Fraction


def test_definitions_round_trip() -> None:
    for definition in DEFINITIONS:
        assert definition_of(zero_loss(definition)) == definition
        assert parse_definition(definition.upper()) == definition
    assert parse_definition("rho") == "zcdp"
    with pytest.raises(ConfigurationError, match="pure, approx, zcdp"):
        parse_definition("renyi")
    with pytest.raises(ConfigurationError):
        definition_of(0.5)  # type: ignore[arg-type]


def test_sequential_composition_by_definition() -> None:
    assert compose([PureDP(F(1, 10))] * 10, "pure") == PureDP(F(1))
    assert compose([ApproxDP(F(1, 2), F(1, 10**6)), PureDP(F(1, 2))], "approx") == ApproxDP(
        F(1), F(1, 10**6)
    )
    assert compose([ZCDP(F(1, 8)), PureDP(F(1))], "zcdp") == ZCDP(F(5, 8))


@pytest.mark.parametrize(
    ("loss", "definition", "message"),
    [
        (ApproxDP(F(1), F(1, 10**6)), "pure", "'approx'"),
        (ApproxDP(F(1), F(1, 10**6)), "zcdp", "'approx'"),
        (ZCDP(F(1)), "approx", "'zcdp'"),
        (ZCDP(F(1)), "pure", "'zcdp'"),
    ],
)
def test_unsound_conversions_say_which_definition_would_work(loss, definition, message) -> None:
    with pytest.raises(ConfigurationError) as caught:
        convert(loss, definition)
    assert message in str(caught.value)
    assert caught.value.why


def test_approx_with_zero_delta_is_pure() -> None:
    assert convert(ApproxDP(F(1, 2), F(0)), "pure") == PureDP(F(1, 2))
    assert convert(ApproxDP(F(1, 2), F(0)), "zcdp") == pure_to_zcdp(F(1, 2)) == ZCDP(F(1, 8))


def test_cap_conversions_round_down_or_refuse() -> None:
    assert cap_as(PureDP(F(1)), "approx") == ApproxDP(F(1), F(0))
    assert cap_as(ApproxDP(F(1), F(1, 10**6)), "pure") == PureDP(F(1))
    assert cap_as(ZCDP(F(1, 2)), "pure") == PureDP(F(1))
    for cap, definition in [
        (PureDP(F(1)), "zcdp"),
        (ApproxDP(F(1), F(0)), "zcdp"),
        (ZCDP(F(1)), "approx"),
    ]:
        with pytest.raises(ConfigurationError):
            cap_as(cap, definition)


def test_shortfall_names_the_component_that_does_not_fit() -> None:
    cap = ApproxDP(F(1), F(1, 10**6))
    spent = ApproxDP(F(1, 2), F(1, 10**6))
    short = shortfall(spent, ApproxDP(F(1, 10), F(1, 10**9)), cap)
    assert short is not None
    assert (short.measure, short.requested, short.remaining) == ("delta", F(1, 10**9), F(0))
    assert shortfall(spent, PureDP(F(1, 2)), cap) is None


def test_minimum_is_component_wise_and_needs_one_definition() -> None:
    assert minimum(ZCDP(F(1)), ZCDP(F(1, 2))) == ZCDP(F(1, 2))
    with pytest.raises(ConfigurationError):
        minimum(ZCDP(F(1)), PureDP(F(1)))


def test_components_are_reported_in_order() -> None:
    assert [name for name, _ in components(ApproxDP(F(1), F(0)))] == ["epsilon", "delta"]
    assert [name for name, _ in components(ZCDP(F(1)))] == ["rho"]


def test_advanced_composition_beats_basic_for_many_small_releases() -> None:
    one = PureDP(F(1, 100))
    advanced = advanced_composition(one, 10_000, F(1, 10**6))
    assert advanced.epsilon < 100  # basic composition would give ε = 100
    assert best_composition(one, 10_000, F(1, 10**6)) == advanced
    assert best_composition(one, 3, F(1, 10**6)) == ApproxDP(F(3, 100), F(0))
    assert advanced_composition(ApproxDP(F(1, 100), F(1, 10**8)), 10, F(1, 10**6)).delta == (
        F(10, 10**8) + F(1, 10**6)
    )


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_advanced_composition_needs_a_positive_integer_k(k) -> None:
    with pytest.raises(ConfigurationError):
        advanced_composition(PureDP(F(1)), k, F(1, 10**6))
