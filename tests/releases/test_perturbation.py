"""Record perturbation as a release: a private number of rows, each value perturbed, charged once.

The privacy proof (docs/releases/perturbation.md) rests on the structure before the values' noise:
given the released number k, the rows are the table's plus k − n midpoint dummies (k > n) or a
uniformly random k of them (k <= n). Those are checked here with the noise replaced by the
identity; the per-value guarantee is RecordPerturbation's (tests/mechanisms). Noise in releases
comes from the OS; the seeded source is passed explicitly, in tests only.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from tests.support.seeded import SeededRandom

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import InvalidLossError, QueryError
from dalenius.core.loss import ApproxDP, PureDP
from dalenius.engine.session import connect
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.mechanisms.calibration import accuracy_lower_bound
from dalenius.plan.protocol import within
from dalenius.releases.perturbation import (
    COUNT_SHARE,
    NumberPerturbation,
    PerturbationPlan,
    PerturbationRequest,
    plan_perturbation,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REQUEST = PerturbationRequest("adult", ("age", "capital_loss"))


@pytest.fixture(scope="module")
def adult(adult_catalog_path: Path) -> Any:
    return load_catalog(adult_catalog_path)


def test_the_loss_is_split_and_recomputed_from_the_mechanisms(adult: Any) -> None:
    plan = plan_perturbation(adult, REQUEST, epsilon=Fraction(1), delta=Fraction(1, 10**6))
    assert plan.loss == ApproxDP(Fraction(1), Fraction(1, 10**6))
    assert plan.count.epsilon == COUNT_SHARE
    assert all(m.epsilon == (1 - COUNT_SHARE) / 2 for m in plan.records)
    assert all(m.delta == Fraction(1, 2 * 10**6) for m in plan.records)
    assert within(plan.privacy_map(), plan.loss)
    # A column drawn with more ε than its share (narrower noise) is caught by the audit.
    greedy = NumberPerturbation(0, 5000, Fraction(1), Fraction(1, 2 * 10**6))
    assert not within(
        dataclasses.replace(plan, records=(plan.records[0], greedy)).privacy_map(), plan.loss
    )


def test_the_course_calibration_and_its_tight_form(adult: Any) -> None:
    course = plan_perturbation(adult, REQUEST, epsilon=Fraction(2), delta=Fraction(1, 2))
    tight = plan_perturbation(
        adult, dataclasses.replace(REQUEST, tight=True), epsilon=Fraction(2), delta=Fraction(1, 2)
    )
    for a, b in zip(course.records, tight.records, strict=True):
        assert b.scale < a.scale
        # Course document 004: b >= diam/(ε − ln(1 − δ)) at the column's share.
        diam = float(a.high - a.low)
        assert float(a.scale) >= diam / (float(a.epsilon) - math.log(1 - float(a.delta)))


def session_plan(adult: Any) -> PerturbationPlan:
    return plan_perturbation(adult, REQUEST, epsilon=Fraction(1, 2), delta=None)


class Identity:
    """The values' noise replaced by nothing, to see the rows the noise is added to."""

    def __init__(self, real: Any) -> None:
        self.dummy, self.encode, self.decode = real.dummy, real.encode, real.decode

    def release(self, values: Any, *, rng: Any = None) -> Any:
        return np.asarray(values, dtype=np.float64)


class FixedCount:
    """The row count's noise replaced by a fixed shift."""

    epsilon = Fraction(1)
    sensitivity = Fraction(1)

    def __init__(self, shift: int) -> None:
        self.shift = shift

    def release(self, exact: Any, *, rng: Any = None) -> Any:
        return np.asarray(exact) + self.shift


def _bare(plan: PerturbationPlan, shift: int) -> PerturbationPlan:
    return dataclasses.replace(
        plan,
        count=FixedCount(shift),  # type: ignore[arg-type]
        records=tuple(Identity(m) for m in plan.records),  # type: ignore[misc]
    )


def test_extra_rows_are_midpoint_dummies_and_missing_rows_a_uniform_subset(adult: Any) -> None:
    plan = plan_perturbation(adult, REQUEST, epsilon=Fraction(1), delta=None)
    rows = [(20, 0), (30, 100), (40, None)]
    mid = (48.5, 2500.0)
    extra = _bare(plan, 2).noise(rows, SeededRandom(1))
    assert sorted(map(tuple, extra.tolist())) == sorted(
        [(20.0, 0.0), (30.0, 100.0), (40.0, 2500.0), mid, mid]
    )
    assert _bare(plan, -5).noise(rows, SeededRandom(2)).shape == (0, 2)
    seen: Counter[tuple[float, ...]] = Counter()
    orders: Counter[tuple[float, ...]] = Counter()
    source = SeededRandom(3)
    for _ in range(3000):
        out = _bare(plan, -1).noise(rows, source)
        assert out.shape == (2, 2)
        seen[tuple(sorted(out[:, 0].tolist()))] += 1
        full = _bare(plan, 0).noise(rows, source)
        orders[tuple(full[:, 0].tolist())] += 1
    # Each 2-subset of the 3 rows about a third of the time; each order of all 3 about a sixth.
    assert set(seen) == {(20.0, 30.0), (20.0, 40.0), (30.0, 40.0)}
    assert all(abs(c / 3000 - 1 / 3) < 0.05 for c in seen.values())
    assert len(orders) == 6 and all(abs(c / 3000 - 1 / 6) < 0.04 for c in orders.values())


def test_values_are_perturbed_and_the_count_is_noisy(adult: Any) -> None:
    plan = plan_perturbation(adult, REQUEST, epsilon=Fraction(1), delta=None)
    rows = [(40, 1000)] * 500
    out = plan.noise(rows, SeededRandom(4))
    assert abs(out.shape[0] - 500) < 200
    assert np.all(np.isfinite(out))
    assert len(set(out[:, 0].tolist())) > 50  # noise, not the value itself


def test_a_release_is_charged_once_and_a_repeat_is_free(adult: Any, tmp_path: Path) -> None:
    session = connect(adult, budget=10, ledger=str(tmp_path / "l.sqlite"))
    first = session.perturb("adult", ["age", "capital_loss"], epsilon="0.5")
    assert first.loss == PureDP(Fraction(1, 2)) and not first.cached
    assert first.remaining == PureDP(Fraction(19, 2))
    table = first.release.errors
    assert [e.column for e in table] == ["age", "capital_loss"]
    for e in table:
        m = next(r for r in session_plan(adult).records if r.domain == e.domain)
        assert isinstance(m, NumberPerturbation)
        assert e.lower_bound == accuracy_lower_bound(m.high - m.low, e.epsilon, e.delta)
        assert 0 < float(e.lower_bound) < e.mean_error < e.error
    again = session.perturb("adult", ["age", "capital_loss"], epsilon="0.5")
    assert again.cached and np.array_equal(again.release.rows, first.release.rows)
    assert again.remaining == PureDP(Fraction(19, 2))
    assert "floor γ" in str(first) and "Theorem 4" in str(first)


def test_refusals_name_the_problem_and_spend_nothing(adult: Any, tmp_path: Path) -> None:
    session = connect(adult, budget=10, ledger=str(tmp_path / "l.sqlite"))
    with pytest.raises(QueryError, match="public bounds"):
        session.perturb("adult", "occupation", epsilon=1)
    with pytest.raises(InvalidLossError):
        session.perturb("adult", "age", epsilon=1, delta=1)
    pums = connect(load_catalog(FIXTURES / "pums.toml"), budget=10)
    with pytest.raises(QueryError, match="one row") as refused:
        pums.perturb("pums", "age", epsilon=1)
    assert "group privacy" in refused.value.why
    assert session.ledger.spent("analyst", "adult") == PureDP(Fraction(0))


def test_the_cli_prints_the_error_table_and_writes_the_rows(
    adult_catalog_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "rows.csv"
    ledger = str(tmp_path / "l.sqlite")
    base = [sys.executable, "-m", "dalenius.cli.main", "perturb", "--catalog"]
    args = [str(adult_catalog_path), "--table", "adult", "--column", "age", "--epsilon", "1"]
    run = subprocess.run(
        [*base, *args, "--budget", "3", "--ledger", ledger, "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "floor γ" in run.stdout and "scale b" in run.stdout and "Loss: ε=1." in run.stdout
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["age"] and abs(len(frame) - 32561) < 1000
    shown = subprocess.run(
        [*base, *args, "--ledger", ledger, "--json"], capture_output=True, text=True, check=False
    )
    doc = json.loads(shown.stdout)
    assert doc["cached"] is True and doc["errors"][0]["column"] == "age"
    assert doc["errors"][0]["lower_bound"] > 0


def test_a_categorical_column_gets_the_discrete_mechanism(adult: Any, tmp_path: Path) -> None:
    session = connect(adult, budget=10, ledger=str(tmp_path / "l.sqlite"))
    result = session.perturb("adult", ["sex", "age"], epsilon=2, delta="0")
    keys = ("Female", "Male", "Unknown")
    frame = result.to_pandas()
    assert set(frame["sex"]) <= set(keys) and frame["age"].dtype.kind == "f"
    sex = result.release.errors[0]
    assert sex.categorical and sex.domain == "3 keys" and sex.error is None
    # Course document 004: p >= (1 − δ)/(m + e^ε); Theorem 5's floor on the wrong-value rate.
    m, eps = 2, float(sex.epsilon)
    assert float(sex.scale) >= 1 / (m + math.exp(eps))
    assert float(sex.lower_bound) == pytest.approx(m / (m + math.exp(eps)), rel=1e-9)
    assert float(sex.lower_bound) <= sex.mean_error < float(sex.lower_bound) * (1 + 1e-6)
    plan = plan_perturbation(
        adult, PerturbationRequest("adult", ("sex",)), epsilon=Fraction(2), delta=None
    )
    assert within(plan.privacy_map(), plan.loss)
    # Reports follow the mechanism: truthful with probability 1 − m·p.
    out = _bare_count(plan, 0).noise([("Male",)] * 4000, SeededRandom(7))
    kept = float(np.mean(out[:, 0] == 1))
    assert abs(kept - float(plan.records[0].rr.keep)) < 0.03
    again = session.perturb("adult", ["sex", "age"], epsilon=2, delta="0")
    assert again.cached and again.release.values == result.release.values


def _bare_count(plan: PerturbationPlan, shift: int) -> PerturbationPlan:
    return dataclasses.replace(plan, count=FixedCount(shift))  # type: ignore[arg-type]


UNIT_CATALOG = """
[dataset]
name = "units"

[tables.t]
source = { csv = "t.csv" }
privacy_unit = { column = "pid", max_rows = 1 }

[tables.t.columns]
pid = "int"
x = { type = "int", bounds = [0, 10] }
g = { type = "str", keys = ["a", "b"] }
"""


def _unit_rows(folder: Path, lines: list[str], salt: int) -> Counter[tuple[Any, ...]]:
    (folder / "t.csv").write_text("\n".join(["pid,x,g", *lines]) + "\n")
    (folder / "units.toml").write_text(UNIT_CATALOG)
    catalog = load_catalog(folder / "units.toml")
    plan = plan_perturbation(
        catalog, PerturbationRequest("t", ("x", "g")), epsilon=Fraction(1), delta=None
    )
    executor = DuckDBExecutor(catalog)
    try:
        executor.prepare(catalog.tables[0])
        return Counter(executor.fetch(plan.sql(executor.dialect, salt)))
    finally:
        executor.close()


def test_a_unit_of_one_row_keeps_one_row_per_id_and_a_neighbour_differs_in_one(
    tmp_path: Path,
) -> None:
    """An id unit with max_rows = 1 is released with the cap enforced as a query enforces it:
    one row per id (chosen by the keyed hash), none without an id; removing one unit removes
    at most one released row and changes no other unit's."""
    lines = ["1,0,a", "1,10,b", "2,5,a", ",3,b", "3,7,b", "3,7,b"]
    kept = {salt: _unit_rows(tmp_path, lines, salt) for salt in range(12)}
    for rows in kept.values():
        assert sum(rows.values()) == 3 and rows[(3, "b")] == 0
        assert rows[(5, "a")] == 1 and rows[(7, "b")] == 1
    assert {frozenset(r) for r in kept.values()} == {
        frozenset({(0, "a"), (5, "a"), (7, "b")}),
        frozenset({(10, "b"), (5, "a"), (7, "b")}),
    }
    for unit in ("1", "2", "3", ""):
        rest = [line for line in lines if line.split(",")[0] != unit]
        for salt, rows in kept.items():
            smaller = _unit_rows(tmp_path, rest, salt)
            assert not smaller - rows and sum((rows - smaller).values()) <= 1
