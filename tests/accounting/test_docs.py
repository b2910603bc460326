"""The examples in docs/accounting.md run and print what the page says."""

from __future__ import annotations

import doctest
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "accounting.md"


def test_accounting_page_examples_run() -> None:
    result = doctest.testfile(str(PAGE), module_relative=False, verbose=False, report=True)
    assert result.attempted >= 8
    assert result.failed == 0
