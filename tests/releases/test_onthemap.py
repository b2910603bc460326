"""OnTheMap's Multinomial–Dirichlet synthesizer: the exact sampling distribution, the guarantee's
arithmetic, neighbouring datasets, charging and refusals.

Data are generated with seeded numpy generators (data only); the noise comes from the OS
generator. Statistical tests state their false-alarm rate.
"""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import dalenius
from dalenius.core.catalog import load_catalog
from dalenius.core.errors import InvalidLossError, QueryError
from dalenius.core.loss import ApproxDP, PureDP
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.mechanisms.dirichlet import epsilon_for, polya, smallest_prior
from dalenius.releases.onthemap import OnTheMapRequest, plan_onthemap

CATALOG = """
[dataset]
name = "commutes"

[tables.jobs]
source = { csv = "jobs.csv" }
privacy_unit = { column = "pid", max_rows = 1, max_groups = 1 }

[tables.jobs.columns]
pid = { type = "int" }
home = { type = "str", keys = ["h1", "h2", "h3", "h4", "h5"] }
work = { type = "str", keys = ["w1", "w2", "w3"] }
wage = { type = "int", bounds = [0, 100] }
"""


def jobs(seed: int = 3, persons: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(seed)  # data only
    work = rng.choice(["w1", "w2", "w3"], size=persons, p=[0.6, 0.3, 0.1])
    home = rng.choice(["h1", "h2", "h3", "h4", "h5"], size=persons, p=[0.4, 0.3, 0.2, 0.1, 0.0])
    return pd.DataFrame(
        {
            "pid": np.arange(persons),
            "home": home,
            "work": work,
            "wage": rng.integers(0, 100, persons),
        }
    )


def write(tmp: Path, frame: pd.DataFrame) -> Path:
    frame.to_csv(tmp / "jobs.csv", index=False)
    (tmp / "commutes.toml").write_text(CATALOG, encoding="utf-8")
    return tmp / "commutes.toml"


def dm_pmf(counts: list[int], prior: Fraction, s: tuple[int, ...]) -> float:
    """The Dirichlet–multinomial probability of the synthetic histogram ``s`` (log-gamma form)."""
    a = [c + float(prior) for c in counts]
    m, total = sum(s), sum(a)
    log = math.lgamma(m + 1) + math.lgamma(total) - math.lgamma(total + m)
    for ai, si in zip(a, s, strict=True):
        log += math.lgamma(ai + si) - math.lgamma(ai) - math.lgamma(si + 1)
    return math.exp(log)


def histograms(k: int, m: int) -> list[tuple[int, ...]]:
    return [s for s in itertools.product(range(m + 1), repeat=k) if sum(s) == m]


@pytest.mark.statistical
def test_the_urn_draws_exactly_the_dirichlet_multinomial() -> None:
    """20,000 draws of 4 origins among 3: chi-square against the exact probabilities of all 15
    histograms (false-alarm rate 1e-4)."""
    counts, prior, m = [3, 0, 1], Fraction(1, 2), 4
    support = histograms(3, m)
    expected = np.array([dm_pmf(counts, prior, s) for s in support])
    assert abs(expected.sum() - 1) < 1e-12
    draws = 20_000
    index = {s: i for i, s in enumerate(support)}
    observed = np.zeros(len(support))
    for _ in range(draws):
        observed[index[tuple(int(v) for v in polya(counts, prior, m))]] += 1
    assert stats.chisquare(observed, expected * draws).pvalue > 1e-4


def test_the_guarantee_arithmetic_rounds_toward_safety() -> None:
    for eps, m, rows in [(Fraction(1), 100, 1), (Fraction(43, 5), 50, 1), (Fraction(2), 7, 3)]:
        alpha = smallest_prior(eps, m, rows)
        exact_alpha = m / math.expm1(float(eps) / rows)
        assert alpha >= exact_alpha and alpha - exact_alpha <= 0.0011
        assert epsilon_for(alpha, m, rows) <= eps  # fits: R·ln(1 + m/α) ≤ ε, exactly bounded
        assert epsilon_for(alpha - Fraction(1, 1000), m, rows) > eps  # the smallest on its grid
        assert float(epsilon_for(alpha, m, rows)) >= rows * math.log1p(m / float(alpha)) - 1e-15
    assert smallest_prior(Fraction(1), 100) == Fraction(29099, 500)  # 100/(e − 1) = 58.1977
    assert epsilon_for(Fraction(1), 0) == 0


def test_neighbouring_datasets_change_every_histograms_probability_by_at_most_e_eps() -> None:
    """Adding or removing one row of any origin: the largest log-ratio of the exact probabilities
    over all synthetic histograms is at most ln(1 + m/α), and reaches it (the bound is tight)."""
    m, k = 5, 3
    prior = smallest_prior(Fraction(1), m)
    bound = float(epsilon_for(prior, m))
    worst = 0.0
    support = histograms(k, m)
    for counts in ([0, 0, 0], [1, 0, 0], [4, 2, 0], [300, 1, 0], [2, 2, 2]):
        for i in range(k):
            bigger = list(counts)
            bigger[i] += 1
            for s in support:
                ratio = math.log(dm_pmf(bigger, prior, s) / dm_pmf(counts, prior, s))
                worst = max(worst, abs(ratio))
                assert abs(ratio) <= bound + 1e-9
    assert 0.95 * bound <= worst <= bound + 1e-9


def exact_table(path: Path, plan) -> np.ndarray:  # type: ignore[no-untyped-def]
    with DuckDBExecutor(load_catalog(path)) as engine:
        for table in plan.tables:
            engine.prepare(table)
        return plan.table_counts(engine.fetch(plan.sql("duckdb", 1).main))


def test_sizes_and_origins_follow_the_plan(tmp_path: Path) -> None:
    frame = jobs()
    path = write(tmp_path, frame)
    plan = plan_onthemap(
        load_catalog(path),
        OnTheMapRequest("jobs", "home", "work", per_destination=150),
        epsilon=Fraction(9),
        delta=None,
    )
    exact = exact_table(path, plan)
    truth = pd.crosstab(frame.work, frame.home).reindex(
        index=["w1", "w2", "w3"], columns=["h1", "h2", "h3", "h4", "h5"], fill_value=0
    )
    assert np.array_equal(exact, truth.to_numpy())
    synthetic = plan.synthesise(exact)
    sizes = synthetic.sum(axis=1)
    assert (sizes <= 150).all() and (sizes >= 0).all()
    assert synthetic.shape == (3, 5) and synthetic.dtype == np.int64
    # ε = 9 leaves a small prior: the synthetic origins of the biggest destination follow the data.
    share = synthetic[0] / max(sizes[0], 1)
    assert share[0] > share[4]


def test_a_release_is_charged_once_and_given_back_for_free(tmp_path: Path) -> None:
    session = dalenius.connect(write(tmp_path, jobs()), budget=10)
    result = session.onthemap("jobs", origin="home", destination="work", epsilon=8, prior=1)
    assert result.loss == PureDP(Fraction(8))
    assert session.remaining() == PureDP(Fraction(2))
    r = result.release
    assert r.per_destination == int(math.expm1(7.2))  # M = ⌊α(e^{ε_sample} − 1)⌋
    rows = result.to_pandas()
    assert len(rows) == r.rows and set(rows.columns) == {"home", "work"}
    again = session.onthemap("jobs", origin="home", destination="work", epsilon=8, prior=1)
    assert again.cached and np.array_equal(again.release.counts, r.counts)
    assert again.entry_id == result.entry_id
    assert session.remaining() == PureDP(Fraction(2))
    assert "ε 0.8 for the destination sizes" in str(result)


def test_an_approx_dataset_is_charged_pure_epsilon(tmp_path: Path) -> None:
    session = dalenius.connect(
        write(tmp_path, jobs()), budget=ApproxDP(Fraction(5), Fraction(1, 10**6))
    )
    session.onthemap("jobs", origin="home", destination="work", epsilon=4, per_destination=20)
    assert session.remaining() == ApproxDP(Fraction(1), Fraction(1, 10**6))


def test_refusals_name_the_parameter_and_spend_nothing(tmp_path: Path) -> None:
    session = dalenius.connect(write(tmp_path, jobs()), budget=10)
    cases = [
        (QueryError, "wage", {"origin": "wage", "destination": "work", "epsilon": 1, "prior": 1}),
        (
            QueryError,
            "different",
            {"origin": "home", "destination": "home", "epsilon": 1, "prior": 1},
        ),
        (QueryError, "per_destination", {"origin": "home", "destination": "work", "epsilon": 1}),
        (
            InvalidLossError,
            "prior=",
            {
                "origin": "home",
                "destination": "work",
                "epsilon": 1,
                "prior": 1,
                "per_destination": 100,
            },
        ),
        (
            InvalidLossError,
            "delta",
            {"origin": "home", "destination": "work", "epsilon": 1, "delta": 1e-6, "prior": 1},
        ),
        (
            InvalidLossError,
            "count_epsilon",
            {"origin": "home", "destination": "work", "epsilon": 1, "prior": 1, "count_epsilon": 2},
        ),
        (
            InvalidLossError,
            "no synthetic row",
            {"origin": "home", "destination": "work", "epsilon": Fraction(1, 100), "prior": 1},
        ),
        (
            QueryError,
            "nowhere",
            {
                "origin": "home",
                "destination": "work",
                "epsilon": 1,
                "prior": 100,
                "where": "nowhere = 1",
            },
        ),
    ]
    for error, text, kwargs in cases:
        with pytest.raises(error, match=text):
            session.onthemap("jobs", **kwargs)  # type: ignore[arg-type]
    assert session.remaining() == PureDP(Fraction(10))
    assert session.ledger.entries(principal="analyst") == []


def test_the_cli_writes_the_rows_and_gives_the_same_file_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dalenius.cli.main import main

    catalog = write(tmp_path, jobs())
    args = [
        "synthesize",
        "--method",
        "onthemap",
        "--catalog",
        str(catalog),
        "--table",
        "jobs",
        "--origin",
        "home",
        "--destination",
        "work",
        "--epsilon",
        "8",
        "--per-destination",
        "100",
        "--ledger",
        str(tmp_path / "l.sqlite"),
    ]
    assert main([*args, "--budget", "10", "--out", str(tmp_path / "a.csv"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["per_destination"] == 100 and doc["loss"]["epsilon"] == 8
    assert main([*args, "--out", str(tmp_path / "b.csv")]) == 0
    assert "no new cost" in capsys.readouterr().out
    first = (tmp_path / "a.csv").read_bytes()
    assert first == (tmp_path / "b.csv").read_bytes()
    assert len(first.splitlines()) == 1 + doc["rows"]
    assert main([*args, "--out", str(tmp_path / "c.csv")[:-4]]) == 2  # not .csv/.parquet


def test_a_derived_row_count_stays_within_the_size_limit(tmp_path: Path) -> None:
    plan = plan_onthemap(
        load_catalog(write(tmp_path, jobs())),
        OnTheMapRequest("jobs", "home", "work", prior=Fraction(1)),
        epsilon=Fraction(100),
        delta=None,
    )
    assert plan.per_destination == 1_000_000 // 3
    assert epsilon_for(plan.prior, plan.per_destination) <= plan.sample_epsilon
