"""Every config key and hierarchy type of the anonymisation config is documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from dalenius.anonymity import config

DOCS = Path(__file__).resolve().parents[2] / "docs" / "anonymity"


@pytest.mark.parametrize(
    "key",
    [
        *config.SECTIONS,
        *config.DATA_KEYS,
        *config.ATTRIBUTE_KEYS,
        *config.PRIVACY_KEYS,
        *config.ANONYMIZE_KEYS,
        *config.HIERARCHY_TYPES,
    ],
)
def test_every_config_key_is_in_config_md(key: str) -> None:
    assert f"`{key}" in (DOCS / "config.md").read_text()


def test_the_example_config_loads() -> None:
    cfg = config.load_config(DOCS / "adult.toml")
    assert len(cfg.quasi_identifiers) == 8
    assert set(cfg.hierarchies) == set(cfg.quasi_identifiers)
