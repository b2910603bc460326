"""Exact aggregates in Apache Spark (``pip install 'dalenius[spark]'``), local or on a cluster.

Each catalog table becomes a temporary view named after it, exposing only the declared columns,
each converted to its declared type: typed columns (Parquet, a Spark table) exactly, text columns
(CSV files are read as text, as DuckDB reads them) through the guarded grammar of
:mod:`dalenius.executors.convert`, so a malformed value is NULL and never an error, and every
engine reads the same text the same way.

Every executor works in its own Spark session (``newSession()``: its own temporary views and SQL
settings) on one shared Spark context, so the JVM starts once per process. The session runs with
ANSI SQL semantics (as DuckDB does: an impossible cast or an integer overflow is an error, never a
silently wrong number; Dalenius's SQL is written so that neither can happen) and reads
double-quoted names as identifiers, so the same hand-written SQL runs on every engine. Sources:

* ``{ csv = ... }`` and ``{ parquet = ... }``: the same files the DuckDB executor reads;
* ``{ spark = "path/or/glob", options = { format = "parquet" } }``: files in any format Spark
  reads (the format defaults to the file extension, else Parquet); a relative path is read from the
  catalog file's folder; URIs (``s3a://...``) are passed as they are;
* ``{ spark = "db.table" }`` (no ``/``, no extension): a table of the Spark session's catalog.

Data version: the files' paths, sizes and modification times (for a Spark table, its input files).

Spark SQL has no ``MATERIALIZED`` hint, and Spark may evaluate a common table expression once per
reference. An expression the exact SQL asks to keep (the split of the units within and over their
caps) is run first and kept by a local checkpoint, and the statement reads the kept rows
(:meth:`SparkExecutor._run`). On a cluster the kept blocks live on the executors: losing one fails
the query; it is never recomputed from files that may have changed.

Shuffle partitions: unless the executor is given ``partitions=`` (or the setting in ``conf=``),
each statement shuffles into as many partitions as :func:`shuffle_partitions` chooses from the size
of the files it reads — the context's 4 up to 512 MiB, one per 128 MiB beyond. Few partitions
suit a small input (each is a task with its own cost); a large one in 4 partitions makes each
unit's window sort spill (the census benchmark's visits at 100M persons, ``docs/engines.md``).
The answer never depends on it.
"""

from __future__ import annotations

import glob
import importlib
import itertools
import logging
import os
import re
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from dalenius.core.catalog import Catalog, Column, Table
from dalenius.core.dialect import SPARK
from dalenius.core.errors import CatalogError, ExecutionError, MissingExtraError
from dalenius.core.unit import stored_name
from dalenius.executors.base import (
    Executor,
    Row,
    files_fingerprint,
    table_view,
    time_limit_error,
)
from dalenius.executors.convert import (
    BIGINT_MAX,
    BIGINT_MIN,
    DATE_TEXT,
    FALSE_TEXT,
    INT_TEXT,
    NAN_TEXT,
    NEG_INF_TEXT,
    POS_INF_TEXT,
    TRUE_TEXT,
    Conversions,
    converted,
    sql_string,
)
from dalenius.executors.csv_text import (
    ABSENT,
    EXTRA,
    SKIP,
    csv_header,
    log_skipped,
    skip_reason,
)
from dalenius.executors.ctes import CTE, Split, split_with
from dalenius.executors.sources import check_file

LINE = "__dalenius_line"
"""The column in which Spark's CSV reader keeps each row's text (its corrupt-record column)."""

SHUFFLE_BYTES = 128 * 2**20
"""Input bytes per shuffle partition when the executor chooses the count (:func:`shuffle_partitions`)."""

MIN_SHUFFLE = 4
"""The fewest shuffle partitions a statement gets: the context's own setting (``SESSION_CONF``)."""

MASTER = "local[2]"
"""Where the shared Spark context runs when Dalenius starts it (two local cores)."""

LOG_CONFIG = Path(__file__).with_name("spark-log4j2.properties")
"""The Spark context's logging: errors only (its start-up notes are not the user's concern)."""

SESSION_CONF = {
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.memory": "2g",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}
"""Settings of the Spark context Dalenius starts (ignored if a Spark session already exists)."""

_SQL_CONF = {
    "spark.sql.ansi.enabled": "true",
    "spark.sql.ansi.doubleQuotedIdentifiers": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.caseSensitive": "false",
}

_KINDS = {
    **dict.fromkeys(("tinyint", "smallint", "int", "bigint"), "integer"),
    **dict.fromkeys(("float", "double"), "float"),
    "decimal": "exact",
    "string": "text",
    "boolean": "bool",
    "date": "date",
    "timestamp_ntz": "timestamp",
}
"""What each Spark base type holds (the kinds of :func:`dalenius.executors.convert.converted`)."""
_FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".orc": "orc"}

_KEPT = itertools.count()
"""Numbers the views of kept (``MATERIALIZED``) expressions, unique in the process."""

_base_lock = threading.Lock()
_base: dict[str, Any] = {}
"""The process's shared Spark session, under key ``session`` once started."""


def _pyspark_sql() -> Any:
    try:
        return importlib.import_module("pyspark.sql")
    except ImportError:
        raise MissingExtraError("pyspark", "spark", "The Spark executor") from None


def shared_session() -> Any:
    """The process's Spark session, started once (``local[2]``, no UI) on first use.

    An already active Spark session (for example one connected to a cluster) is used as it is.
    """
    with _base_lock:
        if "session" not in _base:
            sql = _pyspark_sql()
            builder = sql.SparkSession.builder.master(MASTER).appName("dalenius")
            for key, value in SESSION_CONF.items():
                builder = builder.config(key, value)
            try:
                with warnings.catch_warnings():
                    # Starting the context imports pyspark.testing, which warns that PySpark
                    # does not fully support pandas 3. Dalenius hands Spark no pandas data (its
                    # rows come back as tuples), so the warning is no concern of the user's.
                    warnings.filterwarnings(
                        "ignore", message="PySpark does not yet fully support pandas"
                    )
                    session = builder.getOrCreate()
            except Exception as exc:
                raise ExecutionError(
                    f"Spark could not start: {exc}\nFix: Spark needs a Java runtime (17 or "
                    "newer) on the PATH or in JAVA_HOME."
                ) from None
            session.sparkContext.setLogLevel("ERROR")
            # PySpark also logs every failed query with its JVM stack trace; the executor
            # reports the failure itself, as an ExecutionError naming the cause.
            logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
            _base["session"] = session
        return _base["session"]


class SparkExecutor(Executor):
    """Exact aggregates in Spark, over CSV, Parquet and ``spark`` sources.

    Args:
        catalog: the catalog; every source must be ``csv``, ``parquet`` or ``spark``.
        spark: the Spark session to work in (a new session is derived from it); by default
            :func:`shared_session`.
        partitions: if given, every table is repartitioned into this many partitions and
            aggregations shuffle into as many (results do not depend on it); by default each
            statement's shuffles get :func:`shuffle_partitions` of the bytes it reads.
        conf: further Spark SQL settings of this executor's session (performance tuning; the
            settings Dalenius relies on, listed in the module notes, cannot be overridden).

    Raises:
        CatalogError: a source cannot be read, a declared column is missing, or a column's type
            cannot become the declared one.
        MissingExtraError: PySpark is not installed.
    """

    dialect = SPARK

    def __init__(
        self,
        catalog: Catalog,
        *,
        spark: Any = None,
        partitions: int | None = None,
        conf: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(catalog)
        base = spark if spark is not None else shared_session()
        self._spark = base.newSession()
        for key, value in {**(conf or {}), **_SQL_CONF}.items():
            self._spark.conf.set(key, value)
        if partitions is not None:
            self._spark.conf.set("spark.sql.shuffle.partitions", str(int(partitions)))
        self._partitions = partitions
        self._chooses_shuffle = partitions is None and "spark.sql.shuffle.partitions" not in (
            conf or {}
        )
        self._lock = threading.Lock()
        self._loaded: set[str] = set()
        self._frames: dict[str, Any] = {}
        self._skipped: dict[str, dict[str, int]] = {}
        for table in catalog.tables:
            self._frames[table.name] = self._read(table)

    # -- Executor -------------------------------------------------------------------------------

    def prepare(self, table: Table) -> None:
        """Register the converted view of ``table`` (once)."""
        with self._lock:
            if table.name not in self._loaded:
                self._register(table)

    def fetch(self, sql: str) -> list[Row]:
        """Run ``sql`` and return its rows (exact sums come back as :class:`decimal.Decimal`)."""
        with self._lock:
            limit = self.time_limit
            context = self._spark.sparkContext
            group = f"dalenius-{id(self)}"
            done, fired = threading.Event(), threading.Event()

            def watch(seconds: float) -> None:
                # Spark cancels the group's running jobs only: a job submitted after the limit
                # (the statement was still being planned, or a kept expression's job came first)
                # is cancelled by the next round, until the fetch ends.
                if done.wait(seconds):
                    return
                fired.set()
                while True:
                    context.cancelJobGroup(group)
                    if done.wait(0.05):
                        return

            if limit:
                # Spark's jobs are cancelled by group when the time limit passes.
                context.setJobGroup(group, "a Dalenius aggregate", interruptOnCancel=True)
                threading.Thread(target=watch, args=(limit,), daemon=True).start()
            try:
                rows = self._run(sql)
            except Exception as exc:
                if fired.is_set():
                    raise time_limit_error("Spark", limit or 0) from exc
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                raise ExecutionError(
                    f"Spark failed to compute the exact aggregate: {first}"
                ) from exc
            finally:
                done.set()
            if fired.is_set():  # finished past the limit between two rounds: still past it
                raise time_limit_error("Spark", limit or 0)
            return rows

    def _run(self, sql: str) -> list[Row]:
        """Run ``sql``, each ``MATERIALIZED`` expression of its ``WITH`` list evaluated once.

        Spark's grammar has no such hint, and Spark may evaluate an expression once per
        reference, each time reading the files again. Contribution bounding relies on some
        expressions being read once (a unit found within its caps by one read must not be found
        over them by another; :mod:`dalenius.sql.emit.bounding`). So each is run first and its
        rows kept by a local checkpoint: kept in this process's block manager, in memory and on
        disk, with no lineage to recompute them from — a lost block fails the query rather than
        reading the files again. The statement then reads the kept rows under the expression's
        name, and they are released when it ends.
        """
        split = split_with(sql)
        if split is None:
            return [tuple(row) for row in self._sql(sql).collect()]
        kept: list[CTE] = []
        frames: list[tuple[str, Any]] = []
        try:
            for cte in split.ctes:
                if not cte.materialized:
                    kept.append(CTE(cte.name, "", cte.body))
                    continue
                view = f"__kept_{next(_KEPT)}"
                query = Split(tuple(kept), f"SELECT * FROM ({cte.body}) AS __m")
                frame = self._sql(query.sql() if kept else query.main)
                frame = frame.localCheckpoint(eager=True)
                frames.append((view, frame))
                frame.createOrReplaceTempView(view)
                kept.append(CTE(cte.name, "", f"SELECT * FROM {view}"))
            return [tuple(row) for row in self._sql(split.sql(tuple(kept))).collect()]
        finally:
            for view, frame in frames:
                self._spark.catalog.dropTempView(view)
                # The checkpoint's blocks are dropped now, not when the JVM collects them.
                frame._jdf.queryExecution().logical().rdd().unpersist(False)

    def _sql(self, sql: str) -> Any:
        """The statement as a DataFrame, its shuffle partitions set from the files it reads.

        Spark fixes a shuffle's partition count when it plans the physical query, at the
        action, so the setting made here, after the statement is analysed, is the one it uses
        (the statements of one executor run one at a time, under its lock).
        """
        frame = self._spark.sql(sql)
        if self._chooses_shuffle:
            count = shuffle_partitions(input_bytes(frame))
            self._spark.conf.set("spark.sql.shuffle.partitions", str(count))
        return frame

    def skipped_rows(self, table: Table) -> dict[str, int]:
        """How many lines of ``table``'s CSV file were skipped, by reason (for the custodian only;
        see :mod:`dalenius.executors.csv_text`). Spark skips no line for its length.
        """
        return dict(self._skipped.get(table.name, {}))

    def check_source(self, table: Table) -> None:
        """Refuse, from metadata only, a source file that is missing, unreadable or of the wrong
        kind (see :func:`dalenius.executors.sources.check_file`).
        """
        if _source(self.catalog, table)[0] in ("csv", "parquet"):
            check_file(table)

    def data_version(self, table: Table) -> str:
        """Fingerprint of the table's files (paths, sizes, modification times)."""
        kind, location = _source(self.catalog, table)
        if kind == "table":
            files = [_local(p) for p in self._frames[table.name].inputFiles()]
        elif "://" in location:
            files = [location]
        else:
            files = _files(location)
        return files_fingerprint(files)

    def close(self) -> None:
        """Drop this executor's views and cached CSV data (the shared Spark context stays up)."""
        with self._lock:
            for name in self._loaded:
                self._spark.catalog.dropTempView(name)
            self._loaded.clear()
            for frame in self._frames.values():
                frame.unpersist()

    # -- loading --------------------------------------------------------------------------------

    def _read(self, table: Table) -> Any:
        self.check_source(table)
        kind, location = _source(self.catalog, table)
        options = dict(table.source.options)
        reader = self._spark.read
        try:
            if kind == "table":
                frame = self._spark.table(location)
            elif kind == "csv":
                frame = _read_csv(reader, table, location, options)
            else:
                frame = (
                    reader.format(kind)
                    .options(**{k: v for k, v in options.items() if k != "format"})
                    .load(location)
                )
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise CatalogError(
                f"Spark cannot read the source {location!r}: {first}", table=table.name
            ) from None
        types = {name.lower(): (name, typ) for name, typ in frame.dtypes}
        for column in table.stored_columns:
            if column.name.lower() not in types:
                raise CatalogError(
                    f"the source has no column {column.name!r} "
                    f"(it has: {', '.join(sorted(types))}).",
                    table=table.name,
                    column=column.name,
                    fix="correct the column name in the catalog.",
                )
            _converted(column, *types[column.name.lower()], table)
        if self._partitions is not None:
            frame = frame.repartition(self._partitions)
        if kind == "csv":
            # As in DuckDB, a CSV file is parsed once and kept in memory: re-parsing text on
            # every query would dominate its time. Parquet and tables are read in place.
            frame = frame.cache()
            counts = frame.where(f"{SKIP} IS NOT NULL").groupBy(SKIP).count().collect()
            self._skipped[table.name] = {str(row[0]): int(row[1]) for row in counts}
            log_skipped(table.name, self._skipped[table.name])
            frame = frame.where(f"{SKIP} IS NULL")
        return frame

    def _register(self, table: Table) -> None:
        frame = self._frames[table.name]
        types = {name.lower(): (name, typ) for name, typ in frame.dtypes}
        raw = f"__dalenius_raw_{table.name}"
        frame.createOrReplaceTempView(raw)
        projection = ", ".join(
            _converted(c, *types[c.name.lower()], table) for c in table.stored_columns
        )
        reach = table.reach
        referenced = self.catalog.table(reach.table) if reach else None
        if referenced is not None and referenced.name not in self._loaded:
            self._register(referenced)  # its view is joined into this one's
        source = SPARK.quote(raw)
        if reach is not None:
            # The rows as stored, read where a join supplies the unit (ReachedUnit).
            stored = SPARK.quote(stored_name(table.name))
            self._spark.sql(
                f"CREATE OR REPLACE TEMP VIEW {stored} AS SELECT {projection} FROM {source}"
            )
            source, projection = stored, "*"
        view = table_view(table, projection, source, SPARK)
        self._spark.sql(f"CREATE OR REPLACE TEMP VIEW {SPARK.quote(table.name)} AS {view}")
        self._loaded.add(table.name)


def _read_csv(reader: Any, table: Table, location: str, options: dict[str, str]) -> Any:
    """The lines of a CSV file as text, with the reason each is skipped in column ``SKIP``.

    RFC 4180 quoting and embedded newlines, as DuckDB reads CSV. The header's columns and one
    more, all text, in PERMISSIVE mode: a short row is padded with NULLs (an empty field stays
    '' since the NULL text is ABSENT), a long one fills EXTRA; :func:`skip_reason` then names
    either, as in DuckDB (see :mod:`dalenius.executors.csv_text`).
    """
    header = csv_header(table)
    schema = ", ".join(f"{SPARK.quote(name)} STRING" for name in [*header, EXTRA, LINE])
    frame = (
        reader.option("header", "true")
        .option("columnNameOfCorruptRecord", LINE)
        .option("inferSchema", "false")
        .option("enforceSchema", "true")
        .option("escape", '"')
        .option("multiLine", "true")
        .option("lineSep", "\n")
        .option("mode", "PERMISSIVE")
        .option("nullValue", ABSENT)
        .option("emptyValue", "")
        .options(**{k: v for k, v in options.items() if k != "format"})
        .schema(schema)
        .csv(location)
    )
    # Lines end at LF; the CR of a CRLF line end is left on the row's last value. Spark reads an
    # unquoted empty last field ("60,Female,") as NULL, as it reads a field the line lacks: the
    # row's text (every row's, since the schema has one column more than any row) tells them
    # apart — outside quoted values, a line with all its fields has len(header) - 1 commas.
    last = SPARK.quote(header[-1])
    columns = [SPARK.quote(name) for name in header[:-1]]
    line = SPARK.quote(LINE)
    unquoted = f"""regexp_replace({line}, '(?s)"(?:[^"]|"")*"', '')"""
    columns.append(
        f"CASE WHEN substring({last}, -1) = chr(13) "
        f"THEN substring({last}, 1, length({last}) - 1) "
        f"WHEN {last} IS NULL AND size(split({unquoted}, ',', -1)) >= {len(header)} THEN '' "
        f"ELSE {last} END AS {last}"
    )
    frame = frame.selectExpr(*columns, SPARK.quote(EXTRA))
    reason = skip_reason(SPARK, header, lambda v, t: f"(instr({v}, {t}) > 0)")
    return frame.selectExpr("*", f"{reason} AS {SKIP}")


def _source(catalog: Catalog, table: Table) -> tuple[str, str]:
    """The kind of read (``csv``, ``parquet``, another format, or ``table``) and its location."""
    source = table.source
    if source.kind in ("csv", "parquet"):
        return source.kind, source.location
    location = source.location
    options = dict(source.options)
    is_path = "format" in options or "/" in location or any(ch in location for ch in "*?[")
    is_path = is_path or Path(location).suffix.lower() in _FORMATS
    if not is_path:
        return "table", location
    if "://" not in location and not Path(location).expanduser().is_absolute():
        base = catalog.path.resolve().parent if catalog.path is not None else Path.cwd()
        location = str(base / Path(location).expanduser())
    fmt = options.get("format") or _FORMATS.get(
        Path(location.rstrip("/*")).suffix.lower(), "parquet"
    )
    return fmt, location


def _files(location: str) -> list[str]:
    """Every data file under a path or glob (directories are walked)."""
    out: list[str] = []
    for match in glob.glob(location) or [location]:
        if os.path.isdir(match):
            for root, _, names in os.walk(match):
                out.extend(os.path.join(root, n) for n in names)
        else:
            out.append(match)
    return out


def shuffle_partitions(input_bytes: int) -> int:
    """The shuffle partitions for a statement reading ``input_bytes`` of files.

    One per :data:`SHUFFLE_BYTES`, rounded up to a power of two, and at least
    :data:`MIN_SHUFFLE`.

    Example:
        >>> shuffle_partitions(372 * 2**20), shuffle_partitions(3_722_001_697)
        (4, 32)
    """
    needed = -(-input_bytes // SHUFFLE_BYTES)
    return max(MIN_SHUFFLE, 1 << max(0, needed - 1).bit_length())


def input_bytes(frame: Any) -> int:
    """The size of the local files a DataFrame reads (from their metadata; 0 for others)."""
    total = 0
    for uri in frame.inputFiles():
        try:
            total += os.path.getsize(unquote(_local(uri)))
        except OSError:
            continue
    return total


def _local(uri: str) -> str:
    return re.sub(r"^file:(//)?", "", uri)


def _converted(column: Column, actual: str, spark_type: str, table: Table) -> str:
    """The SQL reading ``column`` as its declared type, NULL when malformed."""
    declared = column.type
    kind = _KINDS.get(spark_type.split("(", maxsplit=1)[0])
    read = converted(SPARK.quote(actual), kind, declared, _CONVERSIONS)
    if read is None:
        raise CatalogError(
            f"the Spark column has type {spark_type}, which Dalenius does not read as {declared} "
            "(it would have to guess).",
            table=table.name,
            column=column.name,
            fix="declare the column with the type matching its data, or convert the data.",
        )
    return f"{read} AS {SPARK.quote(column.name)}"


def _from_text(value: str, declared: str) -> str:
    """Text to the declared type through the shared grammar; anything else is NULL."""
    if declared == "str":
        return f"NULLIF({value}, '')"
    if declared == "int":
        # TRY_CAST to DECIMAL(38, 0) rounds half away from zero and is NULL beyond 38 digits.
        rounded = f"TRY_CAST({value} AS DECIMAL(38, 0))"
        return f"CASE WHEN {value} RLIKE {_regex(INT_TEXT)} THEN {_decimal_to_bigint(rounded)} END"
    if declared == "float":
        return (
            f"CASE WHEN {value} RLIKE {_regex(INT_TEXT)} THEN TRY_CAST({value} AS DOUBLE) "
            f"WHEN {value} RLIKE {_regex(NAN_TEXT)} THEN CAST('NaN' AS DOUBLE) "
            f"WHEN {value} RLIKE {_regex(POS_INF_TEXT)} THEN CAST('Infinity' AS DOUBLE) "
            f"WHEN {value} RLIKE {_regex(NEG_INF_TEXT)} THEN CAST('-Infinity' AS DOUBLE) END"
        )
    if declared == "bool":
        true = ", ".join(sql_string(t) for t in TRUE_TEXT)
        false = ", ".join(sql_string(t) for t in FALSE_TEXT)
        return (
            f"CASE WHEN lower({value}) IN ({true}) THEN TRUE "
            f"WHEN lower({value}) IN ({false}) THEN FALSE END"
        )
    assert declared == "date", declared
    year, month, day = (
        f"CAST(regexp_extract({value}, {_regex(DATE_TEXT)}, {i}) AS INT)" for i in (1, 2, 3)
    )
    first = f"make_date({year}, {month}, 1)"
    # Nested CASEs guard make_date, which raises on an impossible day under ANSI semantics.
    return (
        f"CASE WHEN {value} RLIKE {_regex(DATE_TEXT)} THEN "
        f"CASE WHEN {year} BETWEEN 1 AND 9999 AND {month} BETWEEN 1 AND 12 THEN "
        f"CASE WHEN {day} BETWEEN 1 AND day(last_day({first})) "
        f"THEN make_date({year}, {month}, {day}) END END END"
    )


def _regex(pattern: str) -> str:
    r"""A grammar pattern as a Java regex literal.

    Java's ``$`` also matches before a final line terminator (``\u2028`` among them); in UNIX_LINES
    mode (``(?d)``) only ``\n`` is one, and the patterns allow a trailing ``\n`` anyway.
    """
    return sql_string("(?d)" + pattern)


def _decimal_to_bigint(rounded: str) -> str:
    return (
        f"CASE WHEN {rounded} BETWEEN {BIGINT_MIN} AND {BIGINT_MAX} "
        f"THEN CAST({rounded} AS BIGINT) END"
    )


_CONVERSIONS = Conversions(
    SPARK,
    _from_text,
    lambda value: _decimal_to_bigint(f"ROUND({value}, 0)"),
    lambda value: f"CAST({value} AS DOUBLE)",
)
