"""Weighted partition selection through the engine: plan, audit, neighbours, explain.

A table whose units hold up to six ZIP codes (caps: 6 rows in 6 groups) plans a GROUP BY zip with
weighted Gaussian selection. The plan audits to exactly its reserved loss; a plan with a lowered
threshold, or calibrated for fewer groups per unit than the caps allow, is refused before the
engine runs anything; removing one unit moves the groups' weights by at most one unit of L2 norm.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from tests.support.exact import exact_data
from tests.support.tampered import TamperedSession, budgeted_session

from dalenius.core.loss import ApproxDP
from dalenius.engine.noise import LossDefect, audited_loss, build_mechanisms
from dalenius.plan.nodes import DPQuery

TOML = """
[dataset]
name = "{name}"

[tables.v]
source = {{ csv = "{name}.csv" }}
privacy_unit = {{ column = "pid", max_rows = 6, max_groups = 6 }}

[tables.v.columns]
pid = {{ type = "int" }}
zip = {{ type = "str" }}
"""

SQL = "SELECT zip, COUNT(*) FROM v GROUP BY zip"
DELTA = Fraction(1, 10**6)


def _frame() -> pd.DataFrame:
    rng = np.random.Generator(np.random.PCG64(11))  # test data only, never noise
    rows = []
    for pid in range(1, 801):
        home = f"z{int(rng.integers(0, 12))}"
        for _ in range(int(rng.integers(1, 7))):
            rows.append((pid, home if rng.random() < 0.5 else f"z{int(rng.integers(0, 30))}"))
    return pd.DataFrame(rows, columns=["pid", "zip"])


def _catalog(folder: Path, name: str, frame: pd.DataFrame) -> Path:
    frame.to_csv(folder / f"{name}.csv", index=False)
    (folder / f"{name}.toml").write_text(TOML.format(name=name))
    return folder / f"{name}.toml"


_Tampered = TamperedSession
_session = budgeted_session


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    return _catalog(tmp_path, "many", _frame())


def test_the_plan_selects_by_weight_and_audits_to_its_reserved_loss(catalog: Path) -> None:
    session = _session(catalog)
    plan = session.prepare(SQL, Fraction(1), DELTA).plan
    assert plan.selection is not None
    m = plan.measurement(plan.selection.measurement)
    assert m.kind == "degrees" and len(m.edges) - 1 == 6
    mechanisms = build_mechanisms(plan)
    assert mechanisms.weighted is not None
    assert audited_loss(plan, mechanisms) == plan.loss == ApproxDP(Fraction(1), DELTA)
    text = str(session.explain(SQL, epsilon=1, delta=1e-6))
    assert "units by groups held (1..6) [selection]" in text
    assert "weighs 1/sqrt(d)" in text
    answer = session.query(SQL, 1, delta=DELTA)
    assert len(answer.column("zip")) > 0


def test_a_query_sharing_its_distinct_count_keeps_truncated_selection(catalog: Path) -> None:
    plan = (
        _session(catalog)
        .prepare("SELECT zip, COUNT(DISTINCT pid) FROM v GROUP BY zip", Fraction(1), DELTA)
        .plan
    )
    assert plan.selection is not None and plan.selection.shared
    assert plan.measurement(plan.selection.measurement).kind == "count_distinct"


def _lower_threshold(plan: DPQuery) -> DPQuery:
    assert plan.selection is not None
    return replace(plan, selection=replace(plan.selection, threshold=1))


def _fewer_groups(plan: DPQuery) -> DPQuery:
    assert plan.selection is not None
    name = plan.selection.measurement
    measurements = tuple(
        replace(m, edges=m.edges[:3]) if m.name == name else m for m in plan.measurements
    )
    return replace(plan, measurements=measurements)


@pytest.mark.parametrize("tamper", [_lower_threshold, _fewer_groups])
def test_a_wrong_weighted_plan_is_refused_before_the_gate(catalog: Path, tamper: Any) -> None:
    _Tampered.tamper = staticmethod(tamper)
    session = _session(catalog, _Tampered)
    before = session.remaining()
    fetched: list[str] = []
    fetch = session.executor.fetch
    session.executor.fetch = lambda text: fetched.append(text) or fetch(text)  # type: ignore[method-assign]
    with pytest.raises(LossDefect, match="weighted selection"):
        session.query(SQL, 1, delta=DELTA)
    assert fetched == []
    assert session.remaining() == before


def test_removing_a_unit_moves_the_weights_by_at_most_one_in_l2(tmp_path: Path) -> None:
    frame = _frame()
    full = _session(_catalog(tmp_path, "full", frame))
    plan, exact = exact_data(full, SQL, 1, DELTA, salt=5)
    assert plan.selection is not None
    name = plan.selection.measurement
    cal = build_mechanisms(plan).weighted
    assert cal is not None
    weights = dict(zip(exact.groups, cal.group_weights(exact.histograms[name]), strict=True))
    for pid in [1, 2, 3, 57, 400]:
        rest = _session(_catalog(tmp_path, f"rest{pid}", frame[frame.pid != pid]))
        _, smaller = exact_data(rest, SQL, 1, DELTA, salt=5)
        after = dict(zip(smaller.groups, cal.group_weights(smaller.histograms[name]), strict=True))
        assert set(after) <= set(weights)
        shift = [int(weights[g]) - int(after.get(g, 0)) for g in weights]
        assert min(shift) >= 0
        held = frame[frame.pid == pid].zip.nunique()
        assert sum(1 for s in shift if s) == held
        assert sum(s * s for s in shift) <= cal.grid**2
