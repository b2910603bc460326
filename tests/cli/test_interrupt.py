"""Ctrl-C while the engine loads a table: the CLI says it was interrupted (exit 130), and the
release, which had passed the data gate, stays charged — not "the engine failed"."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import duckdb
import pytest

from dalenius.cli.main import EXIT_INTERRUPTED, main
from dalenius.core.loss import PureDP
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger


def test_ctrl_c_during_a_csv_load_reads_as_an_interruption_and_stays_charged(
    adult_catalog_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def interrupted(self: DuckDBExecutor, table: object) -> None:
        raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")

    monkeypatch.setattr(DuckDBExecutor, "_load", interrupted)
    ledger = tmp_path / "ledger.sqlite"
    code = main(
        [
            "query", "--catalog", str(adult_catalog_path), "--ledger", str(ledger),
            "--budget", "1", "--epsilon", "0.1", "SELECT COUNT(*) FROM adult",
        ]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == EXIT_INTERRUPTED
    assert "interrupted (Ctrl-C)" in err and "engine failed" not in err
    book = open_ledger(str(ledger))
    try:
        assert book.remaining("analyst", "adult") == PureDP(Fraction(9, 10))
    finally:
        book.close()
