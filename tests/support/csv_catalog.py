"""A DuckDB session over a few small CSV files and a catalog written inline by a test.

Tests that need a table shape of their own (NULL keys, a public lookup beside a private table)
write the files and the catalog's TOML beside them; this writes both and opens the session, with
a throwaway ledger, so the test states only its data and its declarations.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dalenius.core.catalog import load_catalog
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger


def csv_session(folder: Path, files: Mapping[str, str], catalog: str) -> Session:
    """Write each of ``files`` (name → text) and ``catalog`` (TOML, reading them by name) into
    ``folder``; a DuckDB session over that catalog with an in-memory ledger."""
    for name, text in files.items():
        (folder / name).write_text(text)
    (folder / "catalog.toml").write_text(catalog)
    loaded = load_catalog(folder / "catalog.toml")
    return Session(loaded, ledger=open_ledger(None), executor=DuckDBExecutor(loaded))
