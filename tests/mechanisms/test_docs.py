"""The mechanism pages run: every example in docs/mechanisms/*.md prints what the page says.

Also checks that the index lists every page and every page has the required sections.
"""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

import dalenius.mechanisms as mechanisms

DOCS = Path(__file__).resolve().parents[2] / "docs" / "mechanisms"
PAGES = sorted(p.name for p in DOCS.glob("*.md"))
MECHANISM_PAGES = [
    "exponential.md",
    "gaussian.md",
    "gaussian_process.md",
    "laplace.md",
    "partition_selection.md",
    "perturbation.md",
    "randomized_response.md",
]


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page: str) -> None:
    result = doctest.testfile(str(DOCS / page), module_relative=False, verbose=False, report=True)
    assert result.failed == 0
    if page != "sampling.md":
        assert result.attempted >= 2


def test_index_links_every_page() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([a-z_]+\.md)", index))
    assert linked == set(PAGES) - {"index.md"}


@pytest.mark.parametrize("page", MECHANISM_PAGES)
def test_mechanism_pages_have_the_required_sections(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8").lower()
    for section in ("## definition", "## privacy (proof sketch)", "error bar", "## references"):
        assert section in text, f"{page} lacks {section!r}"


def test_every_public_name_is_documented() -> None:
    text = "".join((DOCS / page).read_text(encoding="utf-8") for page in PAGES)
    missing = [name for name in mechanisms.__all__ if name not in text]
    assert missing == []
