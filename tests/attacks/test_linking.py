"""The linking attack: a voter roll re-identifies a de-identified census file; k-anonymity holds
it to 1/k; a Dalenius synthetic release holds no person's record."""

from __future__ import annotations

import datetime

import pytest

from dalenius.attacks import linking
from dalenius.attacks.published import check_against, publish
from dalenius.attacks.voters import Scenario, scenario, voter_roll
from dalenius.core.errors import ConfigurationError
from dalenius.datasets import generate_people


@pytest.fixture(scope="module")
def world() -> Scenario:
    """3,000 seeded people, half of them in the released file, the registered adults on a roll."""
    return scenario(3_000, seed=11)


def test_the_voter_roll_lists_registered_adults_with_partial_overlap(world: Scenario) -> None:
    roll = world.voters
    assert roll.column_names == ["name", "zip", "date_of_birth", "sex"]
    born = roll.column("date_of_birth").to_pylist()
    assert max(born) <= datetime.date(2006, 1, 1)  # everybody is 18 on the census day
    overlap = world.truth.overlap
    assert 0 < overlap < roll.num_rows  # some voters are not in the file ...
    assert overlap < world.released.num_rows  # ... and some released people are not voters


def test_the_voter_roll_is_seeded() -> None:
    people = generate_people(500, seed=3)
    a, ids_a = voter_roll(people, seed=5)
    b, ids_b = voter_roll(people, seed=5)
    assert a.equals(b) and (ids_a == ids_b).all()
    c, _ = voter_roll(people, seed=6)
    assert not a.equals(c)


def test_linking_re_identifies_the_raw_file(world: Scenario) -> None:
    result = linking.run("raw", world=world)
    assert result.uniqueness["(zip, date_of_birth, sex)"] > 0.95
    # Only the voters listed under a stale ZIP code (5%) escape.
    assert result.rate.interval(0.95)[0] > 0.85
    assert result.claims_right >= 0.99 * result.claims
    assert result.guess_in.estimate == 1.0  # a unique match reveals the sensitive value


@pytest.mark.parametrize("k", [2, 10])
def test_a_k_anonymous_file_holds_linking_to_one_in_k(world: Scenario, k: int) -> None:
    result = linking.attack(publish(world, "k-anonymous", k=k), world)
    assert result.claims == 0  # nobody matches a single record
    assert result.smallest_class >= k
    assert result.expected_rate <= 1 / k  # the exact expectation of the random pick
    assert result.bound == 1 / k
    assert result.report().within_bound


@pytest.mark.statistical
def test_a_dalenius_synthetic_release_holds_no_persons_record(world: Scenario) -> None:
    """False-alarm rate below 1e-4: the in/out gap bound is about four standard deviations."""
    issued = publish(world, "dalenius", epsilon=1.0)
    released = issued.published.table.column_names
    assert "zip" not in released and "date_of_birth" not in released  # no public domain
    result = linking.attack(issued, world)
    assert result.picks_right == 0 and result.claims_right == 0
    # What the attacker guesses is the population's pattern: as good outside the file as in it
    # (about 600 voters each side; the gap's standard deviation is about 2.6 points).
    assert abs(result.guess_in.estimate - result.guess_out.estimate) < 0.1


def test_the_report(world: Scenario) -> None:
    doc = linking.run("raw", world=world).to_dict()
    assert doc["attack"] == "linking" and doc["success"]["trials"] == world.truth.overlap
    assert doc["measures"]["uniqueness"]["(zip, date_of_birth, sex)"] > 0.95


def test_bad_arguments_are_refused_before_any_data_is_read() -> None:
    with pytest.raises(ConfigurationError, match="unknown release 'anonymous'"):
        check_against("anonymous")
    with pytest.raises(ConfigurationError, match="release_share"):
        scenario(100, release_share=1.5)
    with pytest.raises(ConfigurationError, match=r"release_share must be a share in \(0, 1\]"):
        scenario(100, release_share=0)


@pytest.mark.statistical
def test_dalenius_answers_release_no_group_of_the_quasi_identifiers(world: Scenario) -> None:
    """docs/attacks/linking.md: asked for the file as counts, Dalenius returns no row.

    Each group here holds one or two people; a group is released only above a noisy threshold
    set so that a one-person group appears with probability at most δ = 1e-9 (false alarm below
    2e-6 over the ~1,500 groups).
    """
    import tomllib

    import dalenius
    from dalenius.core.catalog import Catalog
    from dalenius.core.loss import ApproxDP
    from dalenius.datasets.schema import catalog_text

    doc = tomllib.loads(catalog_text("released", "the released half"))
    del doc["tables"]["visits"]
    doc["tables"]["people"]["source"] = world.released
    session = dalenius.connect(Catalog.from_dict(doc), budget=ApproxDP(1, 1e-9))
    sql = (
        "SELECT zip, date_of_birth, sex, COUNT(*) AS n FROM people GROUP BY zip, date_of_birth, sex"
    )
    assert len(session.query(sql, epsilon=1, delta=1e-9).to_pandas()) == 0
