"""The bottom-up loss audit before the data gate (the query's privacy map, checked by the session).

A correct plan's loss, recomputed from the mechanisms the release builds, is exactly the loss it
reserves. A deliberately wrong plan (a mechanism calibrated to too small a sensitivity, a lowered
selection threshold) is refused as a defect: nothing released, nothing reserved, the refusal
audited.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from tests.support.tampered import TamperedSession, budgeted_session

from dalenius.core.loss import ApproxDP, PureDP
from dalenius.engine.noise import LossDefect, audited_loss, build_mechanisms
from dalenius.plan.nodes import DPQuery
from dalenius.plan.protocol import within

QUERIES = [
    ("SELECT COUNT(*) FROM pums", None),
    ("SELECT sex, SUM(income), AVG(age) FROM pums GROUP BY sex", None),
    ("SELECT VAR_SAMP(age), STDDEV(income) FROM pums", None),
    ("SELECT MEDIAN(age), MIN(income), COUNT(DISTINCT pid) FROM pums", None),
    ("SELECT income, COUNT(*) FROM pums GROUP BY income", Fraction(1, 10**6)),
    ("SELECT COUNT(*), SUM(income) FROM pums p JOIN educ_names e ON p.educ = e.educ", None),
    ("SELECT AVG(n) FROM (SELECT pid, COUNT(*) AS n FROM pums GROUP BY pid) AS t", None),
    (
        "SELECT n, COUNT(*) FROM (SELECT pid, SUM(age) AS n FROM pums GROUP BY pid) AS t GROUP BY n",
        Fraction(1, 10**6),
    ),
]


_Tampered = TamperedSession
_session = budgeted_session


@pytest.fixture
def pums_catalog(shared_data: Path) -> Path:
    return Path(__file__).resolve().parent.parent / "fixtures" / "pums.toml"


@pytest.mark.parametrize(("sql", "delta"), QUERIES)
def test_a_correct_plan_audits_to_exactly_its_reserved_loss(
    pums_catalog: Path, sql: str, delta: Fraction | None
) -> None:
    session = _session(pums_catalog)
    plan = session.prepare(sql, Fraction(3, 4), delta).plan
    mechanisms = build_mechanisms(plan)
    assert audited_loss(plan, mechanisms) == plan.loss
    assert within(audited_loss(plan, mechanisms), plan.loss)


def _halve_first_sensitivity(plan: DPQuery) -> DPQuery:
    m = plan.measurements[0]
    wrong = replace(m, sensitivity_units=max(1, m.sensitivity_units // 2))
    return replace(plan, measurements=(wrong, *plan.measurements[1:]))


def _lower_threshold(plan: DPQuery) -> DPQuery:
    assert plan.selection is not None
    return replace(plan, selection=replace(plan.selection, threshold=1))


@pytest.mark.parametrize(
    ("tamper", "sql", "delta"),
    [
        (_halve_first_sensitivity, "SELECT sex, SUM(income) FROM pums GROUP BY sex", None),
        (_lower_threshold, "SELECT income, COUNT(*) FROM pums GROUP BY income", Fraction(1, 10**6)),
    ],
)
def test_a_wrong_plan_is_refused_before_anything_is_reserved(
    pums_catalog: Path, tamper: Any, sql: str, delta: Fraction | None
) -> None:
    _Tampered.tamper = staticmethod(tamper)
    session = _session(pums_catalog, _Tampered)
    before = session.remaining()
    fetched: list[str] = []
    fetch = session.executor.fetch
    session.executor.fetch = lambda text: fetched.append(text) or fetch(text)  # type: ignore[method-assign]
    with pytest.raises(LossDefect, match=r"exceeds|threshold|sensitivity"):
        session.query(sql, 1, delta=delta)
    assert fetched == []  # the engine never ran the query: the refusal precedes the data gate
    assert session.remaining() == before
    # Refused before anything is reserved (the query's reserve passes the gate in the same
    # transaction, so everything that can refuse comes first): no entry, an audit line.
    assert session.ledger.entries() == []
    [refusal] = [a for a in session.ledger.audit() if a.outcome == "refused"]
    assert refusal.detail.startswith("defect: ") and refusal.loss is not None


def test_a_pure_reservation_does_not_cover_a_delta() -> None:
    assert not within(ApproxDP(Fraction(1), Fraction(1, 10**6)), PureDP(Fraction(1)))
    assert within(PureDP(Fraction(1)), ApproxDP(Fraction(1), Fraction(0)))
    assert not within(PureDP(Fraction(2)), PureDP(Fraction(1)))
