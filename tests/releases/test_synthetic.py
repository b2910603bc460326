"""Synthetic microdata (MST): measurements, the private tree, the model, charging, neighbours.

Data are generated with seeded numpy generators (data only); the noise comes from the OS generator.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dalenius
from dalenius.core.catalog import load_catalog
from dalenius.core.errors import InvalidLossError, QueryError
from dalenius.core.loss import ApproxDP
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.releases.synth_table import Contingency, SynthesisRound, em_epsilon, marginal
from dalenius.releases.synthetic import (
    Measurements,
    SynthRequest,
    fit_tree,
    plan_synthetic,
    workload_error,
)

CATALOG = """
[dataset]
name = "survey"

[tables.answers]
source = { csv = "answers.csv" }
privacy_unit = { column = "pid", max_rows = 2, max_groups = 2 }

[tables.answers.columns]
pid = { type = "int" }
colour = { type = "str", keys = ["red", "green", "blue"] }
size = { type = "str", keys = ["s", "m", "l", "xl"] }
score = { type = "float", bounds = [0, 10] }
free_text = { type = "str" }
"""


def answers(seed: int = 3, persons: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)  # data only
    rows = rng.integers(1, 4, size=persons)
    pid = np.repeat(np.arange(persons), rows)
    colour = rng.choice(["red", "green", "blue"], size=pid.size, p=[0.5, 0.3, 0.2])
    # size depends strongly on colour: the tree must find that pair
    size = np.where(
        colour == "red",
        rng.choice(["s", "m"], size=pid.size),
        rng.choice(["l", "xl"], size=pid.size),
    )
    score = np.clip(rng.normal(np.where(size == "s", 2, 7), 1.0), 0, 10)
    return pd.DataFrame(
        {"pid": pid, "colour": colour, "size": size, "score": score.round(3), "free_text": "x"}
    )


def write(tmp: Path, frame: pd.DataFrame) -> Path:
    frame.to_csv(tmp / "answers.csv", index=False)
    (tmp / "survey.toml").write_text(CATALOG, encoding="utf-8")
    return tmp / "survey.toml"


def contingency(path: Path, plan) -> Contingency:  # type: ignore[no-untyped-def]
    with DuckDBExecutor(load_catalog(path)) as engine:
        for table in plan.tables:
            engine.prepare(table)
        return plan.contingency(engine.fetch(plan.sql("duckdb", 1).main))


def test_removing_one_person_moves_every_marginal_by_at_most_the_row_cap(tmp_path: Path) -> None:
    frame = answers()
    path = write(tmp_path, frame)
    plan = plan_synthetic(
        load_catalog(path),
        SynthRequest("answers", ("colour", "size", "score"), bins=5),
        epsilon=Fraction(1),
        delta=Fraction(1, 10**9),
    )
    base = contingency(path, plan)
    for pid in (0, 5, 2999):
        (tmp_path / "n").mkdir(exist_ok=True)
        other = contingency(write(tmp_path / "n", frame[frame.pid != pid]), plan)
        for axes in ((0,), (1,), (2,), (0, 1), (0, 2), (1, 2)):
            assert int(np.abs(marginal(base, axes) - marginal(other, axes)).sum()) <= 2


def test_the_exponential_mechanism_rounds_fit_the_selection_budget() -> None:
    for rho, rounds in ((Fraction(1, 3), 11), (Fraction(1, 100), 3)):
        eps = em_epsilon(rho, rounds)
        assert rounds * eps * eps / 8 <= rho
        assert rounds * (eps * Fraction(1001, 1000)) ** 2 / 8 > rho


def test_the_tree_model_reproduces_consistent_marginals_exactly() -> None:
    rng = np.random.default_rng(5)  # data only
    joint = rng.dirichlet(np.ones(12)).reshape(3, 4) * 1000
    other = rng.dirichlet(np.ones(8)).reshape(4, 2)
    other = other / other.sum(axis=1, keepdims=True) * joint.sum(axis=0)[:, None]
    measured = Measurements(
        one=[joint.sum(axis=1), joint.sum(axis=0), other.sum(axis=0)],
        one_variance=1.0,
        edges=[(0, 1), (1, 2)],
        two=[joint, other],
        two_variance=1.0,
    )
    model = fit_tree(measured, [3, 4, 2])
    assert np.allclose(model.marginals[0], joint.sum(axis=1) / 1000, atol=1e-6)
    sample = model.sample(200_000, np.random.default_rng(1))
    pairs = np.zeros((3, 4))
    np.add.at(pairs, (sample[:, 0], sample[:, 1]), 1)
    assert np.abs(pairs / 200_000 - joint / 1000).max() < 0.01


def test_a_release_finds_the_dependent_pair_and_is_charged_once(tmp_path: Path) -> None:
    frame = answers()
    session = dalenius.connect(
        write(tmp_path, frame), budget=ApproxDP(Fraction(2), Fraction(1, 10**8))
    )
    result = session.synthesize("answers", epsilon=1, delta=1e-9, bins=5)
    assert result.release.columns == ("colour", "size", "score")  # free_text has no domain
    assert ("colour", "size") in result.release.edges or ("size", "colour") in result.release.edges
    synthetic = result.to_pandas()
    assert set(synthetic.colour) <= {"red", "green", "blue"}
    red = synthetic[synthetic.colour == "red"]
    assert (red["size"].isin(["s", "m"])).mean() > 0.9
    assert session.remaining() == ApproxDP(Fraction(1), Fraction(9, 10**9))
    again = session.synthesize("answers", epsilon=1, delta=1e-9, bins=5)
    assert again.cached and again.to_pandas().equals(synthetic)
    assert session.remaining() == ApproxDP(Fraction(1), Fraction(9, 10**9))


def test_progress_hears_each_tree_round_once_with_the_rho_drawn(tmp_path: Path) -> None:
    """Python's ``progress=``: MST's d − 1 rounds, each after its pair is selected and measured,
    with the ρ drawn growing to at most ρ; the pairs are the tree's edges. A repeated request
    runs no rounds."""
    session = dalenius.connect(
        write(tmp_path, answers(persons=500)), budget=ApproxDP(Fraction(2), Fraction(1, 10**8))
    )
    seen: list[SynthesisRound] = []
    result = session.synthesize("answers", epsilon=1, delta=1e-9, bins=5, progress=seen.append)
    assert [(r.round, r.rounds, r.method) for r in seen] == [(1, 2, "mst"), (2, 2, "mst")]
    assert [r.marginal for r in seen] == list(result.release.edges)
    rho = seen[0].rho
    assert seen[0].spent < seen[1].spent <= rho
    assert seen[1].spent >= rho * Fraction(999, 1000)  # the selections' ε is rounded down
    session.synthesize("answers", epsilon=1, delta=1e-9, bins=5, progress=seen.append)
    assert len(seen) == 2


def test_workload_error_is_small_at_epsilon_one(tmp_path: Path) -> None:
    frame = answers(persons=6000)
    path = write(tmp_path, frame)
    session = dalenius.connect(path, budget=ApproxDP(Fraction(2), Fraction(1, 10**8)))
    result = session.synthesize("answers", ["colour", "size"], epsilon=1, delta=1e-9)
    plan = plan_synthetic(
        load_catalog(path),
        SynthRequest("answers", ("colour", "size")),
        epsilon=Fraction(1),
        delta=Fraction(1, 10**9),
    )
    table = contingency(path, plan)
    real = pd.DataFrame(np.repeat(table.codes, table.counts, axis=0), columns=["colour", "size"])
    for i, d in enumerate(plan.domains):
        real[d.name] = np.asarray(d.labels, dtype=object)[real.iloc[:, i]]
    errors = workload_error(real, result.to_pandas(), ["colour", "size"])
    assert errors["1-way"] < 0.03 and errors["2-way"] < 0.05


def test_refusals_spend_nothing(tmp_path: Path) -> None:
    session = dalenius.connect(
        write(tmp_path, answers()), budget=ApproxDP(Fraction(1), Fraction(1, 10**8))
    )
    with pytest.raises(QueryError, match="free_text"):
        session.synthesize("answers", ["free_text"], epsilon=1, delta=1e-9)
    with pytest.raises(InvalidLossError, match="delta"):
        session.synthesize("answers", epsilon=1)
    with pytest.raises(QueryError, match="bins"):
        session.synthesize("answers", epsilon=1, delta=1e-9, bins=1)
    assert session.remaining() == ApproxDP(Fraction(1), Fraction(1, 10**8))
