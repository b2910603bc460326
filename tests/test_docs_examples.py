"""Every narrative ``python`` block in docs/ runs: the pages cannot drift from the code.

Each page's blocks run in order in a scratch folder with one namespace per page, so a later block
sees the names an earlier one made, as a reader following the page would. The folder holds what a
reader has after the tutorial's first step: ``dalenius-demo/`` (``dalenius demo``, made small here),
``adult.csv`` (the UCI Adult data the anonymity and course pages read) and the Adult catalog at
``tests/fixtures/adult.toml``, where a clone of the repository has it.

A block that cannot run says so on the page: an HTML comment ``<!-- not run: why -->`` on the line
right before its fence. The comment is visible to anyone editing the page, must give a reason, and
is rare (``MAX_NOT_RUN``); there is no other way to skip a block. Blocks written as ``>>>``
sessions are doctests and run in the doctest suites of their pages (``DOCTEST_PAGES``).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from dalenius.datasets import write_demo

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
ADULT_CATALOG = "tests/fixtures/adult.toml"
NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<why>[^>]*?)\s*-->\s*$")
# Pages whose ``>>>`` blocks are run by doctest (tests/mechanisms/test_docs.py,
# tests/accounting/test_docs.py).
DOCTEST_PAGES = {"accounting.md"} | {f"mechanisms/{p.name}" for p in DOCS.glob("mechanisms/*.md")}
# The pages whose blocks take more than a few seconds (attack trials, data written).
SLOW_PAGES = {
    "attacks/averaging.md",
    "attacks/index.md",
    "attacks/membership.md",
    "attacks/reconstruction.md",
    "demo-data.md",
}
MAX_NOT_RUN = 3
DEMO_PEOPLE = 2_000


@dataclass(frozen=True)
class Block:
    """One fenced ``python`` block of a page."""

    line: int
    code: str
    not_run: str | None  # the reason given in the marker, or None when the block runs

    @property
    def doctest(self) -> bool:
        return self.code.lstrip().startswith(">>>")


def blocks(text: str) -> list[Block]:
    """The ``python`` blocks of a page, in order, with their not-run markers."""
    found = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = NOT_RUN.search(before)
        found.append(
            Block(
                line=text[: match.start()].count("\n") + 1,
                code=match.group(1),
                not_run=marker.group("why") if marker else None,
            )
        )
    return found


def pages() -> list[str]:
    """Every page (relative to docs/) with at least one narrative block to run."""
    names = []
    for path in sorted(DOCS.rglob("*.md")):
        page = blocks(path.read_text(encoding="utf-8"))
        if any(not b.doctest and b.not_run is None for b in page):
            names.append(path.relative_to(DOCS).as_posix())
    return names


def _param(page: str) -> object:
    marks = [pytest.mark.slow] if page in SLOW_PAGES else []
    return pytest.param(page, marks=marks, id=page)


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small demo census, written once and copied for each page."""
    directory = tmp_path_factory.mktemp("demo") / "dalenius-demo"
    write_demo(directory, n=DEMO_PEOPLE, formats=("parquet",))
    return directory


@pytest.mark.parametrize("page", [_param(p) for p in pages()])
def test_page_blocks_run(
    page: str,
    demo: Path,
    shared_data: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shutil.copytree(demo, tmp_path / "dalenius-demo")
    (tmp_path / "adult.csv").symlink_to(shared_data / "adult.csv")
    # The Adult catalog of the repository's tests, at the path the pages give.
    shutil.copytree((REPO / ADULT_CATALOG).parent, (tmp_path / ADULT_CATALOG).parent)
    catalog = (REPO / ADULT_CATALOG).read_text(encoding="utf-8")
    (tmp_path / ADULT_CATALOG).write_text(
        catalog.replace("../../../shared/data/adult.csv", str(shared_data / "adult.csv")),
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict[str, object] = {"__name__": "__main__"}
    for block in blocks((DOCS / page).read_text(encoding="utf-8")):
        if block.doctest or block.not_run is not None:
            continue
        try:
            exec(compile(block.code, f"docs/{page}:{block.line}", "exec"), namespace)
        except Exception as error:
            pytest.fail(f"docs/{page}, the block at line {block.line} fails: {error!r}")


def test_not_run_markers_are_rare_and_give_a_reason() -> None:
    marked = []
    for path in sorted(DOCS.rglob("*.md")):
        for block in blocks(path.read_text(encoding="utf-8")):
            if block.not_run is not None:
                assert block.not_run, f"{path}:{block.line}: the marker gives no reason"
                marked.append(f"{path.name}:{block.line}")
    assert len(marked) <= MAX_NOT_RUN, marked


def test_doctest_blocks_are_run_elsewhere() -> None:
    for page in sorted(DOCS.rglob("*.md")):
        name = page.relative_to(DOCS).as_posix()
        if any(b.doctest for b in blocks(page.read_text(encoding="utf-8"))):
            assert name in DOCTEST_PAGES, f"docs/{name} has >>> blocks that no doctest suite runs"
