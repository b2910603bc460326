"""How the text of a CSV source becomes rows, the same way on every engine that reads files.

A registered CSV file may hold any bytes. Whatever it holds, a query on it ends the same way: each
line that is a row is read, and each line that cannot be read as one is *skipped* and counted for
the custodian (``dalenius catalog check``), never an error after the data gate. The rules:

* The dialect is fixed (RFC 4180: comma, double quotes, a quote doubled inside a quoted value, one
  header line naming the columns); nothing is sniffed from the rows, so no row can change how the
  others are read.
* A line ends at LF or CRLF, mixed freely in one file (a CRLF file with one LF line appended
  reads every line). A quoted value may hold line breaks. A last line without a line break is
  read. A UTF-8 byte-order mark before the header is ignored. An unclosed quote runs to the end
  of the file, as in every CSV reader: that row's last value holds the rest of the file.
* A row with more fields than the header is skipped (``too many fields``): an unquoted comma inside
  a value shifts every later field, and which field is extra cannot be known.
* A row with fewer fields than the header is skipped (``too few fields``), not padded with NULLs:
  it is most often a line cut short (a truncated write, a stray line break), and padding would
  count a fragment as a person whose remaining values are missing.
* A row holding a NUL byte (``NUL byte``), or bytes that are not UTF-8 (``invalid UTF-8``: the
  Unicode replacement character U+FFFD counts too, as Spark decodes invalid bytes to it), is
  skipped: neither is text (PostgreSQL's ``text`` cannot even store a NUL).
* A line longer than :data:`MAX_LINE_BYTES` is skipped (``line too long``; DuckDB only).

An empty field is the empty string, which every declared type reads as NULL
(:mod:`dalenius.executors.convert`); a field the row does not have is NULL. A value that does not
parse as its declared type is not a skipped row: it is read as NULL.
"""

from __future__ import annotations

import csv
import glob
import logging
from collections.abc import Callable, Sequence

from dalenius.core.catalog import Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import CatalogError
from dalenius.executors.convert import sql_string

_log = logging.getLogger("dalenius.executors")

MAX_LINE_BYTES = 1 << 27
"""The longest CSV line read (128 MiB); a longer line is skipped like any malformed line."""

EXTRA = "__dalenius_extra"
"""A column read after the header's: a row holding a value there has too many fields."""

SKIP = "__dalenius_skip"
"""The column of each read line's reason to be skipped (NULL: the line is a row)."""

ABSENT_SQL = "chr(0) || 'absent'"
"""SQL of the text a reader reports for a field the row does not have: it contains a NUL byte, so
no field that is read can equal it without being skipped for that byte."""

ABSENT = "\x00absent"
"""The value of :data:`ABSENT_SQL` (for readers configured from Python)."""

REPLACEMENT = "\ufffd"
"""U+FFFD, which a reader that decodes leniently puts in place of bytes that are not UTF-8."""

REJECTED = {
    "INVALID ENCODING": "invalid UTF-8",
    "INVALID UNICODE": "invalid UTF-8",
    "LINE SIZE OVER MAXIMUM": "line too long",
    "UNQUOTED VALUE": "unclosed quote",
    "MISSING COLUMNS": "too few fields",
    "TOO MANY COLUMNS": "too many fields",
}
"""DuckDB's reasons for a rejected line, in the words of the module notes."""


def csv_header(table: Table) -> list[str]:
    """The column names in the first line of ``table``'s CSV file (its schema; no data row read).

    A byte-order mark before the first name is not part of it.

    Raises:
        CatalogError: the file cannot be opened or has no header line.
    """
    path = table.source.location
    matches = sorted(glob.glob(path))
    try:
        with open(
            matches[0] if matches else path, newline="", encoding="utf-8-sig", errors="replace"
        ) as handle:
            header = next(csv.reader(handle), None)
    except OSError as exc:
        raise CatalogError(
            f"cannot read the CSV file {path!r}: {exc.strerror}.",
            table=table.name,
            fix="check the source path in the catalog.",
        ) from None
    except csv.Error:
        header = None
    if not header:
        raise CatalogError(
            f"the CSV file {path!r} has no header line.",
            table=table.name,
            fix="write the column names on the first line of the file.",
        )
    return header


def duckdb_reader(location: str, header: Sequence[str]) -> str:
    """``read_csv`` of the module's rules, every column ``VARCHAR``, plus :data:`EXTRA`.

    ``strict_mode = false`` lets LF and CRLF mix (strict mode stops the whole file at the first
    line break of the other kind); ``null_padding`` reads a short row with NULL for the fields
    it lacks, and :data:`ABSENT_SQL` as the NULL text keeps an empty field the empty string, so
    :func:`skip_reason` can tell the two apart. DuckDB cannot pad rows in parallel when a quoted
    value may hold a line break, so the file is read by one thread. Lines DuckDB itself rejects
    (invalid UTF-8, over :data:`MAX_LINE_BYTES`) are recorded in the temporary table
    ``__dalenius_rejects``, which the loader counts and drops.
    """
    columns = ", ".join(f"{sql_string(name)}: 'VARCHAR'" for name in [*header, EXTRA])
    options = (
        f"header = true, auto_detect = false, columns = {{{columns}}}, delim = ',', "
        f"quote = '\"', escape = '\"', max_line_size = {MAX_LINE_BYTES}, strict_mode = false, "
        f"null_padding = true, nullstr = {ABSENT_SQL}, parallel = false, ignore_errors = true, "
        "store_rejects = true, rejects_table = '__dalenius_rejects', "
        "rejects_scan = '__dalenius_reject_scans'"
    )
    return f"read_csv({sql_string(location)}, {options})"


def skip_reason(
    dialect: Dialect, header: Sequence[str], contains: Callable[[str, str], str]
) -> str:
    """SQL of a read line's reason to be skipped (the module's words), NULL for a row.

    ``contains(value, text_sql)`` is the engine's SQL for "``value`` contains the text".
    """
    quoted = [dialect.quote(name) for name in header]
    nul = " OR ".join(contains(q, "chr(0)") for q in quoted)
    bad = " OR ".join(contains(q, sql_string(REPLACEMENT)) for q in quoted)
    return (
        f"CASE WHEN {dialect.quote(EXTRA)} IS NOT NULL THEN 'too many fields' "
        f"WHEN {quoted[-1]} IS NULL THEN 'too few fields' "
        f"WHEN {nul} THEN 'NUL byte' WHEN {bad} THEN 'invalid UTF-8' END"
    )


def log_skipped(table: str, skipped: dict[str, int]) -> None:
    """Write the lines of ``table`` skipped, by reason, to the custodian's log (if any)."""
    if skipped:
        _log.warning(
            "table %s: %d CSV line(s) skipped (%s)",
            table,
            sum(skipped.values()),
            ", ".join(f"{n} {why}" for why, n in sorted(skipped.items())),
        )
