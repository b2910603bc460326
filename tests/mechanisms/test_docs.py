"""The mechanism pages run: every example in docs/mechanisms/*.md prints what the page says.

Also checks that the index lists every page and every page has the required sections, and that
every local-DP protocol page and every release page carries its privacy argument too.
"""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

import dalenius.mechanisms as mechanisms

ROOT = Path(__file__).resolve().parents[2] / "docs"
DOCS = ROOT / "mechanisms"
PAGES = sorted(p.name for p in DOCS.glob("*.md"))
MECHANISM_PAGES = [
    "dirichlet.md",
    "exponential.md",
    "gaussian.md",
    "gaussian_process.md",
    "join_truncation.md",
    "laplace.md",
    "min_people.md",
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


# Pages that release something under a privacy loss: each states its privacy argument.
PROTOCOL_PAGES = [f"ldp/{p.name}" for p in sorted(ROOT.glob("ldp/*.md"))] + [
    f"releases/{p.name}" for p in sorted(ROOT.glob("releases/*.md"))
]
# LDP pages about the machinery around the protocols (no protocol of their own).
LDP_OVERVIEW_PAGES = {"ldp/index.md", "ldp/collection.md", "ldp/simulation.md"}


@pytest.mark.parametrize("page", [p for p in PROTOCOL_PAGES if p not in LDP_OVERVIEW_PAGES])
def test_ldp_and_release_pages_have_their_privacy_argument(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8").lower()
    for section in ("## privacy (proof sketch)", "## references"):
        assert section in text, f"{page} lacks {section!r}"
    proof = text.split("## privacy (proof sketch)", 1)[1].split("\n## ", 1)[0]
    assert "definition" in proof or "differentially private" in proof, f"{page}: no definition"
    assert re.search(r"\(\w[^()]*\d{4}", proof), f"{page}: the proof sketch cites nothing"


def test_the_ldp_pages_excused_from_the_argument_exist() -> None:
    """An excused page that was renamed or removed must not go on excusing a new one."""
    assert set(PROTOCOL_PAGES) >= LDP_OVERVIEW_PAGES


def test_every_public_name_is_documented() -> None:
    text = "".join((DOCS / page).read_text(encoding="utf-8") for page in PAGES)
    missing = [name for name in mechanisms.__all__ if name not in text]
    assert missing == []
