"""Homogeneity and background-knowledge attacks: the course's table, then the census; what
ℓ-diversity guarantees and what it does not."""

from __future__ import annotations

import pytest

from dalenius.attacks import homogeneity
from dalenius.attacks.voters import Scenario, scenario
from dalenius.core.errors import ConfigurationError


def test_the_course_4_anonymous_table_tells_bob_and_umeko() -> None:
    plain = homogeneity.run_course("k-anonymous", background=False)
    assert plain.certain_right == 4 and plain.certain == 4  # 130**, 30-40: all cancer
    assert "Bob: Cancer (certain)" in plain.stories
    told = homogeneity.run_course("k-anonymous", background=True)
    assert "Umeko: Flu (certain)" in told.stories  # no heart disease for the Japanese
    assert told.certain_right == 5


def test_the_course_l_diverse_table_resists_up_to_l_minus_2_facts() -> None:
    for negatives in (0, 1):  # ℓ = 3: up to ℓ - 2 ruled-out values leave two
        result = homogeneity.run_course("l-diverse", l=3, background=False, negatives=negatives)
        assert result.certain == 0
    assert homogeneity.run_course("l-diverse", l=3, background=True).certain == 0
    # ... but an attacker who rules out ℓ - 1 values learns everybody's disease.
    broken = homogeneity.run_course("l-diverse", l=3, background=False, negatives=2)
    assert broken.certain_right == broken.targets == 12


@pytest.fixture(scope="module")
def world() -> Scenario:
    return scenario(3_000, seed=11)


def test_the_raw_census_file_discloses_everybody(world: Scenario) -> None:
    result = homogeneity.run("raw", world=world)
    assert result.rate.estimate == 1.0


def test_the_l_diverse_census_file_gives_no_certainty_within_its_guarantee(world: Scenario) -> None:
    for negatives in (0, 1):  # ℓ = 3
        result = homogeneity.run("l-diverse", k=2, l=3, world=world, negatives=negatives)
        assert result.smallest_diversity >= 3
        assert result.certain == 0
        assert result.report().within_bound


def test_refusals_name_the_parameter() -> None:
    with pytest.raises(ConfigurationError, match="negatives"):
        homogeneity.run_course(negatives=-1)
    with pytest.raises(ConfigurationError, match="confidence"):
        homogeneity.run_course(confidence=0)
    with pytest.raises(ConfigurationError, match="no Dalenius release"):
        homogeneity.course_release("dalenius")
