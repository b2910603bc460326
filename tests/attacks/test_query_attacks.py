"""Each query attack succeeds against raw SQL and is held to its DP bound against Dalenius.

Data are seeded; noise always comes from the OS. The bound checks are statistical: the 99.9%
Clopper–Pearson interval of the measured success must reach down to the bound, so a correct
system fails one of them with probability at most 0.05%.
"""

from __future__ import annotations

import math

import pytest

from dalenius.attacks import auxiliary, averaging, differencing, membership, reconstruction
from dalenius.attacks.game import written
from dalenius.attacks.report import AttackReport, best_test_bound
from dalenius.attacks.targets import TargetSpec

RAW = TargetSpec("raw")
STRICT = 0.999


def held_to_bound(report: AttackReport) -> None:
    assert report.bound is not None and report.rate is not None
    low, _ = report.rate.interval(STRICT)
    assert low <= report.bound, f"{report.rate.estimate:.3f} beats the bound {report.bound:.3f}"


def test_differencing_is_exact_on_raw_sql() -> None:
    with written(differencing.worlds(60, 3)) as (_, with_one):
        target = RAW.open(with_one)
        assert differencing.difference(target, "age") == differencing.VICTIM_AGE
        assert differencing.difference(target) == 1
    report = differencing.run(RAW, people=60, trials=20)
    assert report.rate is not None and report.rate.successes == 20
    assert report.bound is None and report.queries == 2


@pytest.mark.statistical
def test_differencing_against_dalenius_stays_within_its_bound() -> None:
    spec = TargetSpec("dalenius", epsilon="1/2", budget=1)
    report = differencing.run(spec, people=60, trials=60)
    assert report.bound == pytest.approx(best_test_bound(1.0))
    held_to_bound(report)
    assert report.epsilon_spent == 1 and report.refused == 0


@pytest.mark.statistical
def test_averaging_recovers_the_value_from_the_naive_system_only() -> None:
    naive = averaging.measure(TargetSpec("naive", epsilon=1), people=60, trials=15, asks=50)
    assert naive.report.rate is not None and naive.report.rate.estimate >= 0.8
    # The RMS error of the mean shrinks like 1/√n: after 50 asks it is far below the first one's.
    assert naive.rms_error[-1] < 0.35 * naive.rms_error[0]
    cached = averaging.measure(
        TargetSpec("dalenius", epsilon="1/2", budget=1), people=60, trials=20, asks=50
    )
    assert cached.report.queries == 2  # the second answer came from the ledger's record
    assert cached.rms_error[-1] == cached.rms_error[0]  # repeating taught nothing
    assert cached.report.epsilon_spent == pytest.approx(0.5)
    held_to_bound(cached.report)
    reworded = averaging.measure(
        TargetSpec("dalenius", epsilon="1/4", budget=1),
        strategy="reword",
        people=60,
        trials=20,
        asks=50,
    )
    assert reworded.report.queries == 4 and reworded.report.refused == 1
    held_to_bound(reworded.report)


def test_reconstruction_recovers_95_percent_of_bits_with_n_log_n_queries_on_raw() -> None:
    measured = reconstruction.measure(RAW, people=200)
    report = measured.report
    assert report.queries == math.ceil(200 * math.log(200))
    assert report.rate is not None and report.rate.estimate >= 0.95
    assert measured.curve[-1][1] >= 0.95


@pytest.mark.statistical
def test_reconstruction_against_dalenius_is_bounded_by_the_budget() -> None:
    spec = TargetSpec("dalenius", epsilon="1/100", budget=1)
    report = reconstruction.measure(spec, people=200).report
    assert report.queries == 100 and report.refused == 1  # the budget stopped the attacker
    held_to_bound(report)
    assert report.rate is not None and report.rate.estimate < 0.7  # near chance in practice


def test_subset_questions_are_distinct_and_select_about_half() -> None:
    subsets = reconstruction.random_subsets(1500, 40)  # of the 41·40 = 1640 in the family
    assert (
        len({(a, b) for a, b in zip(subsets.a.tolist(), subsets.b.tolist(), strict=True)}) == 1500
    )
    assert 0.4 < subsets.matrix.mean() < 0.6
    assert subsets.question(0).startswith("SELECT SUM(secret) FROM people WHERE (person_id * ")
    from dalenius.core.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="only 1640 distinct subsets"):
        reconstruction.random_subsets(2000, 40)


def test_lp_decoder_recovers_exact_answers() -> None:
    pytest.importorskip("scipy")
    report = reconstruction.measure(RAW, people=40, queries=160, decoder="lp").report
    assert report.rate is not None and report.rate.estimate == 1.0


@pytest.mark.statistical
def test_membership_from_exact_counts_and_its_bound_under_dalenius() -> None:
    raw = membership.run(RAW, people=300, trials=20)
    assert raw.rate is not None and raw.rate.successes == 20
    dp = membership.run(TargetSpec("dalenius", epsilon="1/2"), people=300, trials=60)
    assert dp.bound == pytest.approx(best_test_bound(0.5))
    held_to_bound(dp)


@pytest.mark.statistical
def test_auxiliary_information_works_with_or_without_john() -> None:
    raw = auxiliary.measure(RAW, people=600, trials=12)
    assert raw.with_john.estimate == raw.without_john.estimate == 1.0
    dp = auxiliary.measure(TargetSpec("dalenius", epsilon=1), people=600, trials=60)
    # DP bounds how much John's presence changes the outcome: P(with) <= e^ε P(without).
    low_with = dp.with_john.interval(STRICT)[0]
    high_without = dp.without_john.interval(STRICT)[1]
    assert low_with <= math.e * high_without
    # ... and the attacker still learns John's height: the women's average is public knowledge.
    assert dp.report.rate is not None and dp.report.rate.estimate >= 0.6


def test_attacks_refuse_bad_arguments_before_any_work() -> None:
    from dalenius.core.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="trials must be"):
        differencing.run(RAW, trials=0)
    with pytest.raises(ConfigurationError, match="unknown strategy"):
        averaging.measure(RAW, strategy="shout")
    with pytest.raises(ConfigurationError, match="unknown decoder"):
        reconstruction.measure(RAW, decoder="magic")
