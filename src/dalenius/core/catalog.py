"""The custodian's catalog: which tables exist, where their data live, and what is public about them.

A catalog is a TOML file. Everything in it is *public*: the privacy unit, the clipping bounds of
numeric columns and the key lists of categorical columns are part of the mechanism, not secrets,
and must not be derived by looking at the data. Example::

    [dataset]
    name = "adult"
    engine = "duckdb"                        # optional: duckdb, postgres or spark

    [tables.adult]
    source = { csv = "adult.csv" }          # or { parquet = "..." }, { duckdb = "f.duckdb", table = "t" }
    privacy_unit = "row"                     # or { column = "pid", max_rows = 5, max_groups = 2 }

    [tables.adult.columns]
    age = { type = "int", bounds = [17, 90] }
    sex = { type = "str", keys = ["Female", "Male"] }

Relative source paths are read relative to the catalog file. Every validation error names the
file, the table and the column, says what is wrong and how to fix it.

The same document can be built in Python (:meth:`Catalog.from_dict`), where a table's source may
also be data already in memory — a pandas, Polars or Arrow table or a DuckDB relation — which the
embedded DuckDB engine reads in place (see :mod:`dalenius.core.frames`)::

    catalog = Catalog.from_dict({
        "dataset": {"name": "adult"},
        "tables": {"adult": {"source": frame, "privacy_unit": "row",
                             "columns": {"age": {"type": "int", "bounds": [17, 90]}}}},
    })

It goes through the same validation, with the same messages (the file is named ``<python>``).
"""

from __future__ import annotations

import glob
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from dalenius.core.errors import CatalogError
from dalenius.core.frames import FRAME_KIND, ONE_SHOT, frame_label, frame_type, is_frame
from dalenius.core.unit import IdUnit, PrivacyUnit, Reach, RowUnit

COLUMN_TYPES = ("int", "float", "str", "bool", "date")
"""Column types a catalog may declare."""

NUMERIC_TYPES = ("int", "float")

SOURCE_KINDS = ("csv", "parquet", "duckdb", "postgres", "spark", FRAME_KIND)
"""Kinds of data source; ``postgres`` and ``spark`` need their extras installed; ``frame`` (data in
memory) can be given from Python only."""

ENGINES = ("duckdb", "postgres", "spark")
"""Engines that can compute a catalog's exact aggregates (``postgres`` and ``spark`` are extras)."""

ENGINE_SOURCES = {
    "duckdb": ("csv", "parquet", "duckdb", FRAME_KIND),
    "postgres": ("postgres",),
    "spark": ("csv", "parquet", "spark"),
}
"""Which source kinds each engine reads: one engine runs every query of a dataset, so all of its
tables must be readable by that engine."""

DATASET_KEYS = (
    "name",
    "description",
    "engine",
    "constant_time",
    "deadlines",
    "min_epsilon",
    "min_people",
)
TABLE_KEYS = ("source", "privacy_unit", "columns", "public", "description", "max_row_count")
COLUMN_KEYS = (
    "type",
    "bounds",
    "bounds_epsilon",
    "keys",
    "nullable",
    "join_rows_per_key",
    "per_unit",
    "description",
)

PRIVATE_BOUNDS = "private"
"""``bounds = "private"``: Dalenius chooses the column's clipping bounds with a DP mechanism
(:mod:`dalenius.releases.bounds`), charged the first time a query needs them."""

DEFAULT_BOUNDS_EPSILON = Fraction(1, 20)
"""The ε a private choice of bounds costs when the catalog gives no ``bounds_epsilon``."""

MAX_JOIN_ROWS = 1_000_000
"""The largest ``join_rows_per_key``: beyond it the sensitivity of a joined count would pass what
the samplers calibrate, and truncation would no longer be the bound that matters."""
UNIT_KEYS = ("column", "max_rows", "max_groups", "through")
"""Every key a catalog may use, by section (the docs test checks each is documented)."""
THROUGH_KEYS = ("column", "table", "key")
"""The keys of ``privacy_unit.through``, every one required."""

MAX_PEOPLE = 10**6
"""The largest ``min_people`` accepted (its threshold grows with it; a larger rule hides all)."""

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Key = str | int | bool


@dataclass(frozen=True)
class PrivateBounds:
    """A column whose clipping bounds Dalenius chooses privately (``bounds = "private"``).

    Attributes:
        epsilon: what choosing them costs, once per data version (``bounds_epsilon``).
        outcome: ``"pending"`` until chosen; then ``"chosen"`` (the column's ``bounds`` hold
            them), ``"empty"`` (no value range had enough rows to stand out from the noise) or
            ``"provisional"`` (standing in as [0, 1] for the shape of an answer, never its noise).
        entry: the ledger entry that released them, once chosen.
    """

    epsilon: Fraction
    outcome: str = "pending"
    entry: str | None = None


@dataclass(frozen=True)
class Column:
    """A column the custodian exposes, with its public metadata.

    Attributes:
        name: the column's name in the data source.
        type: one of :data:`COLUMN_TYPES`.
        bounds: public clipping range ``(low, high)`` of a numeric column, or ``None``.
        keys: public list of the values a categorical column may take, or ``None``.
        nullable: whether the column may hold NULLs (COUNT(col) then differs from COUNT(*)).
        private_bounds: set when the catalog says ``bounds = "private"``: the bounds are chosen
            by a DP mechanism, and ``bounds`` holds them once they are (see
            :meth:`Catalog.with_private_bounds`).
        join_rows_per_key: in a join of two private tables on this column, at most this many
            rows sharing one value are kept (the rest dropped by a keyed hash) before joining,
            which bounds how far one unit can change the joined rows
            (docs/mechanisms/join_truncation.md); ``None``: such a join is refused.
        per_unit: the custodian says the column holds one value per privacy unit (an attribute
            of the person repeated on each of their rows, such as the state they live in). A
            query grouped only by such columns bounds each unit with one aggregation per unit
            (:func:`dalenius.sql.emit.bounding.bounded_aggregate`); the kept rows, and so the
            answers, are the same whether the declaration holds or not: a unit whose rows
            disagree is read again. It never enters a sensitivity.
    """

    name: str
    type: str
    bounds: tuple[Fraction, Fraction] | None = None
    keys: tuple[Key, ...] | None = None
    nullable: bool = True
    private_bounds: PrivateBounds | None = None
    join_rows_per_key: int | None = None
    per_unit: bool = False

    @property
    def is_numeric(self) -> bool:
        """Whether the column holds numbers (and may be clipped and summed)."""
        return self.type in NUMERIC_TYPES


@dataclass(frozen=True)
class Source:
    """Where a table's rows live.

    Attributes:
        kind: one of :data:`SOURCE_KINDS`.
        location: a file path or glob (csv, parquet, duckdb), a connection string (postgres), or a
            path or table name (spark).
        table: the table inside a database source, or ``None`` for files.
        frame: the in-memory data of a ``frame`` source (its ``location`` is then a label naming
            the frame's type and a registration id, which is also its data version).
    """

    kind: str
    location: str
    table: str | None = None
    options: tuple[tuple[str, str], ...] = ()
    frame: Any = field(default=None, compare=False, hash=False, repr=False)


@dataclass(frozen=True)
class Table:
    """A registered table: its source, privacy unit and public column metadata."""

    name: str
    source: Source
    privacy_unit: PrivacyUnit
    columns: tuple[Column, ...]
    public: bool = False
    max_row_count: int | None = None
    """The declared (public) maximum number of rows; a larger source is refused when the table is
    opened or reloaded, never at query time."""

    def column(self, name: str) -> Column | None:
        """The column called ``name`` (case-insensitive), or ``None``."""
        lowered = name.lower()
        for col in self.columns:
            if col.name.lower() == lowered:
                return col
        return None

    @property
    def column_names(self) -> tuple[str, ...]:
        """Names of the declared columns, in catalog order."""
        return tuple(c.name for c in self.columns)

    @property
    def stored_columns(self) -> tuple[Column, ...]:
        """The columns read from the source: every column but a unit reached through a key,
        which the engine joins in from the referenced table (:class:`dalenius.core.unit.Reach`).
        """
        unit = self.privacy_unit
        if isinstance(unit, IdUnit) and unit.through is not None:
            return tuple(c for c in self.columns if c.name != unit.column)
        return self.columns

    @property
    def reach(self) -> Reach | None:
        """How the table's rows reach their unit through another table's key, if they do."""
        unit = self.privacy_unit
        return unit.through if isinstance(unit, IdUnit) else None


@dataclass(frozen=True)
class Catalog:
    """All tables of one dataset, as declared by its custodian."""

    name: str
    tables: tuple[Table, ...]
    path: Path | None = None
    description: str = ""
    engine: str = "duckdb"
    constant_time: bool = False
    """Whether every release leaves at a deadline fixed from public facts (docs/constant-time.md)."""
    deadlines_path: Path | None = None
    """The sidecar file holding the calibrated deadlines (``dalenius calibrate`` writes it)."""
    min_epsilon: Fraction | None = None
    """The custodian's ε floor per release (every front end refuses a smaller ε, for free)."""
    min_people: int | None = None
    """The minimum-frequency rule: no released cell of a SQL query rests on fewer than this many
    privacy units, except with the rule's small failure probability (docs/sql.md)."""
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def table(self, name: str) -> Table | None:
        """The table called ``name`` (case-insensitive), or ``None``."""
        lowered = name.lower()
        for table in self.tables:
            if table.name.lower() == lowered:
                return table
        return None

    @property
    def table_names(self) -> tuple[str, ...]:
        """Names of the registered tables, in catalog order."""
        return tuple(t.name for t in self.tables)

    @property
    def private_bounds(self) -> tuple[tuple[str, str], ...]:
        """The ``(table, column)`` pairs whose bounds are chosen privately, in catalog order."""
        return tuple(
            (t.name, c.name) for t in self.tables for c in t.columns if c.private_bounds is not None
        )

    def with_private_bounds(
        self,
        chosen: Mapping[tuple[str, str], tuple[PrivateBounds, tuple[Fraction, Fraction] | None]],
    ) -> Catalog:
        """The catalog with privately chosen bounds filled in: ``chosen`` maps a ``(table,
        column)`` to its settled :class:`PrivateBounds` and the bounds (``None`` when the choice
        came out empty). Every other column is as declared.
        """
        tables = []
        for t in self.tables:
            columns = []
            for c in t.columns:
                found = chosen.get((t.name, c.name))
                if found is not None and c.private_bounds is not None:
                    columns.append(replace(c, private_bounds=found[0], bounds=found[1]))
                else:
                    columns.append(c)
            tables.append(replace(t, columns=tuple(columns)))
        return replace(self, tables=tuple(tables))

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], *, base_dir: str | Path | None = None) -> Catalog:
        """Build a catalog in Python: the same document as the TOML file, the same validation.

        ``doc`` has the TOML file's shape (``{"dataset": {...}, "tables": {NAME: {...}}}``). A
        table's ``source`` may also be an in-memory table — a pandas or Polars DataFrame, an Arrow
        table or a DuckDB relation — or ``{"frame": obj}``; the columns, privacy unit, bounds and
        keys must be declared as for a file. Relative file paths are read from ``base_dir`` (the
        working directory by default).

        Raises:
            CatalogError: naming ``<python>``, the table and the column of the first problem.

        Example:
            >>> import pandas as pd
            >>> cat = Catalog.from_dict({"tables": {"t": {
            ...     "source": pd.DataFrame({"x": [1, 2]}), "privacy_unit": "row",
            ...     "columns": {"x": {"type": "int", "bounds": [0, 9]}}}}})
            >>> cat.tables[0].source.kind, cat.name
            ('frame', 'dataset')
        """
        if not isinstance(doc, Mapping):
            raise CatalogError(
                f"a catalog must be a mapping; got {type(doc).__name__}.",
                file=PYTHON_FILE,
                fix='pass {"dataset": {"name": ...}, "tables": {"NAME": {...}}}.',
            )
        base = Path(base_dir) if base_dir is not None else Path.cwd()
        return _Validator(PYTHON_FILE, base.resolve()).catalog(_plain(doc))


PYTHON_FILE = "<python>"
"""The file name errors give for a catalog built with :meth:`Catalog.from_dict`."""

_UNNAMED_FILES = ("<catalog>", PYTHON_FILE)


def _plain(doc: Any) -> Any:
    """Copy nested mappings and sequences into dicts and lists, leaving in-memory tables as they are."""
    if is_frame(doc):
        return doc
    if isinstance(doc, Mapping):
        return {str(k) if not isinstance(k, str) else k: _plain(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [_plain(v) for v in doc]
    return doc


def load_catalog(path: str | Path) -> Catalog:
    """Read and validate a catalog TOML file.

    Raises:
        CatalogError: naming the file, table and column of the first problem found.
    """
    path = Path(path)
    display = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CatalogError(
            "the catalog file does not exist.",
            file=display,
            fix="pass the path of a catalog TOML file (run `dalenius demo` to see an example).",
        ) from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise CatalogError(f"the catalog file cannot be read: {exc}.", file=display) from None
    return parse_catalog(text, file=display, base_dir=path.resolve().parent)


def parse_catalog(text: str, *, file: str = "<catalog>", base_dir: Path | None = None) -> Catalog:
    """Validate catalog TOML text; relative source paths are resolved against ``base_dir``."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(
            f"the file is not valid TOML: {exc}.",
            file=file,
            fix="check the quoting and brackets on the line named above.",
        ) from None
    return _Validator(file, base_dir).catalog(doc)


class _Validator:
    """Turns a parsed TOML document into a :class:`Catalog`, with located error messages."""

    def __init__(self, file: str, base_dir: Path | None) -> None:
        self.file = file
        self.base_dir = base_dir

    def error(
        self,
        what: str,
        *,
        table: str | None = None,
        column: str | None = None,
        fix: str | None = None,
    ) -> CatalogError:
        return CatalogError(what, file=self.file, table=table, column=column, fix=fix)

    def catalog(self, doc: dict[str, Any]) -> Catalog:
        unknown = set(doc) - {"dataset", "tables"}
        if unknown:
            raise self.error(
                f"unknown top-level section(s) {sorted(unknown)}.",
                fix="a catalog has a [dataset] section and [tables.NAME] sections only.",
            )
        dataset = doc.get("dataset", {})
        if not isinstance(dataset, dict):
            raise self.error("[dataset] must be a table.", fix='write [dataset] then name = "..."')
        name = dataset.get(
            "name", Path(self.file).stem if self.file not in _UNNAMED_FILES else "dataset"
        )
        if not isinstance(name, str) or not name.strip():
            raise self.error("[dataset] name must be a non-empty string.")
        description = dataset.get("description", "")
        if not isinstance(description, str):
            raise self.error("[dataset] description must be a string.")
        unknown = set(dataset) - set(DATASET_KEYS)
        if unknown:
            raise self.error(
                f"unknown key(s) {sorted(unknown)} in [dataset].",
                fix="use name, description, engine, constant_time, deadlines, min_epsilon and "
                "min_people.",
            )
        engine = dataset.get("engine")
        if engine is not None and engine not in ENGINES:
            raise self.error(
                f"[dataset] engine must be one of {', '.join(ENGINES)}; got {engine!r}.",
                fix='write engine = "duckdb" (the embedded default), "postgres" or "spark".',
            )
        tables_doc = doc.get("tables")
        if not isinstance(tables_doc, dict) or not tables_doc:
            raise self.error(
                "the catalog declares no tables.",
                fix="add a section such as [tables.adult] with source, privacy_unit and columns.",
            )
        tables = []
        seen: set[str] = set()
        for table_name, table_doc in tables_doc.items():
            if table_name.lower() in seen:
                raise self.error(
                    "the table is declared twice (names are case-insensitive).", table=table_name
                )
            seen.add(table_name.lower())
            tables.append(self.table(table_name, table_doc))
        engine_name = self.engine(engine, tables)
        constant_time = self.constant_time(dataset, engine_name, tables)
        tables = [self.reached_unit(t, tables, constant_time) for t in tables]
        return Catalog(
            name=name.strip(),
            tables=tuple(tables),
            path=Path(self.file) if self.file not in _UNNAMED_FILES else None,
            description=description,
            engine=engine_name,
            constant_time=constant_time,
            deadlines_path=self.deadlines_path(dataset, constant_time),
            min_epsilon=self.min_epsilon(dataset),
            min_people=self.min_people(dataset),
        )

    def min_people(self, dataset: dict[str, Any]) -> int | None:
        """The ``min_people`` rule: a whole number of privacy units from 2 to a million, or absent."""
        value = dataset.get("min_people")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= MAX_PEOPLE:
            raise self.error(
                f"[dataset] min_people must be a whole number from 2 to {MAX_PEOPLE}, got "
                f"{value!r}.",
                fix="write min_people = 10, for example (no released cell rests on fewer than "
                "10 people), or leave it out for no rule.",
            )
        return value

    def min_epsilon(self, dataset: dict[str, Any]) -> Fraction | None:
        """The ``min_epsilon`` floor: a positive number, or absent."""
        value = dataset.get("min_epsilon")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1000:
            raise self.error(
                f"[dataset] min_epsilon must be a positive number up to 1000, got {value!r}.",
                fix="write min_epsilon = 0.01, for example, or leave it out for no floor.",
            )
        return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)

    def constant_time(self, dataset: dict[str, Any], engine: str, tables: list[Table]) -> bool:
        """The ``constant_time`` setting, checked against what the mode needs."""
        value = dataset.get("constant_time", False)
        if not isinstance(value, bool):
            raise self.error("[dataset] constant_time must be true or false.")
        if not value:
            return False
        if engine != "duckdb":
            raise self.error(
                f"constant_time is supported on the duckdb engine only, not {engine}.",
                fix='set engine = "duckdb", or constant_time = false.',
            )
        for table in tables:
            if table.max_row_count is None:
                raise self.error(
                    "constant_time needs a declared max_row_count on every table.",
                    table=table.name,
                    fix="add max_row_count = N (the most rows the table will ever hold) to the "
                    "table; deadlines are calibrated for tables of that size.",
                )
        return True

    def deadlines_path(self, dataset: dict[str, Any], constant_time: bool) -> Path | None:
        """The deadlines sidecar: as declared, else ``<catalog>.deadlines.toml`` beside it."""
        raw = dataset.get("deadlines")
        if raw is not None and (not isinstance(raw, str) or not raw):
            raise self.error("[dataset] deadlines must be a file path.")
        if raw is None:
            if not constant_time or self.file in _UNNAMED_FILES:
                return None
            return Path(self.file).with_suffix(".deadlines.toml").resolve()
        path = Path(raw).expanduser()
        if not path.is_absolute() and self.base_dir is not None:
            path = self.base_dir / path
        return path

    def engine(self, declared: str | None, tables: list[Table]) -> str:
        """The engine that runs the dataset: the declared one, else the one its sources need."""
        kinds = {t.source.kind for t in tables}
        if declared is None:
            needing = sorted(kinds & {"postgres", "spark"})
            if len(needing) > 1:
                raise self.error(
                    "the tables mix postgres and spark sources, and one engine runs every query "
                    "of a dataset.",
                    fix="split the tables into two catalogs, one per engine.",
                )
            declared = needing[0] if needing else "duckdb"
        for table in tables:
            if table.source.kind not in ENGINE_SOURCES[declared]:
                readable = ", ".join(ENGINE_SOURCES[declared])
                raise self.error(
                    f"the {declared} engine cannot read a {table.source.kind} source (it reads "
                    f"{readable}).",
                    table=table.name,
                    fix=f"change the source to one of {readable}, or choose another [dataset] "
                    "engine.",
                )
        return declared

    def table(self, name: str, doc: Any) -> Table:
        if not _IDENT.match(name):
            raise self.error(
                "a table name must be a plain SQL identifier (letters, digits, underscores).",
                table=name,
            )
        if not isinstance(doc, dict):
            raise self.error("a table must be a TOML table.", table=name)
        unknown = set(doc) - set(TABLE_KEYS)
        if unknown:
            raise self.error(
                f"unknown key(s) {sorted(unknown)}.",
                table=name,
                fix="a table has source, privacy_unit, columns and optionally public, description and "
                "max_row_count.",
            )
        public = doc.get("public", False)
        if not isinstance(public, bool):
            raise self.error("public must be true or false.", table=name)
        source = self.source(name, doc.get("source"))
        columns_doc = doc.get("columns")
        if not isinstance(columns_doc, dict) or not columns_doc:
            raise self.error(
                "the table declares no columns.",
                table=name,
                fix=f'add [tables.{name}.columns] with lines such as age = {{ type = "int", bounds = [0, 100] }}.',
            )
        columns = []
        seen: set[str] = set()
        for col_name, col_doc in columns_doc.items():
            if col_name.lower() in seen:
                raise self.error("the column is declared twice.", table=name, column=col_name)
            seen.add(col_name.lower())
            columns.append(self.column(name, col_name, col_doc))
        unit = self.privacy_unit(name, doc.get("privacy_unit"), columns, public)
        self.check_per_unit(name, columns, public)
        max_rows = doc.get("max_row_count")
        if max_rows is not None and (
            isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1
        ):
            raise self.error(
                f"max_row_count must be an integer >= 1; got {max_rows!r}.",
                table=name,
                fix="declare the most rows the table will ever hold, e.g. max_row_count = 1000000.",
            )
        return Table(
            name=name,
            source=source,
            privacy_unit=unit,
            columns=tuple(columns),
            public=public,
            max_row_count=max_rows,
        )

    def source(self, table: str, doc: Any) -> Source:
        example = 'source = { csv = "data.csv" }'
        if doc is None:
            raise self.error(
                "the table has no source.", table=table, fix=f"add a line such as {example}."
            )
        if is_frame(doc):
            doc = {FRAME_KIND: doc}
        if not isinstance(doc, dict):
            raise self.error(
                "source must be an inline table.", table=table, fix=f"write {example}."
            )
        kinds = [k for k in doc if k in SOURCE_KINDS]
        if len(kinds) != 1:
            raise self.error(
                f"source must name exactly one of {', '.join(SOURCE_KINDS)}; got {sorted(doc) or 'nothing'}.",
                table=table,
                fix=f"write {example}.",
            )
        kind = kinds[0]
        location = doc[kind]
        if kind == FRAME_KIND:
            return self.frame_source(table, doc)
        if not isinstance(location, str) or not location:
            raise self.error(f"source {kind} must be a non-empty string.", table=table)
        allowed = {kind, "table", "options"}
        unknown = set(doc) - allowed
        if unknown:
            raise self.error(f"unknown source key(s) {sorted(unknown)}.", table=table)
        inner = doc.get("table")
        if inner is not None and (not isinstance(inner, str) or not inner):
            raise self.error("source table must be a non-empty string.", table=table)
        if kind in {"duckdb", "postgres"} and inner is None:
            raise self.error(
                f"a {kind} source must name the table inside the database.",
                table=table,
                fix=f'write source = {{ {kind} = "{location}", table = "{table}" }}.',
            )
        options_doc = doc.get("options", {})
        if not isinstance(options_doc, dict) or not all(
            isinstance(v, str | int | float | bool) for v in options_doc.values()
        ):
            raise self.error("source options must be a table of simple values.", table=table)
        options = tuple(sorted((str(k), str(v)) for k, v in options_doc.items()))
        if kind in {"csv", "parquet", "duckdb"}:
            location = self.resolve_path(table, kind, location)
        return Source(kind=kind, location=location, table=inner, options=options)

    def frame_source(self, table: str, doc: dict[str, Any]) -> Source:
        """An in-memory table given from Python (never from a TOML file, which cannot hold one)."""
        frame = doc[FRAME_KIND]
        if not is_frame(frame):
            where = "a catalog file" if self.file != PYTHON_FILE else "Python"
            raise self.error(
                f"a frame source must be a pandas or Polars DataFrame, an Arrow table or a DuckDB "
                f"relation; got {type(frame).__name__} from {where}.",
                table=table,
                fix="build the catalog in Python with Catalog.from_dict and pass the data itself, "
                'e.g. "source": df; a file is source = { csv = "data.csv" }.',
            )
        label = frame_type(frame)
        if label in ONE_SHOT:
            call = ".collect()" if label == "Polars LazyFrame" else ".read_all()"
            raise self.error(
                f"a {label} can be read only once, and a table is scanned by every query.",
                table=table,
                fix=f"pass the data itself: call {call} on it first.",
            )
        unknown = set(doc) - {FRAME_KIND}
        if unknown:
            raise self.error(f"unknown source key(s) {sorted(unknown)}.", table=table)
        return Source(kind=FRAME_KIND, location=frame_label(frame), frame=frame)

    def resolve_path(self, table: str, kind: str, location: str) -> str:
        path = Path(location).expanduser()
        if not path.is_absolute() and self.base_dir is not None:
            path = self.base_dir / path
        text = str(path)
        if any(ch in text for ch in "*?["):
            if not glob.glob(text):
                raise self.error(f"no file matches the {kind} pattern {text!r}.", table=table)
        elif not path.exists():
            raise self.error(
                f"the {kind} file {text!r} does not exist.",
                table=table,
                fix="relative paths are read from the catalog file's folder; check the path.",
            )
        return text

    def column(self, table: str, name: str, doc: Any) -> Column:
        if not _IDENT.match(name):
            raise self.error(
                "a column name must be a plain SQL identifier.", table=table, column=name
            )
        if isinstance(doc, str):
            doc = {"type": doc}
        if not isinstance(doc, dict):
            raise self.error(
                "a column must be an inline table.",
                table=table,
                column=name,
                fix=f'write {name} = {{ type = "int", bounds = [0, 100] }}.',
            )
        unknown = set(doc) - set(COLUMN_KEYS)
        if unknown:
            raise self.error(
                f"unknown key(s) {sorted(unknown)}.",
                table=table,
                column=name,
                fix="a column has type, and optionally bounds, keys, nullable, join_rows_per_key, "
                "per_unit and description.",
            )
        col_type = doc.get("type")
        if col_type not in COLUMN_TYPES:
            raise self.error(
                f"type must be one of {', '.join(COLUMN_TYPES)}; got {col_type!r}.",
                table=table,
                column=name,
            )
        nullable = doc.get("nullable", True)
        if not isinstance(nullable, bool):
            raise self.error("nullable must be true or false.", table=table, column=name)
        bounds = None
        private = None
        if doc.get("bounds") == PRIVATE_BOUNDS:
            private = PrivateBounds(self.bounds_epsilon(table, name, col_type, doc))
        elif "bounds" in doc:
            bounds = self.bounds(table, name, col_type, doc["bounds"])
        if "bounds_epsilon" in doc and private is None:
            raise self.error(
                "bounds_epsilon only applies to bounds chosen privately.",
                table=table,
                column=name,
                fix='write bounds = "private", or remove bounds_epsilon.',
            )
        keys = None
        if "keys" in doc:
            keys = self.keys(table, name, col_type, doc["keys"])
        return Column(
            name=name,
            type=col_type,
            bounds=bounds,
            keys=keys,
            nullable=nullable,
            private_bounds=private,
            join_rows_per_key=self.join_rows_per_key(table, name, doc),
            per_unit=self.per_unit(table, name, doc),
        )

    def per_unit(self, table: str, column: str, doc: dict[str, Any]) -> bool:
        """Whether the column holds one value per privacy unit (``per_unit``, default false)."""
        per_unit = doc.get("per_unit", False)
        if not isinstance(per_unit, bool):
            raise self.error(
                f"per_unit must be true or false; got {per_unit!r}.",
                table=table,
                column=column,
                fix="write per_unit = true for a column that holds one value per person "
                "(such as the state they live in), or leave it out.",
            )
        return per_unit

    def check_per_unit(self, table: str, columns: list[Column], public: bool) -> None:
        """Refuse ``per_unit`` on a public table: it has no privacy unit to hold one value for."""
        for column in columns:
            if public and column.per_unit:
                raise self.error(
                    "per_unit describes a private table's rows, and this table is public: "
                    "it has no privacy unit.",
                    table=table,
                    column=column.name,
                    fix="remove per_unit, or make the table private with a privacy_unit.",
                )

    def join_rows_per_key(self, table: str, column: str, doc: dict[str, Any]) -> int | None:
        """The truncation of a private join on the column (``join_rows_per_key``), if declared."""
        raw = doc.get("join_rows_per_key")
        if raw is None:
            return None
        if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_JOIN_ROWS:
            raise self.error(
                f"join_rows_per_key must be a whole number from 1 to {MAX_JOIN_ROWS}; got {raw!r}.",
                table=table,
                column=column,
                fix="write join_rows_per_key = 10 (the most rows sharing one value of this "
                "column that a join of two private tables keeps).",
            )
        return raw

    def bounds_epsilon(
        self, table: str, column: str, col_type: str, doc: dict[str, Any]
    ) -> Fraction:
        """The ε a private choice of the column's bounds costs (``bounds_epsilon``)."""
        if col_type not in NUMERIC_TYPES:
            raise self.error(
                f"bounds only apply to numeric columns, and this one is {col_type}.",
                table=table,
                column=column,
                fix="remove bounds, or declare keys for a categorical column.",
            )
        raw = doc.get("bounds_epsilon", DEFAULT_BOUNDS_EPSILON)
        if isinstance(raw, Fraction):
            return raw
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 < raw <= 10:
            raise self.error(
                f"bounds_epsilon must be a number in (0, 10]; got {raw!r}.",
                table=table,
                column=column,
                fix="write bounds_epsilon = 0.05 (the ε choosing the bounds may spend).",
            )
        return Fraction(repr(raw)) if isinstance(raw, float) else Fraction(raw)

    def bounds(self, table: str, column: str, col_type: str, raw: Any) -> tuple[Fraction, Fraction]:
        if col_type not in NUMERIC_TYPES:
            raise self.error(
                f"bounds only apply to numeric columns, and this one is {col_type}.",
                table=table,
                column=column,
                fix="remove bounds, or declare keys for a categorical column.",
            )
        if not (isinstance(raw, list) and len(raw) == 2):
            raise self.error(
                f"bounds must be a list of two numbers [low, high]; got {raw!r}.",
                table=table,
                column=column,
                fix='write bounds = [0, 100], or bounds = "private" to have them chosen with a DP mechanism.',
            )
        values = []
        for item in raw:
            if isinstance(item, bool) or not isinstance(item, int | float):
                raise self.error(
                    f"bounds must be numbers; got {item!r}.", table=table, column=column
                )
            if isinstance(item, float) and not math.isfinite(item):
                raise self.error("bounds must be finite.", table=table, column=column)
            if col_type == "int" and isinstance(item, float) and not item.is_integer():
                raise self.error(
                    f"bounds of an int column must be integers; got {item!r}.",
                    table=table,
                    column=column,
                )
            values.append(Fraction(repr(item)) if isinstance(item, float) else Fraction(item))
        low, high = values
        if low > high:
            raise self.error(
                f"the lower bound {raw[0]} is above the upper bound {raw[1]}.",
                table=table,
                column=column,
                fix=f"write bounds = [{raw[1]}, {raw[0]}].",
            )
        return low, high

    def keys(self, table: str, column: str, col_type: str, raw: Any) -> tuple[Key, ...]:
        if not isinstance(raw, list) or not raw:
            raise self.error("keys must be a non-empty list.", table=table, column=column)
        expected: tuple[type, ...] = {
            "str": (str,),
            "int": (int,),
            "bool": (bool,),
            "date": (str,),
            "float": (int, float),
        }[col_type]
        for item in raw:
            ok = isinstance(item, expected) and not (col_type == "int" and isinstance(item, bool))
            if not ok:
                raise self.error(
                    f"key {item!r} does not match the column type {col_type}.",
                    table=table,
                    column=column,
                )
        if len(set(raw)) != len(raw):
            dupes = sorted({str(k) for k in raw if raw.count(k) > 1})
            raise self.error(f"keys are listed twice: {dupes}.", table=table, column=column)
        return tuple(raw)

    def privacy_unit(
        self, table: str, raw: Any, columns: list[Column], public: bool
    ) -> PrivacyUnit:
        if raw is None:
            if public:
                return RowUnit()
            raise self.error(
                "the table has no privacy_unit.",
                table=table,
                fix='add privacy_unit = "row", or { column = "person_id", max_rows = 5, max_groups = 2 }.',
            )
        if raw == "row":
            return RowUnit()
        if isinstance(raw, dict):
            unknown = set(raw) - set(UNIT_KEYS)
            if unknown:
                raise self.error(
                    f"unknown privacy_unit key(s) {sorted(unknown)}.",
                    table=table,
                    fix="use column, max_rows, max_groups and through.",
                )
            col = raw.get("column")
            through = self.through(table, raw.get("through"), col, columns, public)
            declared = isinstance(col, str) and col.lower() in {c.name.lower() for c in columns}
            if through is None and not declared:
                raise self.error(
                    f"privacy_unit column {col!r} is not a declared column.",
                    table=table,
                    fix="declare the id column under columns and name it in privacy_unit.",
                )
            caps = {}
            for cap in ("max_rows", "max_groups"):
                value = raw.get(cap, 1)
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise self.error(
                        f"privacy_unit {cap} must be an integer >= 1; got {value!r}.", table=table
                    )
                caps[cap] = value
            return IdUnit(
                column=str(col),
                max_rows=caps["max_rows"],
                max_groups=caps["max_groups"],
                through=through,
            )
        raise self.error(
            f'privacy_unit must be "row" or an inline table; got {raw!r}.',
            table=table,
            fix='write privacy_unit = "row".',
        )

    def through(
        self, table: str, raw: Any, column: Any, columns: list[Column], public: bool
    ) -> Reach | None:
        """``privacy_unit.through``: the unit reached through a key of another table, checked
        within this table (the other table is checked by :meth:`reached_unit`).
        """
        if raw is None:
            return None
        fix = (
            'write privacy_unit = { column = "l_custkey", through = { column = "l_orderkey", '
            'table = "orders", key = "o_orderkey" }, max_rows = 280 }.'
        )
        if public:
            raise self.error("a public table has no privacy unit to reach.", table=table)
        if not isinstance(raw, dict) or set(raw) != set(THROUGH_KEYS):
            raise self.error(
                f"privacy_unit through must be an inline table with column, table and key; "
                f"got {raw!r}.",
                table=table,
                fix=fix,
            )
        if not all(isinstance(raw[k], str) and _IDENT.match(raw[k]) for k in THROUGH_KEYS):
            raise self.error(
                "privacy_unit through: column, table and key must be plain SQL identifiers.",
                table=table,
                fix=fix,
            )
        names = {c.name.lower() for c in columns}
        if not isinstance(column, str) or not _IDENT.match(column) or column.lower() in names:
            raise self.error(
                f"privacy_unit column {column!r}: with through, the column names the unit the "
                "engine joins in, so it must be a new name, not a declared column.",
                table=table,
                fix=fix,
            )
        if raw["column"].lower() not in names:
            raise self.error(
                f"privacy_unit through column {raw['column']!r} is not a declared column.",
                table=table,
                fix="declare the key column under columns and name it in through.",
            )
        declared = {c.name.lower(): c.name for c in columns}
        return Reach(column=declared[raw["column"].lower()], table=raw["table"], key=raw["key"])

    def reached_unit(self, table: Table, tables: list[Table], constant_time: bool) -> Table:
        """``table`` with its unit reached through another table's key added as a column (of
        the referenced unit's type), once the referenced table is known to be a private table
        whose unit is a stored column and whose key has the same type as the table's column.
        """
        reach = table.reach
        if reach is None:
            return table
        unit = table.privacy_unit
        assert isinstance(unit, IdUnit)
        where = f"privacy_unit through table {reach.table!r}"
        if constant_time:
            raise self.error(
                "constant_time does not support a unit reached through another table.",
                table=table.name,
                fix="store the unit's column in the table, or set constant_time = false.",
            )
        other = next((t for t in tables if t.name.lower() == reach.table.lower()), None)
        if other is None or other is table:
            raise self.error(
                f"{where} is not another table of the catalog.",
                table=table.name,
                fix="name the table whose key the column refers to.",
            )
        other_unit = other.privacy_unit
        if other.public or not isinstance(other_unit, IdUnit) or other_unit.through is not None:
            raise self.error(
                f"{where} must be a private table whose privacy_unit is a column it stores.",
                table=table.name,
                fix=f"give {other.name} privacy_unit = {{ column = ... }}, or store the unit's "
                "column in this table.",
            )
        key = other.column(reach.key)
        mine = table.column(reach.column)
        assert mine is not None
        if key is None or key.type != mine.type:
            found = "has no such column" if key is None else f"is {key.type}, not {mine.type}"
            raise self.error(
                f"{where}: key {reach.key!r} {found}.",
                table=table.name,
                fix=f"name a column of {other.name} of the same type as {reach.column}.",
            )
        id_column = other.column(other_unit.column)
        assert id_column is not None
        reached = Column(name=unit.column, type=id_column.type)
        fixed = Reach(reach.column, other.name, key.name, unit=id_column.name)
        return replace(
            table,
            privacy_unit=replace(unit, through=fixed),
            columns=(*table.columns, reached),
        )
