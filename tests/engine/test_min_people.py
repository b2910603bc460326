"""The catalog's ``min_people`` rule: a noisy threshold on each cell's count of people.

Checked exactly on tiny cases (rational noise ratio ``a``, as in the partition-selection tests):
the rule's failure bound is the exact probability that a cell of ``k − 1`` people passes, and the
whole release under the rule costs no more than without it on every neighbour pair. Then through
the production path: a cell of 3 people is not released at ``k = 10``, a released cell's noisy
count is never below the threshold (the decision reads the noisy count, not the exact one),
``explain`` states the rule, and a malformed ``min_people`` is refused naming the key.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from tests.support.exact import exact_units_for
from tests.support.seeded import SeededRandom

from dalenius.core.catalog import Catalog, load_catalog, parse_catalog
from dalenius.core.errors import CatalogError
from dalenius.core.loss import PureDP
from dalenius.engine.noise import audited_loss, build_mechanisms
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger
from dalenius.mechanisms._dlaplace import laplace_sampler
from dalenius.mechanisms.partition_selection import (
    Powers,
    SelectionCalibration,
    calibrate,
    select_groups,
)
from dalenius.plan.min_people import min_people_rule
from dalenius.plan.nodes import Measurement, Selection
from dalenius.plan.protocol import LossDefect

COUNT = Measurement("m0", "count", None, "int", None, Fraction(0), Fraction(1), 1, 1, Fraction(1))


# -- exact distributions ------------------------------------------------------------------------


def laplace_tail(a: Fraction, m: int) -> Fraction:
    """Exact ``P(Z >= m)`` for discrete Laplace ``P(z) ∝ a^|z|``."""
    if m >= 1:
        return a**m / (1 + a)
    return 1 - a ** (1 - m) / (1 + a)


def public_cell(a: Fraction, n: int, threshold: int, window: int) -> dict[int | None, Fraction]:
    """Exact distribution of one public cell under the rule: its noisy count, or None (hidden).

    Released values ``threshold .. threshold + window`` are listed; the mass above is lumped
    under ``threshold + window + 1`` (its likelihood ratio between neighbours is ``1/a`` too).
    """
    out: dict[int | None, Fraction] = {None: 1 - laplace_tail(a, threshold - n)}
    for v in range(threshold, threshold + window + 1):
        out[v] = (1 - a) / (1 + a) * a ** abs(v - n)
    out[threshold + window + 1] = laplace_tail(a, threshold + window + 1 - n)
    return out


def truncated(a: Fraction, k: int) -> dict[int, Fraction]:
    norm = sum(a ** abs(z) for z in range(-k, k + 1))
    return {z: a ** abs(z) / norm for z in range(-k, k + 1)}


def private_cell(
    a: Fraction, cal: SelectionCalibration, n: int, threshold: int
) -> dict[int | None, Fraction]:
    """Exact distribution of one private-key cell: truncated selection, then the rule."""
    if n == 0:
        return {None: Fraction(1)}
    out: dict[int | None, Fraction] = Counter()
    for k, weight in ((cal.truncation, cal.mix), (cal.truncation + 1, 1 - cal.mix)):
        for z, p in truncated(a, k).items():
            v = n + z
            out[v if v > k and v >= threshold else None] += weight * p
    return dict(out)


def hockey_stick(p: dict, q: dict, factor: Fraction) -> Fraction:  # type: ignore[type-arg]
    return sum(
        (max(Fraction(0), pr - factor * q.get(o, Fraction(0))) for o, pr in p.items()), Fraction(0)
    )


@pytest.mark.parametrize("a", [Fraction(1, 2), Fraction(2, 3)])
@pytest.mark.parametrize(("people", "per_group"), [(2, 1), (5, 1), (3, 2)])
def test_public_cells_the_bound_is_the_exact_pass_probability_and_costs_nothing(
    a: Fraction, people: int, per_group: int
) -> None:
    failure = Fraction(1, 1000)
    rule = min_people_rule(COUNT, people, per_group, None, failure=failure, powers=Powers(base=a))
    most = per_group * (people - 1)
    # Tight: a cell of k − 1 people (counting ``most``) passes with exactly the stated probability.
    released = 1 - public_cell(a, most, rule.threshold, 40)[None]
    assert released == rule.failure <= failure
    # The smallest such threshold: one lower would break the bound.
    assert 1 - public_cell(a, most, rule.threshold - 1, 40)[None] > failure
    # Smaller cells pass less often.
    for n in range(most):
        assert 1 - public_cell(a, n, rule.threshold, 40)[None] < rule.failure
    # Post-processing of the ε-DP count: every neighbour pair (n, n + d), d <= per_group, stays
    # within e^(d·ε) with nothing left over (δ = 0).
    for n in range(rule.threshold + 6):
        for d in range(1, per_group + 1):
            low = public_cell(a, n, rule.threshold, 40 + d)
            high = public_cell(a, n + d, rule.threshold, 40 + d)
            factor = a**-d
            assert hockey_stick(low, high, factor) == 0
            assert hockey_stick(high, low, factor) == 0


@pytest.mark.parametrize(
    ("a", "target"), [(Fraction(1, 2), Fraction(1, 20)), (Fraction(3, 5), Fraction(1, 8))]
)
@pytest.mark.parametrize("people", [2, 4])
def test_private_cells_keep_the_selections_delta_and_the_stated_bound(
    a: Fraction, target: Fraction, people: int
) -> None:
    cal = calibrate(Powers(base=a), target, groups=1, max_count=1, sensitivity=1)
    selection = Selection("m0", cal.threshold, target, True, cal.mix)
    failure = Fraction(1, 1000)
    rule = min_people_rule(COUNT, people, 1, selection, failure=failure, powers=Powers(base=a))
    passed = 1 - private_cell(a, cal, people - 1, rule.threshold)[None]
    assert passed <= rule.failure <= failure
    assert passed == rule.failure  # the truncated tail is exact for a rational ratio
    # Selection then rule, on every neighbour pair of counts: no more than the selection's δ.
    factor = 1 / a
    for n in range(rule.threshold + 6):
        low = private_cell(a, cal, n, rule.threshold)
        high = private_cell(a, cal, n + 1, rule.threshold)
        assert hockey_stick(low, high, factor) <= cal.delta
        assert hockey_stick(high, low, factor) <= cal.delta


def test_a_cell_of_three_never_passes_k_ten_under_seeded_noise() -> None:
    rng = SeededRandom(35)
    scale = Fraction(1)
    rule = min_people_rule(COUNT, 10, 1, None)  # the production noise: scale 1 at ε = 1
    assert rule.threshold == 23
    draws = 3 + laplace_sampler(scale).sample(200_000, rng)
    assert int((draws >= rule.threshold).sum()) == 0
    # Private keys: the truncated selection's counts, then the rule.
    cal = SelectionCalibration(13, Fraction(1, 2), Fraction(1, 10**6))
    selection = Selection("m0", cal.threshold, cal.delta, True, cal.mix)
    rule = min_people_rule(COUNT, 10, 1, selection)
    noisy, mask = select_groups(np.full(200_000, 3, dtype=np.int64), scale, cal, rng)
    assert int((mask & (noisy >= rule.threshold)).sum()) == 0


# -- through the session ------------------------------------------------------------------------

CATALOG = """
[dataset]
name = "cells"
{rule}

[tables.t]
source = {{ csv = "t.csv" }}
privacy_unit = {unit}

[tables.t.columns]
g = {{ type = "str", keys = ["small", "edge", "large"] }}
pid = {{ type = "int" }}
x = {{ type = "int", bounds = [0, 10] }}
"""


def session_for(
    folder: Path, sizes: dict[str, int], rule: str = "min_people = 10", unit: str = '"row"'
) -> Session:
    folder.mkdir(exist_ok=True)
    rows = ["g,pid,x"]
    pid = 0
    for group, n in sizes.items():
        for _ in range(n):
            rows.append(f"{group},{pid},{pid % 11}")
            pid += 1
    (folder / "t.csv").write_text("\n".join(rows) + "\n")
    (folder / "cat.toml").write_text(CATALOG.format(rule=rule, unit=unit))
    catalog = load_catalog(folder / "cat.toml")
    return fresh(catalog, DuckDBExecutor(catalog))


def fresh(catalog: Catalog, executor: DuckDBExecutor) -> Session:
    """A session with a fresh ledger: no cached answer, so each query draws fresh noise."""
    ledger = open_ledger(None)
    ledger.set_budget("analyst", catalog.name, PureDP(Fraction(10**5)))
    return Session(catalog, ledger=ledger, executor=executor)


def test_small_cells_are_hidden_and_released_counts_reach_the_noisy_threshold(
    tmp_path: Path,
) -> None:
    # 'edge' holds exactly the threshold (23 at ε = 1): an exact rule would always release it,
    # with noisy counts below 23 about half the time; the noisy rule never shows one below 23.
    session = session_for(tmp_path / "d", {"small": 3, "edge": 23, "large": 400})
    sql = "SELECT g, COUNT(*) AS n FROM t GROUP BY g"
    assert session.prepare(sql, 1).plan.min_people.threshold == 23  # type: ignore[union-attr]
    runs, edge = 150, 0
    executor = DuckDBExecutor(session.catalog)
    for _ in range(runs):
        rows = dict(fresh(session.catalog, executor).query(sql, epsilon=1).rows)
        assert "small" not in rows
        assert "large" in rows
        if "edge" in rows:
            edge += 1
            assert rows["edge"] >= 23
    # Released iff 23 + Z >= 23: probability 1/(1 + e^-1) ≈ 0.731.
    p = 1 / (1 + np.exp(-1))
    assert stats.binomtest(edge, runs, p).pvalue > 1e-6


def test_a_whole_table_aggregate_below_the_rule_is_not_released(tmp_path: Path) -> None:
    session = session_for(tmp_path / "d", {"small": 3}, rule="min_people = 1000")
    answer = session.query("SELECT SUM(x) AS s FROM t", epsilon=1)
    assert answer.rows == ()
    # The answer says why a cell may be missing (from the plan, whatever the data).
    assert any(note.startswith("min_people = 1000 (catalog)") for note in answer.notes)
    # And with people enough, it is.
    session = session_for(tmp_path / "e", {"large": 3000}, rule="min_people = 10")
    assert len(session.query("SELECT SUM(x) AS s FROM t", epsilon=1).rows) == 1


def test_explain_states_the_rule_and_its_count_is_charged(tmp_path: Path) -> None:
    session = session_for(tmp_path / "d", {"small": 3, "large": 400})
    shared = session.explain("SELECT g, COUNT(*) FROM t GROUP BY g", epsilon=1)
    rule = shared.to_dict()["min_people"]
    assert rule["people"] == 10 and rule["threshold"] == 23 and rule["measurement"] == "m0"
    assert 0 < rule["failure"] <= 1e-6
    assert "min_people = 10 (catalog)" in str(shared) and "not a privacy δ" in str(shared)
    assert "every key is answered" not in str(shared)
    # Without a count of people the rule adds one, charged in the ε split and marked.
    added = session.explain("SELECT g, SUM(x) FROM t GROUP BY g", epsilon=1)
    labels = [m["aggregate"] for m in added.to_dict()["measurements"]]
    assert labels == ["SUM(x)", "COUNT(*) [min_people]"]
    assert [m["epsilon"] for m in added.to_dict()["measurements"]] == [0.5, 0.5]
    # No rule, nothing said.
    plain = session_for(tmp_path / "e", {"small": 3}, rule="")
    assert "min_people" not in plain.explain("SELECT COUNT(*) FROM t", epsilon=1).to_dict()


def test_the_rule_for_an_id_unit_counts_distinct_people_and_its_audit_holds(
    tmp_path: Path,
) -> None:
    unit = '{ column = "pid", max_rows = 3, max_groups = 2 }'
    session = session_for(tmp_path / "d", {"small": 3, "large": 50}, unit=unit)
    sql = "SELECT g, COUNT(*) AS n FROM t GROUP BY g"
    plan = session.prepare(sql, 1).plan
    rule = plan.min_people
    assert rule is not None
    people = plan.measurement(rule.measurement)
    assert people.kind == "count_distinct" and people.sensitivity_units == 2
    # The audited loss is the charged ε: the people count is inside the split.
    assert audited_loss(plan, build_mechanisms(plan)) == plan.loss
    # Neighbours: removing one person moves the exact people counts by <= 1 per group and by
    # <= the charged sensitivity in all.
    full = exact_units_for(session, sql)[rule.measurement]
    # The same data without one person of 'small' (the people counts read no other column).
    neighbour = session_for(tmp_path / "e", {"small": 2, "large": 50}, unit=unit)
    fewer = exact_units_for(neighbour, sql)[rule.measurement]
    moves = [abs(x - y) for x, y in zip(full, fewer, strict=True)]
    assert max(moves) <= 1 and sum(moves) <= people.sensitivity_units and sum(moves) == 1
    # A rule reading anything but a noisy count would read exact values: a defect.
    broken = replace(plan, min_people=replace(rule, measurement="m_missing"))
    with pytest.raises((LossDefect, KeyError)):
        audited_loss(broken, build_mechanisms(broken))


def test_a_private_key_query_uses_the_selections_count(tmp_path: Path) -> None:
    unit = '{ column = "pid", max_rows = 5, max_groups = 5 }'
    sql = "SELECT pid, COUNT(*) FROM t GROUP BY pid"
    delta = Fraction(1, 10**6)
    # Without the rule, a person holding up to 5 groups gets weighted Gaussian selection ...
    plain = session_for(tmp_path / "e", {"large": 50}, rule="", unit=unit)
    weighted = plain.prepare(sql, 1, delta).plan
    assert weighted.selection is not None
    assert weighted.measurement(weighted.selection.measurement).kind == "degrees"
    # ... with it, truncated selection, whose noisy count of people the rule reads.
    session = session_for(tmp_path / "d", {"large": 50}, unit=unit)
    plan = session.prepare(sql, 1, delta).plan
    assert plan.selection is not None and plan.min_people is not None
    assert plan.min_people.measurement == plan.selection.measurement
    assert plan.measurement(plan.selection.measurement).kind == "count_distinct"
    assert audited_loss(plan, build_mechanisms(plan)) == plan.loss


@pytest.mark.parametrize("value", ["1", "0", "-3", "2.5", '"10"', "true", "1000001"])
def test_a_malformed_min_people_is_refused_naming_the_key_and_the_fix(
    value: str, tmp_path: Path
) -> None:
    text = CATALOG.format(rule=f"min_people = {value}", unit='"row"')
    (tmp_path / "t.csv").write_text("g,pid,x\n")
    with pytest.raises(CatalogError) as info:
        parse_catalog(text, base_dir=tmp_path)
    message = str(info.value)
    assert "min_people" in message and "min_people = 10" in message


def test_min_people_is_read_from_the_catalog(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("g,pid,x\n")
    five = CATALOG.format(rule="min_people = 5", unit='"row"')
    assert parse_catalog(five, base_dir=tmp_path).min_people == 5
    none = CATALOG.format(rule="", unit='"row"')
    assert parse_catalog(none, base_dir=tmp_path).min_people is None


def test_an_error_target_gives_the_rules_own_count_a_share_and_says_so(tmp_path: Path) -> None:
    session = session_for(tmp_path / "d", {"small": 3, "large": 400})
    explained = session.explain("SELECT g, SUM(x) FROM t GROUP BY g", target_error=50)
    measurements = explained.to_dict()["measurements"]
    assert [m["aggregate"] for m in measurements] == ["SUM(x)", "COUNT(*) [min_people]"]
    # The people count has no target of its own: it gets the largest share, and a note says so.
    assert measurements[1]["epsilon"] == max(m["epsilon"] for m in measurements) > 0
    assert explained.accuracy is not None
    assert any("min_people rule thresholds" in note for note in explained.accuracy.notes)
    assert explained.loss.epsilon == sum(  # type: ignore[union-attr]
        Fraction(m["epsilon_exact"]) for m in measurements
    )
