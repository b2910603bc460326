"""A sum's cells post-processed with numpy are the loop's cells, bit for bit and type for type.

:func:`dalenius.engine.postprocess._sums_at_once` turns the noisy grid units of a sum's cells
into values and interval ends in one pass over arrays (a public table's 100,000 keys spent a
third of a second in the loop). The published answer must not change: every value is compared
with what the loop over ``_clamp_units`` and ``_scaled`` gives, including its type (an exact
multiple of the grid is released as an integer), for values near the fast path's limits, and the
cases it leaves to the loop are checked to be left.
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from dalenius.engine.postprocess import _AT_ONCE, _clamp_units, _scaled, _sums_at_once


def _loop(
    vals: list[int], h: int, lo: int | None, hi: int | None, g: Fraction
) -> tuple[list, list, list]:
    units = [_clamp_units(v, lo, hi) for v in vals]
    return (
        [_scaled(u, g) for u in units],
        [_scaled(_clamp_units(u - h, lo, hi), g) for u in units],
        [_scaled(_clamp_units(u + h, lo, hi), g) for u in units],
    )


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        type(x) is type(y) and x == y for x, y in zip(a, b, strict=True)
    )


UNITS = st.one_of(
    st.integers(-1000, 1000),
    st.integers(-_AT_ONCE, _AT_ONCE),
    st.integers(2**53 - 5, 2**53 + 5),  # where a double stops holding every integer
    st.sampled_from([-_AT_ONCE, _AT_ONCE, 0]),
)


@given(
    vals=st.lists(UNITS, min_size=1, max_size=40),
    h=st.one_of(st.integers(0, 10**6), st.integers(0, _AT_ONCE)),
    sign=st.sampled_from([(None, None), (0, None), (None, 0)]),
    k=st.integers(1, 61),
)
def test_the_cells_are_the_loops(
    vals: list[int], h: int, sign: tuple[int | None, int | None], k: int
) -> None:
    g = Fraction(1, 2**k)
    lo, hi = sign
    fast = _sums_at_once(vals, h, lo, hi, g)
    assert fast is not None
    for at_once, looped in zip(fast, _loop(vals, h, lo, hi, g), strict=True):
        assert _same(at_once, looped)


def test_what_it_leaves_to_the_loop() -> None:
    half = Fraction(1, 2)
    assert _sums_at_once([1, 2], 1, None, None, Fraction(1)) is None  # an integer grid
    assert _sums_at_once([1, 2], 1, None, None, Fraction(3, 4)) is None  # not 2**-k
    assert _sums_at_once([1, 2], 1, None, None, Fraction(1, 6)) is None
    assert _sums_at_once([_AT_ONCE + 1], 1, None, None, half) is None  # too large a value
    assert _sums_at_once([-_AT_ONCE - 1], 1, None, None, half) is None
    assert _sums_at_once([1], _AT_ONCE + 1, None, None, half) is None  # too wide an error bar
    assert _sums_at_once([], 1, None, None, half) is None
