"""Synthetic microdata with AIM: its budget never passes ρ, neighbours, the privacy map, quality
against MST and independent marginals, the spending path, the CLI and refusals.

Data are generated with seeded numpy generators (data only); release noise comes from the OS
generator, except where a test passes a seeded source to ``measure`` (reproducible draws).
"""

from __future__ import annotations

import itertools
import json
import math
import random
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from tests.support.seeded import SeededRandom

import dalenius
from dalenius.core.catalog import load_catalog
from dalenius.core.errors import InternalError, InvalidLossError, QueryError
from dalenius.core.loss import ZCDP, ApproxDP
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.mechanisms.exponential import ExponentialMechanism
from dalenius.plan.protocol import LossDefect, within
from dalenius.releases.aim import (
    AimPlan,
    AimRequest,
    Odometer,
    Schedule,
    plan_aim,
    quality,
    select,
    workload_candidates,
)
from dalenius.releases.junction import NoisyMarginal, estimate
from dalenius.releases.synth_table import (
    Contingency,
    SynthesisRound,
    em_epsilon,
    marginal,
    workload_error,
)
from dalenius.releases.synthetic import SynthRequest, plan_synthetic

CATALOG = """
[dataset]
name = "survey"

[tables.answers]
source = { csv = "answers.csv" }
privacy_unit = { column = "pid", max_rows = 2, max_groups = 2 }

[tables.answers.columns]
pid = { type = "int" }
a = { type = "int", keys = [0, 1, 2, 3] }
b = { type = "int", keys = [0, 1, 2, 3] }
c = { type = "int", keys = [0, 1, 2, 3] }
d = { type = "str", keys = ["x", "y", "z"] }
score = { type = "float", bounds = [0, 10] }
"""


def answers(seed: int = 3, persons: int = 6000) -> pd.DataFrame:
    """Strong 3-way structure: c = (a + b) mod 4 nine times in ten, so every pair of a, b, c is
    nearly independent and only the triple shows it; d and score follow a pairwise chain."""
    rng = np.random.default_rng(seed)  # data only
    rows = rng.integers(1, 3, size=persons)
    pid = np.repeat(np.arange(persons), rows)
    n = pid.size
    a = rng.integers(0, 4, size=n)
    b = rng.integers(0, 4, size=n)
    c = np.where(rng.random(n) < 0.9, (a + b) % 4, rng.integers(0, 4, size=n))
    d = np.where(a < 2, rng.choice(["x", "y"], size=n), "z")
    score = np.clip(rng.normal(np.where(d == "z", 8, 2), 1.0), 0, 10)
    return pd.DataFrame({"pid": pid, "a": a, "b": b, "c": c, "d": d, "score": score.round(2)})


def write(tmp: Path, frame: pd.DataFrame) -> Path:
    frame.to_csv(tmp / "answers.csv", index=False)
    (tmp / "survey.toml").write_text(CATALOG, encoding="utf-8")
    return tmp / "survey.toml"


def exact_table(path: Path, plan: AimPlan) -> Contingency:
    with DuckDBExecutor(load_catalog(path)) as engine:
        for table in plan.tables:
            engine.prepare(table)
        return plan.contingency(engine.fetch(plan.sql("duckdb", 1).main))


def plan_on(path: Path, degree: int = 2, **loss: Fraction) -> AimPlan:
    chosen = loss or {"epsilon": Fraction(1), "delta": Fraction(1, 10**9)}
    return plan_aim(
        load_catalog(path),
        AimRequest("answers", ("a", "b", "c", "d", "score"), bins=5, degree=degree),
        epsilon=chosen.get("epsilon"),
        delta=chosen.get("delta"),
        rho=chosen.get("rho"),
    )


def real_frame(table: Contingency, plan: AimPlan) -> pd.DataFrame:
    names = [d.name for d in plan.domains]
    real = pd.DataFrame(np.repeat(table.codes, table.counts, axis=0), columns=names)
    for i, d in enumerate(plan.domains):
        real[d.name] = np.asarray(d.labels, dtype=object)[real.iloc[:, i]]
    return real


# -- accounting ----------------------------------------------------------------------------------


class Drawn:
    """A Gaussian's loss without its sampler (building the exact sampler thousands of times
    would only slow the test; the odometer reads the loss)."""

    def __init__(self, rho: Fraction) -> None:
        self.loss = ZCDP(rho)


def test_no_sequence_of_annealing_decisions_spends_more_than_rho() -> None:
    """The schedule and odometer of every round, under random annealing decisions: the rounds
    stop, never ask for more than is left, and never draw noise wider than the 1-way marginals'."""
    choose = random.Random(4)  # which rounds anneal: a stand-in for the data's answers
    for _ in range(2000):
        rho = Fraction(choose.randint(1, 10**6), choose.choice([10**3, 10**6, 10**8]))
        columns = choose.randint(1, 30)
        rounds = 16 * columns
        first = Fraction(9, 10) * rho / rounds
        odometer = Odometer(rho)
        for _ in range(columns):
            odometer.charge(Drawn(first))  # type: ignore[arg-type]
        schedule = Schedule(rho / rounds)
        taken = 0
        anneal = choose.choice([0.0, 0.1, 0.5, 1.0])
        while True:
            gaussian, selection, last = schedule.next(odometer.remaining)
            assert gaussian >= first  # σ never above the 1-way marginals' (checked at planning)
            odometer.charge(ExponentialMechanism(1, em_epsilon(selection, 1)))
            odometer.charge(Drawn(gaussian))  # type: ignore[arg-type]
            taken += 1
            if last:
                break
            if choose.random() < anneal:
                schedule.anneal()
        assert odometer.spent <= rho and taken <= 2 * rounds
        assert odometer.spent >= rho * Fraction(999, 1000)
    with pytest.raises(InternalError, match="left"):
        Odometer(Fraction(1)).charge(Drawn(Fraction(2)))  # type: ignore[arg-type]


def test_the_runs_spend_at_most_rho_whatever_they_select(tmp_path: Path) -> None:
    """Many whole runs (seeded draws, varied ρ and workloads): the record's own sum of every
    mechanism drawn never passes the declared ρ, and small ρ leaves almost nothing unspent."""
    path = write(tmp_path, answers(persons=800))
    choose = random.Random(9)
    table = exact_table(path, plan_on(path))  # the same columns whatever the loss
    for run in range(40):
        rho = Fraction(choose.randint(1, 2000), 1000)
        plan = plan_on(path, degree=choose.choice([2, 3]), rho=rho)
        record = plan.measure(table, rng=SeededRandom(run))
        assert record.spent() <= plan.rho
        assert record.spent() >= plan.rho * Fraction(99, 100)  # the last round spends the rest
        assert len(record.selections) == len(record.marginals) - len(plan.domains)
        record.cliques(len(plan.domains))  # the measured sets stay decomposable


def test_progress_is_told_each_round_once_with_the_rho_drawn_never_past_rho(
    tmp_path: Path,
) -> None:
    """Whole runs (seeded draws, varied ρ and workloads, annealing): the callback hears
    rounds 1, 2, … once each, never more than the most rounds announced, the ρ drawn grows and
    never passes ρ, ends at what the record drew, and each marginal is the one measured."""
    path = write(tmp_path, answers(persons=800))
    table = exact_table(path, plan_on(path))
    choose = random.Random(12)
    for run in range(12):
        rho = Fraction(choose.randint(1, 2000), 1000)
        seen: list[SynthesisRound] = []
        plan = replace(plan_on(path, degree=choose.choice([2, 3]), rho=rho), progress=seen.append)
        record = plan.measure(table, rng=SeededRandom(100 + run))
        assert [r.round for r in seen] == list(range(1, len(record.selections) + 1))
        assert all(r.rounds == plan.max_rounds() >= r.round for r in seen)
        spent = [r.spent for r in seen]
        assert spent == sorted(spent) and len(set(spent)) == len(spent)
        assert all(r.rho == rho and r.method == "aim" for r in seen)
        assert spent[-1] == record.spent() <= rho
        names = [d.name for d in plan.domains]
        measured = record.marginals[len(plan.domains) :]
        assert [r.marginal for r in seen] == [tuple(names[a] for a in m.attrs) for m in measured]


def test_the_most_rounds_is_the_run_that_never_anneals(tmp_path: Path) -> None:
    """``max_rounds`` replays the schedule without annealing: the odometer of that run, charged
    round by round, stops exactly there."""
    plan = plan_on(write(tmp_path, answers(persons=100)))
    d = len(plan.domains)
    assert plan.max_rounds() >= plan.rounds - d  # about 15·d: the 1-way marginals cost 0.9·d rounds
    odometer = Odometer(plan.rho)
    for _ in range(d):
        odometer.charge(plan.gaussian(plan.first_rho))
    schedule, taken = Schedule(plan.rho / plan.rounds), 0
    while True:
        gaussian, selection, last = schedule.next(odometer.remaining)
        odometer.charge(plan.selector(selection))
        odometer.charge(plan.gaussian(gaussian))
        taken += 1
        if last:
            break
    assert taken == plan.max_rounds()


def test_the_privacy_map_is_the_declared_loss_and_catches_noise_below_the_sensitivity(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, answers(persons=200))
    plan = plan_on(path, rho=Fraction(1, 2))
    assert plan.privacy_map() == ZCDP(Fraction(1, 2))
    approx = plan_on(path)
    assert within(approx.privacy_map(), approx.loss)
    # Every mechanism calibrated for one row although a unit may hold two: four times the loss.
    halved = replace(plan, max_rows=1)
    assert halved.privacy_map() == ZCDP(Fraction(2))
    session = dalenius.connect(path, budget=ApproxDP(Fraction(5), Fraction(1, 10**6)))
    with pytest.raises(LossDefect):
        session.spend(lambda catalog: replace(plan_on(path), max_rows=1), text="AIM")
    assert session.remaining() == ApproxDP(Fraction(5), Fraction(1, 10**6))


# -- neighbours ----------------------------------------------------------------------------------


def test_removing_one_person_moves_marginals_by_r_and_qualities_by_w_r(tmp_path: Path) -> None:
    frame = answers(persons=1500)
    path = write(tmp_path, frame)
    plan = plan_on(path, degree=3)
    base = exact_table(path, plan)
    model = plan.model(plan.measure(base, rng=SeededRandom(1)))  # any public model will do
    sigma = 40.0
    r = 2  # the unit's max_rows
    for pid in (0, 7, 1499):
        (tmp_path / "n").mkdir(exist_ok=True)
        other = exact_table(write(tmp_path / "n", frame[frame.pid != pid]), plan)
        for attrs in workload_candidates(len(plan.domains), 3):
            x, y = marginal(base, attrs), marginal(other, attrs)
            assert int(np.abs(x - y).sum()) <= r
            assert math.sqrt(float(((x - y) ** 2).sum())) <= r
            counts = model.counts(attrs)
            q, q_other = (
                quality(x, counts, len(attrs), sigma),
                quality(y, counts, len(attrs), sigma),
            )
            assert abs(q - q_other) <= len(attrs) * r
            assert len(attrs) <= plan.degree  # the selector's sensitivity degree·R covers w_r·R
    assert plan.selector(Fraction(1, 100)).sensitivity == plan.degree * r


class Recording(ExponentialMechanism):
    """The exponential mechanism, keeping the scores it was given."""

    seen: list[Fraction]

    def select(self, scores, *, rng=None):  # type: ignore[no-untyped-def]
        self.seen = list(scores)
        return super().select(scores, rng=rng)


def test_a_round_selects_by_the_exponential_law_of_aims_quality() -> None:
    """The scores a round hands the exponential mechanism are AIM's qualities, recomputed here
    from their definition; drawn many times, the choices follow exp(ε·q/(2·Δ)) (χ² test)."""
    rng = np.random.default_rng(8)  # data only
    sizes = (2, 3, 2)
    codes = np.stack([rng.integers(0, s, size=400) for s in sizes], axis=1)
    codes[:, 2] = np.where(rng.random(400) < 0.8, codes[:, 0], codes[:, 2])  # 0 and 2 related
    cells, counts = np.unique(codes, axis=0, return_counts=True)
    table = Contingency(cells.astype(np.int64), counts.astype(np.int64), sizes)
    candidates = workload_candidates(3, 2)
    exact = {c: marginal(table, c) for c in candidates}
    ones = [NoisyMarginal((i,), exact[(i,)].astype(float), 1.0) for i in range(3)]
    model = estimate(ones, sizes, [(0,), (1,), (2,)])  # independent columns
    sigma, r = 3.0, 1
    selector = Recording(2 * r, Fraction(1, 20))
    select(candidates, exact, model, selector, sigma, SeededRandom(2))
    expected = []
    for c in candidates:  # the independent model predicts the outer product of the columns
        pair = np.outer(exact[(c[0],)], exact[(c[-1],)]) / 400
        predicted = exact[c] if len(c) == 1 else np.rint(pair)
        l1 = int(np.abs(exact[c] - predicted).sum())
        expected.append(len(c) * (l1 - Fraction(math.sqrt(2 / math.pi) * sigma * exact[c].size)))
    assert selector.seen == expected
    assert candidates[int(np.argmax([float(q) for q in expected]))] == (0, 2)
    weights = np.exp([float(Fraction(1, 20) * (q - max(expected)) / (2 * 2 * r)) for q in expected])
    draws = 20_000
    picked = selector.sample(selector.seen, draws, rng=SeededRandom(3))
    observed = np.bincount(picked, minlength=len(candidates))
    assert stats.chisquare(observed, weights / weights.sum() * draws).pvalue > 1e-4


# -- quality -------------------------------------------------------------------------------------


def test_aim_finds_the_three_way_structure_mst_and_independent_marginals_miss(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, answers(persons=8000))
    plan = plan_on(path, degree=3)
    table = exact_table(path, plan)
    real = real_frame(table, plan)
    names = [d.name for d in plan.domains]
    mst = plan_synthetic(
        load_catalog(path),
        SynthRequest("answers", tuple(names), bins=5),
        epsilon=Fraction(1),
        delta=Fraction(1, 10**9),
    )
    rng = np.random.default_rng(11)  # the independent baseline's sampling (post-processing)
    independent = pd.DataFrame({c: rng.permutation(real[c].to_numpy()) for c in names})

    def triple(frame: pd.DataFrame) -> float:
        return workload_error(real[["a", "b", "c"]], frame[["a", "b", "c"]], ["a", "b", "c"])[
            "3-way"
        ]

    ours = [plan.synthesise(plan.measure(table)).to_pandas() for _ in range(2)]
    theirs = [mst.synthesise(mst.measure(table)).to_pandas() for _ in range(2)]
    aim_errors = [workload_error(real, f, names) for f in ours]
    mst_errors = [workload_error(real, f, names) for f in theirs]
    base = workload_error(real, independent, names)
    # The parity of a, b, c: invisible to pairs, found by AIM's 3-way workload.
    assert max(triple(f) for f in ours) < 0.15 < 0.5 < triple(independent)
    assert min(triple(f) for f in theirs) > 0.5
    for kind in ("2-way", "3-way"):
        aim = float(np.mean([e[kind] for e in aim_errors]))
        assert aim < base[kind]
        assert aim <= float(np.mean([e[kind] for e in mst_errors])) + 0.02


# -- the spending path ---------------------------------------------------------------------------


def test_a_release_is_charged_once_repeated_free_and_fetched_again(tmp_path: Path) -> None:
    path = write(tmp_path, answers(persons=1000))
    ledger = str(tmp_path / "ledger.sqlite")
    budget = ApproxDP(Fraction(3), Fraction(1, 10**8))
    session = dalenius.connect(path, budget=budget, ledger=ledger)
    result = session.synthesize(
        "answers", ["a", "b", "c"], epsilon=1, delta=1e-9, method="aim", degree=3, rows=700
    )
    assert result.release.method == "aim" and result.release.rows == 700
    assert set(result.to_pandas().a) <= {0, 1, 2, 3}
    assert session.remaining() == ApproxDP(Fraction(2), Fraction(9, 10**9))
    [entry] = session.ledger.entries()
    assert json.loads(entry.answer or "{}")["format"] == "synthetic-aim-1"
    again = session.synthesize(
        "answers", ["a", "b", "c"], epsilon=1, delta=1e-9, method="aim", degree=3, rows=700
    )
    assert again.cached and again.to_pandas().equals(result.to_pandas())
    assert session.remaining() == ApproxDP(Fraction(2), Fraction(9, 10**9))
    # MST on the same request is another release, charged on its own.
    mst = session.synthesize("answers", ["a", "b", "c"], epsilon=1, delta=1e-9, rows=700)
    assert not mst.cached and mst.release.method == "mst"
    session.close()
    fresh = dalenius.connect(path, ledger=ledger)
    fetched = fresh.release(result.entry_id or "")
    assert fetched.to_pandas().equals(result.to_pandas())
    assert fetched.release.edges == result.release.edges
    assert fresh.remaining() == ApproxDP(Fraction(1), Fraction(8, 10**9))


def test_refusals_name_the_parameter_and_spend_nothing(tmp_path: Path) -> None:
    budget = ApproxDP(Fraction(1), Fraction(1, 10**8))
    session = dalenius.connect(write(tmp_path, answers(persons=100)), budget=budget)
    with pytest.raises(QueryError, match="degree must be 2 or 3"):
        session.synthesize("answers", epsilon=1, delta=1e-9, method="aim", degree=4)
    with pytest.raises(QueryError, match="method must be 'mst' or 'aim'"):
        session.synthesize("answers", epsilon=1, delta=1e-9, method="privbayes")
    with pytest.raises(QueryError, match="degree is AIM's workload"):
        session.synthesize("answers", epsilon=1, delta=1e-9, degree=3)
    with pytest.raises(InvalidLossError, match="delta"):
        session.synthesize("answers", epsilon=1, method="aim")
    with pytest.raises(InvalidLossError, match="σ = 3072"):
        session.synthesize("answers", rho=1e-5, method="aim")
    assert session.remaining() == budget and not session.ledger.entries()


def test_the_cli_writes_the_rows_and_downloads_the_same_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dalenius.cli.main import main

    catalog = str(write(tmp_path, answers(persons=500)))
    ledger = ["--ledger", str(tmp_path / "l.sqlite")]
    args = ["synthesize", "--method", "aim", "--degree", "3", "--catalog", catalog]
    args += ["--table", "answers", "--column", "a", "--column", "b", "--column", "c"]
    args += ["--epsilon", "1", "--delta", "1e-9", *ledger]
    budget = ["--budget", "2", "--budget-delta", "1e-8"]
    assert main([*args, *budget, "--out", str(tmp_path / "a.csv"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["method"] == "aim" and doc["loss"]["epsilon"] == 1
    assert all(len(clique) <= 3 for clique in doc["edges"])
    assert main([*args, "--out", str(tmp_path / "b.csv")]) == 0
    assert "no new cost" in capsys.readouterr().out
    download = ["download", "--catalog", catalog, doc["entry_id"], *ledger]
    assert main([*download, "--out", str(tmp_path / "c.csv")]) == 0
    first = (tmp_path / "a.csv").read_bytes()
    assert first == (tmp_path / "b.csv").read_bytes() == (tmp_path / "c.csv").read_bytes()
    assert len(first.splitlines()) == 1 + doc["rows"]
    onthemap = ["synthesize", "--method", "onthemap", "--catalog", catalog, "--table", "answers"]
    onthemap += ["--origin", "a", "--destination", "b", "--epsilon", "1", "--degree", "3"]
    assert main([*onthemap, *ledger, "--out", str(tmp_path / "d.csv")]) != 0
    assert "--degree" in capsys.readouterr().err


def test_every_candidate_of_the_workload_is_a_set_of_at_most_degree_columns() -> None:
    for columns, degree in itertools.product(range(1, 7), (2, 3)):
        found = workload_candidates(columns, degree)
        top = min(degree, columns)
        assert len(found) == sum(math.comb(columns, k) for k in range(1, top + 1))
        assert all(1 <= len(c) <= top and list(c) == sorted(c) for c in found)
