"""The embedded default executor: DuckDB, in process, over CSV, Parquet or DuckDB files.

In-memory tables (``frame`` sources built in Python: pandas, Polars, Arrow, DuckDB relations) are
registered with the connection and scanned in place: pandas columns and Arrow buffers are read
without a copy (Polars through its Arrow view). A DuckDB relation is a query on another
connection, so it is run once and its result kept as an Arrow table.

Each catalog table becomes a relation named after it, exposing only the declared columns, each
converted to its declared type with ``TRY_CAST`` (a malformed value becomes NULL rather than an
error, so no query can fail because of one row's content). CSV files are loaded into memory once, on
first use; Parquet files and DuckDB databases are read in place, so a 10-million-row table is never
copied into Python. Each load into memory runs inside the observer of
:func:`dalenius.executors.base.observe_loads`, if one is set (the CLI draws a bar with it).

A table with a declared ``max_row_count`` is counted when it is opened (CSV: loaded then) and
refused if larger — at registration or reload, never at query time. A dataset in constant-time mode
(``constant_time = true``) has every table loaded into memory when it is opened, and a table whose
privacy unit is an id column keeps at most ``max_rows`` rows of each person, chosen by a keyed hash
drawn once per load: a query then never sees one person's excess, so its running time cannot grow
with it.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import re
import threading
from collections.abc import Sequence

import duckdb

from dalenius.core.catalog import Catalog, Column, Table
from dalenius.core.dialect import DUCKDB
from dalenius.core.errors import CatalogError, ExecutionError
from dalenius.core.frames import FRAME_KIND, frame_type
from dalenius.core.rng import system_random
from dalenius.core.unit import IdUnit, stored_name
from dalenius.executors.base import (
    Executor,
    Row,
    Watchdog,
    files_fingerprint,
    loading,
    table_view,
    time_limit_error,
)
from dalenius.executors.csv_text import (
    REJECTED,
    SKIP,
    csv_header,
    duckdb_reader,
    log_skipped,
    skip_reason,
)
from dalenius.executors.sources import check_file

_log = logging.getLogger("dalenius.executors")

DUCKDB_TYPES = {
    "int": "BIGINT",
    "float": "DOUBLE",
    "str": "VARCHAR",
    "bool": "BOOLEAN",
    "date": "DATE",
}


class DuckDBExecutor(Executor):
    r"""Exact aggregates in an in-process DuckDB database.

    Example:
        >>> from dalenius.core.catalog import parse_catalog
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "t.csv").write_text("x\n1\n2\n")
        >>> cat = parse_catalog('[tables.t]\nsource = { csv = "t.csv" }\nprivacy_unit = "row"\n'
        ...                     'columns = { x = { type = "int", bounds = [0, 9] } }', base_dir=d)
        >>> ex = DuckDBExecutor(cat); ex.prepare(cat.tables[0])
        >>> ex.fetch('SELECT SUM("x") FROM "t"')
        [(3,)]
    """

    dialect = DUCKDB

    def __init__(
        self,
        catalog: Catalog,
        *,
        threads: int | None = None,
        disabled_optimizers: str | None = None,
    ) -> None:
        super().__init__(catalog)
        # No progress bar: a long query would otherwise print it on the process's output.
        self._con = duckdb.connect(":memory:")
        # In a Jupyter kernel without ipywidgets DuckDB refuses to touch the setting (it cannot
        # draw a bar there either), having already switched the bar off; connecting from a
        # notebook must not fail for it (the docs' executed notebook checks this).
        with contextlib.suppress(duckdb.Error):
            self._con.execute("SET enable_progress_bar = false")
        if threads:
            self._con.execute(f"SET threads = {int(threads)}")
        if disabled_optimizers is None and catalog.constant_time:
            disabled_optimizers = CONSTANT_TIME_DISABLED_OPTIMIZERS
        if disabled_optimizers:
            quoted = disabled_optimizers.replace("'", "''")
            self._con.execute(f"SET disabled_optimizers = '{quoted}'")
        self._lock = threading.Lock()
        self._running_lock = threading.Lock()
        self._running: int | None = None
        self._watchdog = Watchdog("dalenius-duckdb-time-limit")
        self._loaded: set[str] = set()
        self._attached: dict[str, str] = {}
        self._frames: dict[str, str] = {}
        self._skipped: dict[str, dict[str, int]] = {}
        self._scans: dict[tuple[str, tuple[str, ...]], str] = {}
        self._stored_types: dict[str, dict[str, str]] = {}
        """Per table read in place, each column's type in its source (lower-case names)."""
        for table in catalog.tables:
            self._check_columns(table)
        for table in catalog.tables:
            if catalog.constant_time or table.max_row_count is not None:
                self.prepare(table)

    @property
    def engine_version(self) -> str:
        """``duckdb`` and its version (deadlines are calibrated per engine version)."""
        return f"duckdb {duckdb.__version__}"

    def interrupt(self, thread: int) -> None:
        """Stop the query that ``thread`` is running now, if any (a missed deadline)."""
        with self._running_lock:
            if self._running == thread:
                self._con.interrupt()

    def prepare(self, table: Table) -> None:
        """Create the relation for ``table`` (CSV: load into memory; others: a view), once."""
        with self._lock:
            if table.name not in self._loaded:
                try:
                    self._load(table)
                except duckdb.InterruptException as exc:
                    # No time limit watches a load: only the user's Ctrl-C interrupts it, and it
                    # must read as the interruption it is, not as an engine failure.
                    raise KeyboardInterrupt("the table's load was interrupted") from exc

    def fetch(self, sql: str) -> list[Row]:
        """Run ``sql`` and return its rows (interrupted at :attr:`time_limit`, if set)."""
        with self._lock:
            with self._running_lock:
                self._running = threading.get_ident()
            limit = self.time_limit
            try:
                with self._watchdog.armed(limit, self._con.interrupt) as fired:
                    rows = self._con.execute(sql).fetchall()
                if fired.is_set():  # finished between two interruptions: still past the limit
                    raise time_limit_error("DuckDB", limit or 0)
                return rows
            except duckdb.InterruptException as exc:
                raise time_limit_error("DuckDB", limit or 0) from exc
            except duckdb.Error as exc:
                raise ExecutionError(
                    f"DuckDB failed to compute the exact aggregate: {exc}"
                ) from exc
            finally:
                with self._running_lock:
                    self._running = None

    def scoped(self, sql: str, reads: Sequence[tuple[str, Sequence[str]]]) -> str:
        """``sql`` with each table it reads through a view replaced by a relation of the columns
        it reads, converted as the view converts them.

        The view converts every declared column, and DuckDB binds each conversion on every
        query, read or not: a third of a small query's time. A common table expression of the
        same name, ``NOT MATERIALIZED`` so that DuckDB plans through it as through the view,
        shadows the view in this statement only. Tables held in memory (CSV, constant-time mode)
        are converted once when loaded and are left alone, and so are a table not yet loaded, a
        column the catalog does not declare and a table whose name starts with ``__`` (the
        prefix of the exact SQL's own expressions): they are read through the view.
        """
        scans = [self._scan(name, tuple(columns)) for name, columns in reads]
        ctes = ", ".join(scan for scan in scans if scan)
        if not ctes:
            return sql
        # The exact SQL is generated: a leading WITH can only be its own list of expressions.
        if sql.startswith("WITH "):
            return f"WITH {ctes}, {sql[5:]}"
        return f"WITH {ctes} {sql}"

    def _scan(self, name: str, columns: tuple[str, ...]) -> str:
        """The common table expression reading ``columns`` of table ``name`` ('' for the view)."""
        known = self._scans.get((name, columns))
        if known is not None:
            return known
        table = self.catalog.table(name)
        if (
            table is None
            # The exact SQL names its own common table expressions __input, __units, …: a
            # table of such a name must keep reaching the engine as the view.
            or name.startswith("__")
            or self.catalog.constant_time
            or table.source.kind == "csv"
            or table.reach is not None
            or name not in self._loaded
        ):
            return ""
        declared = {c.name: c for c in table.columns}
        if not columns or any(c not in declared for c in columns):
            return ""
        projection = ", ".join(self._converted(table, declared[c]) for c in columns)
        with self._lock:
            raw = self._raw_relation(table)
        scan = f"{DUCKDB.quote(name)} AS NOT MATERIALIZED (SELECT {projection} FROM {raw})"
        self._scans[(name, columns)] = scan
        return scan

    def data_version(self, table: Table) -> str:
        """Fingerprint of the table's files (an in-memory table: its registration id)."""
        if table.source.kind == FRAME_KIND:
            return table.source.location
        return files_fingerprint(glob.glob(table.source.location) or [table.source.location])

    def close(self) -> None:
        """Close the DuckDB connection (and stop the time limit's thread)."""
        self._watchdog.close()
        with self._lock:
            self._con.close()

    # -- loading --------------------------------------------------------------------------------

    def _raw_relation(self, table: Table) -> str:
        source = table.source
        location = source.location.replace("'", "''")
        if source.kind == "csv":
            return duckdb_reader(source.location, csv_header(table))
        if source.kind == "parquet":
            return f"read_parquet('{location}')"
        if source.kind == FRAME_KIND:
            return self._register_frame(table)
        if source.kind == "duckdb":
            alias = self._attached.get(source.location)
            if alias is None:
                alias = f"src{len(self._attached)}"
                try:
                    self._con.execute(f"ATTACH '{location}' AS {alias} (READ_ONLY)")
                except duckdb.Error:
                    raise CatalogError(
                        f"the source {source.location!r} is not a DuckDB database file.",
                        table=table.name,
                        fix="point a duckdb source at a .duckdb file, or use csv or parquet.",
                    ) from None
                self._attached[source.location] = alias
            return f"{alias}.{DUCKDB.quote(source.table or table.name)}"
        raise CatalogError(
            f"the DuckDB executor cannot read {source.kind} sources.",
            table=table.name,
            fix=f"run this catalog with the {source.kind} executor (engine = '{source.kind}').",
        )

    def _register_frame(self, table: Table) -> str:
        """Register ``table``'s in-memory data with the connection, once; its relation name."""
        name = self._frames.get(table.name)
        if name is None:
            name = f"__frame_{len(self._frames)}"
            self._con.register(name, scannable(table.source.frame))
            self._frames[table.name] = name
        return DUCKDB.quote(name)

    def source_counts(self, table: Table, columns: list[str]) -> list[int]:
        """Non-NULL values of ``columns`` in ``table``'s source as stored, before conversion.

        For the custodian's ``catalog check`` (which compares them with the converted values to
        count what does not parse); never part of an answer.
        """
        counts = ", ".join(f"COUNT({DUCKDB.quote(name)})" for name in columns)
        with self._lock:
            raw = self._raw_relation(table)
            if table.source.kind == "csv":
                # The rows read (skipped lines are no values); an empty field is no value.
                reason = skip_reason(DUCKDB, csv_header(table), lambda v, t: f"contains({v}, {t})")
                counts = ", ".join(f"COUNT(NULLIF({DUCKDB.quote(name)}, ''))" for name in columns)
                raw = f"(SELECT * FROM {raw} WHERE ({reason}) IS NULL)"
            try:
                row = self._con.execute(f"SELECT {counts} FROM {raw}").fetchone()
            finally:
                self._con.execute("DROP TABLE IF EXISTS __dalenius_rejects")
                self._con.execute("DROP TABLE IF EXISTS __dalenius_reject_scans")
        return [int(v) for v in row or ()]

    def skipped_rows(self, table: Table) -> dict[str, int]:
        """How many lines of ``table``'s CSV file were skipped, by reason (for the custodian only).

        The reasons are those of :mod:`dalenius.executors.csv_text`. The counts are logged when
        the file is loaded; they are never part of an answer.
        """
        with self._lock:
            if table.name not in self._loaded:
                try:
                    self._load(table)
                except duckdb.InterruptException as exc:
                    # No time limit watches a load: only the user's Ctrl-C interrupts it, and it
                    # must read as the interruption it is, not as an engine failure.
                    raise KeyboardInterrupt("the table's load was interrupted") from exc
            return dict(self._skipped.get(table.name, {}))

    def check_source(self, table: Table) -> None:
        """Refuse, from metadata only, a source file that is missing, unreadable or of the wrong
        kind (see :func:`dalenius.executors.sources.check_file`).
        """
        check_file(table)

    def _load_text(self, table: Table, raw: str, text: str) -> None:
        """Read ``table``'s CSV file into the temporary table ``text``: its rows only, every
        value as text; count the lines skipped, by reason.
        """
        reason = skip_reason(DUCKDB, csv_header(table), lambda v, t: f"contains({v}, {t})")
        self._con.execute(
            f"CREATE OR REPLACE TEMP TABLE {text} AS SELECT *, {reason} AS {SKIP} FROM {raw}"
        )
        skipped: dict[str, int] = {}
        found = self._con.execute(
            f"SELECT {SKIP}, COUNT(*) FROM {text} WHERE {SKIP} IS NOT NULL GROUP BY {SKIP}"
        ).fetchall()
        rejected = self._con.execute(
            "SELECT error_type, COUNT(DISTINCT (file_id, line)) FROM __dalenius_rejects "
            "GROUP BY error_type"
        ).fetchall()
        self._con.execute("DROP TABLE IF EXISTS __dalenius_rejects")
        self._con.execute("DROP TABLE IF EXISTS __dalenius_reject_scans")
        for kind, count in [*found, *rejected]:
            words = REJECTED.get(str(kind), str(kind))
            skipped[words] = skipped.get(words, 0) + int(count)
        if found:
            self._con.execute(f"DELETE FROM {text} WHERE {SKIP} IS NOT NULL")
        self._skipped[table.name] = skipped
        log_skipped(table.name, skipped)

    def _check_columns(self, table: Table) -> None:
        check_file(table)
        if table.source.kind == "csv":
            # The header line is the schema; no data row is read (nor sniffed) before the gate.
            present = {name.lower() for name in csv_header(table)}
        else:
            raw = self._raw_relation(table)
            try:
                described = self._con.execute(f"DESCRIBE SELECT * FROM {raw}").fetchall()
            except duckdb.Error as exc:
                # The engine's message may quote the file's lines; it goes to the log only.
                _log.warning("cannot read the source of table %r: %s", table.name, exc)
                raise CatalogError(
                    f"DuckDB cannot read the source {table.source.location!r} as "
                    f"{table.source.kind}.",
                    table=table.name,
                    fix=f"check that the file is a valid {table.source.kind} file.",
                ) from None
            present = {str(row[0]).lower() for row in described}
            self._stored_types[table.name] = {str(r[0]).lower(): str(r[1]) for r in described}
        for column in table.stored_columns:
            if column.name.lower() not in present:
                # The names found are not listed: a file that is not a valid source would
                # have its first line echoed as "column names".
                raise CatalogError(
                    f"the source has no column {column.name!r}.",
                    table=table.name,
                    column=column.name,
                    fix="correct the column name in the catalog, or the file's header.",
                )

    def _load(self, table: Table) -> None:
        in_memory = self.catalog.constant_time or table.source.kind == "csv"
        # Only a copy into memory takes long enough for an observer's spinner (observe_loads).
        with loading(table.name) if in_memory else contextlib.nullcontext():
            self._create(table)

    def _create(self, table: Table) -> None:
        raw = self._raw_relation(table)
        projection = ", ".join(self._converted(table, c) for c in table.stored_columns)
        name = DUCKDB.quote(table.name)
        if self.catalog.constant_time:
            self._materialise(table, raw, projection)
            self._loaded.add(table.name)
            return
        reach = table.reach
        referenced = self.catalog.table(reach.table) if reach else None
        if referenced is not None and referenced.name not in self._loaded:
            self._load(referenced)  # its relation is joined into this one's
        # A unit reached through a key is joined in by a view over the stored columns.
        stored = DUCKDB.quote(stored_name(table.name)) if reach else name
        if table.source.kind == "csv":
            # Load the text first, then convert from that table: converting straight from
            # read_csv lets DuckDB push TRY_CAST into the CSV reader, which raises on a malformed
            # value instead of reading NULL — an error that would depend on the data.
            text = DUCKDB.quote(f"__text_{table.name}")
            self._load_text(table, raw, text)
            self._con.execute(
                f"CREATE OR REPLACE TABLE {stored} AS SELECT {projection} FROM {text}"
            )
            self._con.execute(f"DROP TABLE {text}")
        elif reach:
            self._con.execute(f"CREATE OR REPLACE VIEW {stored} AS SELECT {projection} FROM {raw}")
        else:
            self._con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT {projection} FROM {raw}")
        if reach:
            self._con.execute(
                f"CREATE OR REPLACE VIEW {name} AS {table_view(table, '*', stored, DUCKDB)}"
            )
        self._check_row_count(table, stored)
        self._loaded.add(table.name)

    def _converted(self, table: Table, column: Column) -> str:
        """``column`` of ``table`` converted to its declared type (see :func:`_converted`); a
        table loaded as text (CSV) has no typed source.
        """
        types = {} if table.source.kind == "csv" else self._stored_types.get(table.name, {})
        return _converted(column, types.get(column.name.lower()))

    def stored_relation(self, table: Table) -> str:
        """The relation of ``table``'s rows as stored, converted: the table's own relation, or
        for a unit reached through a key, its rows before the unit is joined in (for the
        custodian's ``catalog check``, which counts what the source holds).
        """
        self.prepare(table)
        if table.reach is None:
            return DUCKDB.quote(table.name)
        return DUCKDB.quote(stored_name(table.name))

    def _materialise(self, table: Table, raw: str, projection: str) -> None:
        """Load ``table`` into memory; an id unit keeps at most ``max_rows`` rows per person."""
        text = DUCKDB.quote(f"__text_{table.name}")
        if table.source.kind == "csv":
            self._load_text(table, raw, text)
        else:
            self._con.execute(f"CREATE OR REPLACE TEMP TABLE {text} AS SELECT * FROM {raw}")
        try:
            self._check_row_count(table, text)
        except CatalogError:
            self._con.execute(f"DROP TABLE {text}")
            raise
        converted = f"SELECT {projection} FROM {text}"
        unit = table.privacy_unit
        if isinstance(unit, IdUnit) and not table.public:
            pid = DUCKDB.quote(unit.column)
            columns = ", ".join(DUCKDB.quote(c.name) for c in table.columns)
            salt = int(system_random().uint64(1)[0] >> 1)
            converted = (
                f"SELECT {columns} FROM (SELECT *, row_number() OVER (PARTITION BY {pid} "
                f"ORDER BY HASH({salt}, {columns})) AS __rank FROM ({converted}) AS c "
                f"WHERE {pid} IS NOT NULL) AS r WHERE __rank <= {int(unit.max_rows)}"
            )
        self._con.execute(f"CREATE OR REPLACE TABLE {DUCKDB.quote(table.name)} AS {converted}")
        self._con.execute(f"DROP TABLE {text}")

    def _check_row_count(self, table: Table, relation: str) -> None:
        """Refuse a table holding more rows than its declared ``max_row_count``."""
        if table.max_row_count is None:
            return
        count = self._con.execute(f"SELECT COUNT(*) FROM {relation}").fetchone()
        rows = int(count[0]) if count else 0
        if rows > table.max_row_count:
            raise CatalogError(
                f"the source holds {rows} rows, more than the declared max_row_count "
                f"{table.max_row_count}.",
                table=table.name,
                why="deadlines and public facts are computed for at most that many rows.",
                fix="raise max_row_count (and calibrate again), or trim the source.",
            )


CONSTANT_TIME_DISABLED_OPTIMIZERS = "statistics_propagation,filter_pushdown"
"""DuckDB optimizers switched off in constant-time mode: they choose plans from column statistics
(min/max), so one outlier could change the plan and its running time (bench/timing.py measures
the effect)."""


def scannable(frame: object) -> object:
    """What DuckDB's ``register`` scans in place for an in-memory table (see the module doc).

    pandas and Arrow objects as they are; a Polars frame as its Arrow view (shared buffers); an
    Arrow record batch as a one-batch table; a DuckDB relation run once into an Arrow table.
    """
    label = frame_type(frame)
    if label == "Polars DataFrame":
        return frame.to_arrow()  # type: ignore[attr-defined]  # zero-copy for most types
    if label == "Arrow record batch":
        import pyarrow as pa

        return pa.Table.from_batches([frame])
    if label == "DuckDB relation":
        # to_arrow_table (DuckDB >= 1.4), else fetch_arrow_table (older releases).
        to_table = getattr(frame, "to_arrow_table", None) or frame.fetch_arrow_table  # type: ignore[attr-defined]
        return to_table()
    return frame


_NO_NAN = re.compile(r"DECIMAL\(\d+,\d+\)|U?(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT)")
"""Source types that hold no NaN and convert to DOUBLE without failing."""


def _converted(column: Column, stored: str | None = None) -> str:
    """The SQL reading ``column`` as its declared type, NULL where a value does not read as one.

    ``stored`` is the column's type in a typed source (Parquet, a DuckDB table, a frame), None
    for text. A float read from a decimal or an integer column needs no NaN guard, and the
    guard (a ``CASE`` per row, pushed into every filter on the column) is the dearest part of
    reading it: TPC-H's money and quantity columns are ``DECIMAL(15,2)``. The inner
    ``TRY_CAST`` to the type the source was opened with costs nothing while the source keeps it
    (DuckDB drops a cast to a value's own type); should the file be rewritten with doubles under
    an open session, a NaN there reads as NULL, as the guard would have made it, never as NaN
    and never as an error.
    """
    quoted = DUCKDB.quote(column.name)
    target = DUCKDB_TYPES[column.type]
    value = quoted
    if column.type == "str":
        value = f"NULLIF(CAST({quoted} AS VARCHAR), '')"
    elif column.type == "float" and stored is not None and _NO_NAN.fullmatch(stored):
        value = f"TRY_CAST(TRY_CAST({quoted} AS {stored}) AS {target})"
    elif column.type == "float":
        # NaN is missing, not a number: it becomes NULL (the same rule on every engine).
        value = f"NULLIF(TRY_CAST({quoted} AS {target}), CAST('NaN' AS DOUBLE))"
    else:
        value = f"TRY_CAST({quoted} AS {target})"
    return f"{value} AS {quoted}"
