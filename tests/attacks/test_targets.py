"""The target interface: exact, naive-noisy and Dalenius answers, and what each counts."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dalenius.attacks.population import Database as Written
from dalenius.attacks.population import make_people, write_population
from dalenius.attacks.report import AttackReport, Rate, best_test_bound, clopper_pearson
from dalenius.attacks.targets import (
    Answer,
    DaleniusTarget,
    Database,
    NaiveNoisyTarget,
    RawTarget,
    Target,
    TargetSpec,
)
from dalenius.core.errors import BudgetExceededError, ConfigurationError

COUNT_SECRET = "SELECT SUM(secret) FROM people"


def truth_secret(people_db: Written) -> int:
    return int(sum(people_db.truth.column("secret").to_pylist()))


def test_raw_is_exact_and_claims_no_privacy(database: Database, people_db: Written) -> None:
    target = TargetSpec("raw").open(database)
    assert isinstance(target, RawTarget) and isinstance(target, Target)
    assert target.ask(COUNT_SECRET).value == truth_secret(people_db)
    assert target.ask("SELECT COUNT(*) FROM people WHERE age < 0").value == 0
    assert target.queries_asked == 2 and target.epsilon_spent is None and target.budget is None


def test_naive_adds_fresh_noise_every_time_and_keeps_no_budget(
    database: Database, people_db: Written
) -> None:
    target = TargetSpec("naive", epsilon=1).open(database)
    assert isinstance(target, NaiveNoisyTarget)
    answers = np.array([target.ask(COUNT_SECRET).value for _ in range(150)])
    # Discrete Laplace of scale 1: variance 2e/(e-1)^2 ≈ 1.84; the mean of 150 is within 5 sd.
    assert len(set(answers)) > 3
    assert abs(answers.mean() - truth_secret(people_db)) < 5 * np.sqrt(1.84 / 150)
    assert target.queries_asked == 150 and target.epsilon_spent == 150
    assert target.budget is None


def test_dalenius_caches_repeats_and_refuses_beyond_the_budget(database: Database) -> None:
    target = TargetSpec("dalenius", epsilon="1/2", budget=1).open(database)
    assert isinstance(target, DaleniusTarget)
    first = target.ask(COUNT_SECRET)
    again = target.ask(COUNT_SECRET)
    assert again.cached and again.value == first.value and again.epsilon == 0
    target.ask("SELECT COUNT(*) FROM people")
    with pytest.raises(BudgetExceededError):
        target.ask("SELECT COUNT(*) FROM people WHERE age > 30")
    assert target.queries_asked == 3 and target.epsilon_spent == 1 == target.budget
    target.close()
    # A fresh target is a fresh analyst with a full budget, on the same engine.
    fresh = TargetSpec("dalenius", epsilon="1/2", budget=1).open(database)
    assert fresh.ask("SELECT COUNT(*) FROM people WHERE age > 30").epsilon == Fraction(1, 2)
    fresh.close()


def test_spec_errors_name_the_parameter_and_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="unknown target 'cloud'"):
        TargetSpec("cloud")
    with pytest.raises(ConfigurationError, match="needs epsilon"):
        TargetSpec("naive")
    with pytest.raises(ConfigurationError, match="gateway URL needs"):
        TargetSpec("naive", epsilon=1, url="http://localhost:8000")
    assert TargetSpec("dalenius", epsilon="0.25").total_budget == Fraction(1, 4)
    assert TargetSpec("naive", epsilon=1).label == "naive (ε=1 per query, no budget)"


def test_answer_value_refuses_a_table() -> None:
    with pytest.raises(ConfigurationError, match="not a single number"):
        _ = Answer(("a", "b"), ((1, 2),)).value
    assert Answer(("s",), ((None,),)).value == 0.0


def test_population_is_seeded_and_declares_public_bounds(tmp_path: Path) -> None:
    a, b = make_people(100, seed=3), make_people(100, seed=3)
    assert a.equals(b) and not a.equals(make_people(100, seed=4))
    assert set(a.column("secret").to_pylist()) <= {0, 1}
    written = write_population(a, tmp_path)
    height = written.catalog.tables[0].column("height_cm")
    assert height is not None and height.bounds == (130, 210)
    with pytest.raises(ConfigurationError, match="n must be"):
        make_people(0, seed=1)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (412, 1000), (1, 2)])
def test_clopper_pearson_matches_the_beta_quantiles(k: int, n: int) -> None:
    from scipy.stats import beta

    low, high = clopper_pearson(k, n, 0.95)
    expected_low = 0.0 if k == 0 else beta.ppf(0.025, k, n - k + 1)
    expected_high = 1.0 if k == n else beta.ppf(0.975, k + 1, n - k)
    assert low == pytest.approx(expected_low, abs=1e-7)
    assert high == pytest.approx(expected_high, abs=1e-7)


def test_report_knows_whether_it_is_within_its_bound() -> None:
    bound = best_test_bound(1.0)
    inside = AttackReport("x", "dalenius", "guess", Rate(70, 100), bound=bound)
    beyond = AttackReport("x", "dalenius", "guess", Rate(95, 100), bound=bound)
    assert inside.within_bound and beyond.within_bound is False
    doc = inside.to_dict()
    assert doc["success"]["trials"] == 100 and doc["bound"]["value"] == pytest.approx(bound)


def test_naive_noise_and_the_games_coin_come_from_os_urandom(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import random

    from dalenius.attacks.game import coin

    calls = {"n": 0}
    real = os.urandom

    def counting(n: int) -> bytes:
        calls["n"] += 1
        return real(n)

    def forbidden(*args: object, **kwargs: object) -> object:
        raise AssertionError("a non-cryptographic generator was used")

    monkeypatch.setattr(os, "urandom", counting)
    monkeypatch.setattr(np.random, "default_rng", forbidden)
    for name in ("laplace", "normal", "random", "randint", "choice"):
        monkeypatch.setattr(np.random, name, forbidden)
    for name in ("random", "randint", "getrandbits", "choice"):
        monkeypatch.setattr(random, name, forbidden)
    target = TargetSpec("naive", epsilon=1).open(database)
    target.ask("SELECT COUNT(*) FROM people")
    target.ask("SELECT AVG(height_cm) FROM people")
    assert calls["n"] >= 2
    before = calls["n"]
    assert coin() in (0, 1) and calls["n"] == before + 1
