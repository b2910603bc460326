"""One spending path: a query, a batch, every release product and a product defined only in the
tests go through the same sequence, so each gets every guarantee of the path.

For each kind: a constant-time dataset without calibration refuses it for free; with calibration
it leaves at its deadline; a deliberately wrong privacy map is refused before the reserve with
nothing spent; the ε floor refuses below it; an identical repeat is free; a failure after the gate
gives the fixed outcome, charged. No test asserts a wall-clock time: the deadline is checked by
recording the instant the release waits for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from tests.support.histogram_product import HistogramPlan, HistogramRequest, plan_histogram

from dalenius.cli.main import main
from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.deadlines import PLAN_CLASSES, Deadlines, public_fingerprint, write_deadlines
from dalenius.core.errors import ConfigurationError, EvaluationFailed, ExecutionError, QueryError
from dalenius.core.loss import ZCDP, ApproxDP, Loss, PureDP
from dalenius.engine import timing
from dalenius.engine.policy import PolicyRefusal
from dalenius.engine.query_release import QueryRelease
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.plan.protocol import LossDefect
from dalenius.releases.aim import AimPlan
from dalenius.releases.bounds import BoundsPlan
from dalenius.releases.contributions import ContributionsPlan
from dalenius.releases.density import DensityPlan
from dalenius.releases.hierarchy import HierarchyPlan, HierarchyRequest, plan_hierarchy
from dalenius.releases.onthemap import OnTheMapPlan
from dalenius.releases.perturbation import PerturbationPlan
from dalenius.releases.synthetic import SynthPlan

CATALOG = """
[dataset]
name = "one"
constant_time = {constant_time}
{floor}

[tables.t]
source = {{ csv = "t.csv" }}
privacy_unit = {{ column = "pid", max_rows = 2 }}
max_row_count = 200

[tables.t.columns]
pid = "int"
x = {{ type = "int", bounds = [0, 10] }}
g = {{ type = "str", keys = ["a", "b"] }}
h = {{ type = "str", keys = ["u", "v"] }}

[tables.r]
source = {{ csv = "r.csv" }}
privacy_unit = "row"
max_row_count = 200

[tables.r.columns]
x = {{ type = "int", bounds = [0, 10] }}
g = {{ type = "str", keys = ["a", "b"] }}
"""

BUDGET = ApproxDP(Fraction(100), Fraction(1, 1000))
COUNT = 'SELECT COUNT(*) FROM "t"'


def write(folder: Path, *, constant_time: bool = False, floor: float | None = None) -> Catalog:
    rows = ["pid,x,g,h"] + [f"{i // 2},{i % 11},{'ab'[i % 2]},{'uv'[i % 3 % 2]}" for i in range(80)]
    (folder / "t.csv").write_text("\n".join(rows) + "\n")
    (folder / "r.csv").write_text(
        "\n".join(["x,g"] + [f"{i % 11},{'ab'[i % 2]}" for i in range(40)])
    )
    text = CATALOG.format(
        constant_time="true" if constant_time else "false",
        floor=f"min_epsilon = {floor}" if floor is not None else "",
    )
    (folder / "one.toml").write_text(text)
    return load_catalog(folder / "one.toml")


def batch(session: Session, eps: float) -> Any:
    queries = [
        {"sql": COUNT, "target_error": 100},
        {"sql": 'SELECT SUM(x) FROM "t"', "target_error": 1000},
    ]
    # Two queries share the batch's ε: each gets about half of 2·eps.
    return session.query_batch(session.plan_batch(queries, 2 * eps))


RUNS: dict[str, Callable[[Session, float], Any]] = {
    "query": lambda s, eps: s.query(COUNT, epsilon=eps),
    "batch": batch,
    "density": lambda s, eps: s.density("t", "x", bandwidth=2.0, epsilon=eps, delta=1e-6),
    "hierarchy": lambda s, eps: s.hierarchy("t", ["g", "h"], epsilon=eps),
    "synthetic": lambda s, eps: s.synthesize("t", ["g", "h", "x"], epsilon=eps, delta=1e-6),
    "aim": lambda s, eps: s.synthesize(
        "t", ["g", "h", "x"], epsilon=eps, delta=1e-6, method="aim", degree=3
    ),
    "onthemap": lambda s, eps: s.onthemap(
        "t", origin="g", destination="h", epsilon=eps, per_destination=5
    ),
    "perturbation": lambda s, eps: s.perturb("r", ["x", "g"], epsilon=eps),
    "bounds": lambda s, eps: s.choose_bounds("t", "x", epsilon=eps),
    "contributions": lambda s, eps: s.suggest_caps("t", epsilon=eps, groups=["g"]),
    "test product": lambda s, eps: s.spend(
        lambda catalog: plan_histogram(catalog, HistogramRequest("t", "g", Fraction(eps))),
        text="HISTOGRAM(g) FROM t",
    ),
}

PLANS: dict[str, type] = {
    "query": QueryRelease,
    "batch": QueryRelease,
    "density": DensityPlan,
    "hierarchy": HierarchyPlan,
    "synthetic": SynthPlan,
    "aim": AimPlan,
    "onthemap": OnTheMapPlan,
    "perturbation": PerturbationPlan,
    "bounds": BoundsPlan,
    "contributions": ContributionsPlan,
    "test product": HistogramPlan,
}

KINDS = list(RUNS)


def session_on(catalog: Catalog, executor: DuckDBExecutor | None = None) -> Session:
    ledger = open_ledger(None)
    ledger.set_budget("analyst", catalog.name, BUDGET)
    return Session(
        catalog,
        ledger=ledger,
        executor=executor if executor is not None else DuckDBExecutor(catalog),
    )


def spent_nothing(session: Session) -> bool:
    return session.remaining() == BUDGET and not session.ledger.entries()


def doubled(loss: Loss) -> Loss:
    if isinstance(loss, PureDP):
        return PureDP(2 * loss.epsilon)
    if isinstance(loss, ApproxDP):
        return ApproxDP(2 * loss.epsilon, loss.delta)
    assert isinstance(loss, ZCDP)
    return ZCDP(2 * loss.rho)


@pytest.mark.parametrize("kind", KINDS)
def test_a_constant_time_dataset_without_calibration_refuses_it_for_free(
    tmp_path: Path, kind: str
) -> None:
    session = session_on(write(tmp_path, constant_time=True))
    with pytest.raises(ConfigurationError, match="no calibrated deadline"):
        RUNS[kind](session, 1.0)
    assert spent_nothing(session)
    assert [a.outcome for a in session.ledger.audit()][-1] == "refused"


@pytest.mark.parametrize("kind", KINDS)
def test_with_calibration_it_leaves_at_its_deadline(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    waited: list[float] = []
    monkeypatch.setattr(timing, "wait_until", waited.append)
    catalog = write(tmp_path, constant_time=True)
    assert catalog.deadlines_path is not None
    fingerprint = public_fingerprint(catalog, DuckDBExecutor(catalog).engine_version)
    deadlines = {name: 60_000.0 + i for i, name in enumerate(PLAN_CLASSES)}
    write_deadlines(Deadlines(deadlines, fingerprint), catalog.deadlines_path)
    session = session_on(catalog)
    started: list[tuple[str, float]] = []
    original = session._deadline

    def spy(plan_class: str, arrival: float) -> Any:
        started.append((plan_class, arrival))
        return original(plan_class, arrival)

    monkeypatch.setattr(session, "_deadline", spy)
    RUNS[kind](session, 1.0)
    assert started and len(waited) == len(started)
    for (plan_class, arrival), instant in zip(started, waited, strict=True):
        assert instant == pytest.approx(arrival + deadlines[plan_class] / 1000, abs=1e-9)


@pytest.mark.parametrize("kind", KINDS)
def test_a_wrong_privacy_map_is_refused_before_the_reserve(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = session_on(write(tmp_path))
    monkeypatch.setattr(PLANS[kind], "privacy_map", lambda plan: doubled(plan.loss))
    with pytest.raises(LossDefect):
        RUNS[kind](session, 1.0)
    assert spent_nothing(session)
    assert "defect" in session.ledger.audit()[-1].detail


@pytest.mark.parametrize("kind", KINDS)
def test_the_floor_refuses_below_it_and_not_at_it(tmp_path: Path, kind: str) -> None:
    session = session_on(write(tmp_path, floor=0.5))
    with pytest.raises(PolicyRefusal, match=r"floor of 0\.5"):
        RUNS[kind](session, 0.25)
    assert spent_nothing(session)
    RUNS[kind](session, 1.0)
    assert session.remaining() != BUDGET


@pytest.mark.parametrize("kind", KINDS)
def test_an_identical_repeat_is_free(tmp_path: Path, kind: str) -> None:
    session = session_on(write(tmp_path))
    first = RUNS[kind](session, 1.0)
    left = session.remaining()
    second = RUNS[kind](session, 1.0)
    assert session.remaining() == left
    for one, two in zip(
        first if isinstance(first, list) else [first],
        second if isinstance(second, list) else [second],
        strict=True,
    ):
        assert two.cached and not one.cached and two.entry_id == one.entry_id
        assert one.to_pandas().equals(two.to_pandas())


class FailingExecutor(DuckDBExecutor):
    """An engine that fails once it is asked for data (after the gate)."""

    def fetch(self, sql: str, reads: Any = ()) -> list[tuple[object, ...]]:
        raise ExecutionError("secret: 4711 rows")


@pytest.mark.parametrize("kind", KINDS)
def test_a_failure_after_the_gate_is_the_fixed_outcome_charged(tmp_path: Path, kind: str) -> None:
    catalog = write(tmp_path)
    session = session_on(catalog, FailingExecutor(catalog))
    with pytest.raises(EvaluationFailed) as caught:
        RUNS[kind](session, 1.0)
    assert caught.value.body() == EvaluationFailed().body()
    assert session.remaining() != BUDGET
    [entry] = session.ledger.entries()
    assert entry.status == "failed" and "4711" not in entry.detail


def test_a_real_privacy_map_catches_noise_calibrated_below_the_sensitivity(tmp_path: Path) -> None:
    session = session_on(write(tmp_path))

    def build(catalog: Catalog) -> HierarchyPlan:
        plan = plan_hierarchy(
            catalog, HierarchyRequest("t", ("g", "h")), epsilon=Fraction(1), delta=None
        )
        # Each level's noise calibrated for one row although a unit may hold two.
        halved = tuple(IntegerLaplace(1, m.epsilon) for m in plan.mechanisms)  # type: ignore[union-attr]
        return replace(plan, mechanisms=halved)

    with pytest.raises(LossDefect, match="exceeds the loss reserved"):
        session.spend(build, text="HIERARCHY(g > h) FROM t")
    assert spent_nothing(session)

    def product(catalog: Catalog) -> HistogramPlan:
        plan = plan_histogram(catalog, HistogramRequest("t", "g", Fraction(1)))
        return replace(plan, mechanism=IntegerLaplace(1, Fraction(1)))

    with pytest.raises(LossDefect):
        session.spend(product, text="HISTOGRAM(g) FROM t")
    assert spent_nothing(session)


def test_a_test_product_is_fetched_again_by_entry_id(tmp_path: Path) -> None:
    session = session_on(write(tmp_path))
    result = RUNS["test product"](session, 1.0)
    left = session.remaining()
    again = session.release(result.entry_id)
    assert again.cached and again.release.counts == result.release.counts
    assert session.remaining() == left


@pytest.mark.parametrize("where", ["x > 200) OR (1 = 1", "1 = 1) OR (1 = 1", "x > 1; SELECT 1"])
def test_a_product_filter_cannot_escape_its_parentheses(tmp_path: Path, where: str) -> None:
    session = session_on(write(tmp_path))
    for run in (
        lambda: session.hierarchy("t", ["g"], epsilon=1, where=where),
        lambda: session.density("t", "x", bandwidth=2.0, epsilon=1, delta=1e-6, where=where),
        lambda: session.synthesize("t", ["g"], epsilon=1, delta=1e-6, where=where),
    ):
        with pytest.raises(QueryError, match="where"):
            run()
    assert spent_nothing(session)


def test_a_product_filter_is_bound_like_a_query_where(tmp_path: Path) -> None:
    session = session_on(write(tmp_path))
    with pytest.raises(QueryError, match=r"incme|column"):
        session.hierarchy("t", ["g"], epsilon=1, where="incme > 3")
    result = session.hierarchy("t", ["g"], epsilon=1, where="x >= 5 AND h = 'u'")
    assert result.release.final[0] >= 0


def test_the_cli_refuses_below_the_catalogs_floor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, floor=0.5)
    ledger = str(tmp_path / "ledger.sqlite")
    catalog = str(tmp_path / "one.toml")
    base = ["--catalog", catalog, "--ledger", ledger]
    code = main(["query", *base, "--budget", "10", "--epsilon", "0.25", COUNT])
    assert code != 0 and "floor of 0.5" in capsys.readouterr().err
    code = main(["hierarchy", *base, "--table", "t", "--level", "g", "--epsilon", "0.25"])
    assert code != 0 and "floor of 0.5" in capsys.readouterr().err
    book = open_ledger(ledger)
    assert not book.entries()
    assert main(["query", *base, "--epsilon", "0.5", COUNT]) == 0
