"""Shared fixtures: paths to the shared data and the test catalogs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

# Property tests check values, never time: Hypothesis's per-example deadline (200 ms) only makes
# them fail on a loaded machine. Tests that set their own settings keep them.
settings.register_profile("dalenius", deadline=None)
settings.load_profile("dalenius")

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data folder; fails loudly (never skips) when it is missing."""
    if not (SHARED_DATA / "adult.csv").exists():
        pytest.fail(
            f"shared data not found at {SHARED_DATA}: tests need ../shared/data beside the repo"
        )
    return SHARED_DATA


@pytest.fixture(scope="session")
def adult_catalog_path(shared_data: Path) -> Path:
    """Catalog of the UCI Adult table (row-level privacy)."""
    return FIXTURES / "adult.toml"
