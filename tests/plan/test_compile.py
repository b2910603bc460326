"""Logical query → DP plan: measurements, sharing, caps, sensitivities, selection, ε split."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.errors import PrivacyRefusal
from dalenius.core.loss import ApproxDP, PureDP
from dalenius.mechanisms.partition_selection import laplace_threshold, truncated_selection
from dalenius.plan.compile import caps, to_dp
from dalenius.plan.cost import split_equally
from dalenius.plan.expr import BinOp, Col, Lit, Neg, Not
from dalenius.plan.nodes import DPQuery, Filter, Join, Query
from dalenius.plan.sensitivity import FLOAT_GRID_STEPS, sum_grid, sum_sq_grid
from dalenius.sql.bind import to_query

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def adult(adult_catalog_path: Path) -> Catalog:
    return load_catalog(adult_catalog_path)


@pytest.fixture(scope="module")
def pums(shared_data: Path) -> Catalog:
    return load_catalog(FIXTURES / "pums.toml")


def query(catalog: Catalog, sql: str) -> Query:
    return to_query(sql, catalog).query


def plan(
    catalog: Catalog, sql: str, epsilon: Fraction = Fraction(1), delta: Fraction | None = None
) -> DPQuery:
    return to_dp(query(catalog, sql), epsilon, delta)


def test_avg_is_centred_sum_and_count_sharing_count_star(adult: Catalog) -> None:
    p = plan(adult, "SELECT COUNT(*), AVG(age) FROM adult", Fraction(3, 10))
    assert [m.describe() for m in p.measurements] == ["COUNT(*)", "SUM(adult__age - 48.5)"]
    assert p.measurements[1].sensitivity == Fraction(63, 2)
    assert sum(m.epsilon for m in p.measurements) == Fraction(3, 10)
    assert p.loss == PureDP(Fraction(3, 10))


def test_avg_reuses_a_plain_sum_and_variance_adds_squares(adult: Catalog) -> None:
    p = plan(adult, "SELECT SUM(capital_loss), AVG(capital_loss) FROM adult")
    assert [m.kind for m in p.measurements] == ["sum", "count"]
    p = plan(adult, "SELECT VAR_POP(age) FROM adult")
    assert [m.kind for m in p.measurements] == ["sum", "sum_sq", "count"]


def test_quantiles_share_a_histogram_and_each_selection_costs(adult: Catalog) -> None:
    p = plan(adult, "SELECT MEDIAN(age), MIN(age), COUNT(*) FROM adult", Fraction(1))
    hist = [m for m in p.measurements if m.kind == "histogram"]
    assert len(hist) == 1 and len(hist[0].edges) == 80 - 17 + 2  # one bin per integer age
    shares = [s.epsilon for s in p.statistics if s.kind == "quantile"] + [
        m.epsilon for m in p.measurements if m.kind != "histogram"
    ]
    assert shares == [Fraction(1, 3)] * 3 and sum(shares) == 1


def test_id_unit_caps_multiply_sensitivity(pums: Catalog) -> None:
    p = plan(pums, "SELECT COUNT(*), SUM(age), COUNT(DISTINCT pid) FROM pums")
    count, total, distinct = p.measurements
    assert (count.sensitivity, total.sensitivity, distinct.sensitivity) == (2, 200, 2)


def test_join_multiplicity_multiplies_row_sensitivity(adult: Catalog) -> None:
    q = query(adult, "SELECT COUNT(*) FROM adult a JOIN edu_levels l ON a.education = l.education")
    assert isinstance(q.relation, Join)
    q = replace(q, relation=replace(q.relation, multiplicity=3))
    assert caps(q) == (3, 3)
    assert to_dp(q, Fraction(1)).measurements[0].sensitivity == 3


def test_private_keys_need_delta_and_get_a_threshold(adult: Catalog) -> None:
    with pytest.raises(PrivacyRefusal, match="needs a delta"):
        plan(adult, "SELECT occupation, COUNT(*) FROM adult GROUP BY occupation")
    p = plan(
        adult,
        "SELECT occupation, COUNT(*) FROM adult GROUP BY occupation",
        Fraction(1),
        Fraction(1, 10**6),
    )
    assert p.selection is not None and p.selection.shared  # COUNT(*) counts units: reused for free
    calibration = truncated_selection(Fraction(1), Fraction(1, 10**6))
    assert (p.selection.threshold, p.selection.mix) == (calibration.threshold, calibration.mix)
    # Truncation spends δ exactly, so the threshold is below the untruncated one.
    assert p.selection.threshold < laplace_threshold(
        Fraction(1), Fraction(1, 10**6), groups=1, max_count=1
    )
    assert p.loss == ApproxDP(Fraction(1), Fraction(1, 10**6))


def test_selection_of_an_id_unit_counts_distinct_units(pums: Catalog) -> None:
    p = plan(
        pums, "SELECT income, AVG(age) FROM pums GROUP BY income", Fraction(1), Fraction(1, 10**5)
    )
    assert p.selection is not None and not p.selection.shared
    selector = p.measurement(p.selection.measurement)
    assert selector.kind == "count_distinct" and selector.distinct_unit


@given(st.fractions(min_value=Fraction(1, 10**6), max_value=100), st.integers(1, 50))
def test_split_sums_to_the_total(epsilon: Fraction, parts: int) -> None:
    shares = split_equally(epsilon, parts)
    assert sum(shares) == epsilon and len(shares) == parts


@given(
    st.fractions(min_value=-(10**9), max_value=10**9),
    st.fractions(min_value=0, max_value=10**9),
    st.sampled_from(["int", "float"]),
)
def test_grids_never_understate_a_row(low: Fraction, width: Fraction, col_type: str) -> None:
    bounds = (low, low + width)
    if col_type == "int":
        bounds = (Fraction(math.floor(low)), Fraction(math.floor(low + width)))
    center = (bounds[0] + bounds[1]) / 2
    g, units = sum_grid(bounds, center, col_type)
    reach = max(abs(bounds[0] - center), abs(bounds[1] - center))
    assert units * g >= reach
    g2, units2 = sum_sq_grid(bounds, center, col_type)
    assert units2 * g2 >= reach * reach
    assert units2 <= max(FLOAT_GRID_STEPS, 2**52)


def test_fingerprints_tell_apart_similar_plans(adult: Catalog) -> None:
    base = query(adult, "SELECT COUNT(*) FROM adult WHERE age > 1")
    variants = [
        replace(base, relation=Filter(base.relation.child, Not(Col("adult__age")))),  # type: ignore[union-attr]
        replace(base, relation=Filter(base.relation.child, Neg(Col("adult__age")))),  # type: ignore[union-attr]
        replace(
            base, relation=Filter(base.relation.child, BinOp(">", Col("adult__age"), Lit(1.0)))
        ),  # type: ignore[union-attr]
        base,
    ]
    prints = [to_dp(q, Fraction(1)).fingerprint() for q in variants]
    assert len(set(prints)) == 4
    assert to_dp(base, Fraction(1)).fingerprint() == prints[-1]


def test_a_sum_whose_noise_would_pass_2_40_steps_is_summed_on_a_coarser_grid() -> None:
    """A money column (bounds [0, 105000]) summed over 280 rows per person at a small ε share:
    on the bounds' own grid the noise would be 2^43 steps. The plan coarsens the grid until it
    fits, and the per-row bound it charges still covers every clipped value.
    """
    import numpy as np
    import pandas as pd
    from tests.support.exact import exact_units_for

    import dalenius
    from dalenius.core.catalog import Catalog
    from dalenius.mechanisms._dlaplace import MAX_SCALE

    rng = np.random.Generator(np.random.PCG64(4))  # test data only
    frame = pd.DataFrame({"pid": np.arange(900) // 3, "price": rng.uniform(0, 105000, 900)})
    heavy = pd.DataFrame({"pid": [10_000] * 400, "price": [105000.0] * 400})
    doc = {
        "privacy_unit": {"column": "pid", "max_rows": 280},
        "columns": {"pid": "int", "price": {"type": "float", "bounds": [0, 105000]}},
    }
    light = dalenius.connect(
        Catalog.from_dict({"tables": {"t": {"source": frame, **doc}}}), ledger="memory:", budget=1
    )
    both = dalenius.connect(
        Catalog.from_dict({"tables": {"t": {"source": pd.concat([frame, heavy]), **doc}}}),
        ledger="memory:",
        budget=1,
    )
    sql = "SELECT SUM(price) FROM t"
    plan = light.plan(sql, epsilon=Fraction(1, 100))
    (m,) = plan.measurements
    assert Fraction(m.sensitivity_units) / m.epsilon <= MAX_SCALE
    assert m.granularity > Fraction(1, 2**13)  # the bounds alone give 2^-13 (105000 / 2^30)
    assert m.row_units * m.granularity >= 105000 and m.sensitivity_units == 280 * m.row_units
    without = exact_units_for(light, sql, Fraction(1, 100), salt=5)["m0"]
    with_unit = exact_units_for(both, sql, Fraction(1, 100), salt=5)["m0"]
    assert 0 < abs(with_unit[0] - without[0]) <= m.sensitivity_units
    result = light.query(sql, epsilon=Fraction(1, 100))
    low, value, high = (result.to_pandas().iloc[0, i] for i in (1, 0, 2))
    assert low <= value <= high


def test_a_sum_too_noisy_for_any_grid_is_refused_quickly() -> None:
    """With an ε so small that even one step per row passes 2^40, coarsening stops at one step
    per row and the plan is refused when its mechanism is built (a hostile input once looped)."""
    import pandas as pd

    import dalenius
    from dalenius.core.catalog import Catalog
    from dalenius.core.errors import ConfigurationError

    frame = pd.DataFrame({"pid": [1, 2], "price": [1.0, 2.0]})
    doc = {
        "source": frame,
        "privacy_unit": {"column": "pid", "max_rows": 1000},
        "columns": {"pid": "int", "price": {"type": "float", "bounds": [0, 1e12]}},
    }
    session = dalenius.connect(
        Catalog.from_dict({"tables": {"t": doc}}), ledger="memory:", budget=1
    )
    with pytest.raises(ConfigurationError, match="2\\*\\*40"):
        session.plan("SELECT SUM(price) FROM t", epsilon=Fraction(1, 10**12))
