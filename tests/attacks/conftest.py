"""Shared fixtures of the attack tests: a small seeded database of synthetic people."""

from __future__ import annotations

import pytest

from dalenius.attacks.population import Database as Written
from dalenius.attacks.population import make_people, write_population
from dalenius.attacks.targets import Database


@pytest.fixture(scope="module")
def people_db(tmp_path_factory: pytest.TempPathFactory) -> Written:
    """200 seeded people (data only: every target draws its noise from the OS)."""
    return write_population(make_people(200, seed=12), tmp_path_factory.mktemp("people"))


@pytest.fixture(scope="module")
def database(people_db: Written) -> Database:
    """The engine-backed database the targets open."""
    with Database(people_db.catalog) as db:
        yield db
