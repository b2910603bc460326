"""Checks of a file source from its metadata alone, made before any budget is reserved.

A query whose source file has gone missing, cannot be opened, or no longer is the kind the catalog
declares cannot be answered; found while the data are read, after the data gate, the failure
would be charged. :func:`check_file` decides it from what the file system and the file's own
format markers say — existence, permission, the Parquet and DuckDB magic bytes, a CSV file's header
line (its schema) — never from a data row, so its verdict cannot depend on the data. Every front
end (Python, the command line, the HTTP gateway) refuses such a query the same way, at no cost,
through :meth:`dalenius.executors.base.Executor.check_source`.

What it cannot see is damage inside a file whose markers are intact (a Parquet page overwritten in
the middle): that is found only when the data are read, and reported as an engine failure.
"""

from __future__ import annotations

import glob
import os
import threading

from dalenius.core.catalog import Table
from dalenius.core.errors import CatalogError
from dalenius.executors.csv_text import csv_header

PARQUET_MAGIC = b"PAR1"
"""The four bytes a Parquet file starts and ends with (its footer follows the data)."""

DUCKDB_MAGIC = b"DUCK"
"""The four bytes at offset 8 of a DuckDB database file."""

FILE_KINDS = ("csv", "parquet", "duckdb")

_checked: dict[str, tuple[int, int, int]] = {}
"""Path → (inode, size, modification time) of a file that passed: unchanged, it is not reopened."""
_checked_lock = threading.Lock()


def check_file(table: Table) -> None:
    """Refuse ``table``'s source if its file (or any file its pattern matches) is missing,
    unreadable or not of the declared kind; other sources pass.

    A directory is left to the engine (Spark reads a folder of files as one source).

    Raises:
        CatalogError: naming the table and the path, with the reason and a fix.
    """
    kind = table.source.kind
    if kind not in FILE_KINDS:
        return
    location = table.source.location
    pattern = any(ch in location for ch in "*?[")
    paths = sorted(glob.glob(location)) if pattern else [location]
    if not paths:
        raise _refusal(table, f"no file matches the source pattern {_name(location)!r}.")
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError as exc:
            raise _refusal(
                table, f"the source file {_name(path)!r} cannot be found: {exc.strerror}."
            ) from None
        if os.path.isdir(path):
            continue
        stamp = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        with _checked_lock:
            if _checked.get(path) == stamp:
                continue
        _check_kind(table, path, stat.st_size)
        with _checked_lock:
            _checked[path] = stamp


def _check_kind(table: Table, path: str, size: int) -> None:
    kind = table.source.kind
    try:
        with open(path, "rb") as handle:
            head = handle.read(12)
            tail = b""
            if kind == "parquet" and size >= 8:
                handle.seek(size - 4)
                tail = handle.read(4)
    except OSError as exc:
        raise _refusal(
            table, f"the source file {_name(path)!r} cannot be read: {exc.strerror}."
        ) from None
    if kind == "parquet" and (size < 12 or head[:4] != PARQUET_MAGIC or tail != PARQUET_MAGIC):
        raise _refusal(
            table,
            f"the source file {_name(path)!r} is not a complete Parquet file (it lacks the PAR1 marker "
            "at its start or end: truncated, or another format).",
        )
    if kind == "duckdb" and head[8:12] != DUCKDB_MAGIC:
        raise _refusal(table, f"the source file {_name(path)!r} is not a DuckDB database file.")
    if kind == "csv":
        present = {name.lower() for name in csv_header(table)}
        missing = [c.name for c in table.stored_columns if c.name.lower() not in present]
        if missing:
            # The names found are not listed: they would quote the file's first line.
            raise _refusal(
                table,
                f"the source file {_name(path)!r} has no column {missing[0]!r} in its header line.",
                column=missing[0],
            )


def _name(path: str) -> str:
    """A source file as a refusal names it: its name, not its folder (which would tell an analyst
    of the gateway where the server keeps its data).
    """
    return os.path.basename(path.rstrip("/")) or path


def _refusal(table: Table, what: str, column: str | None = None) -> CatalogError:
    return CatalogError(
        what,
        table=table.name,
        column=column,
        why="a source is read only if its file exists and is of its declared kind; this was "
        "decided from the file's metadata, before any data was read or any budget spent.",
        fix="ask the custodian to restore the file (or correct the catalog's source), then ask "
        "again.",
    )
