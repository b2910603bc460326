"""The custodian's check of a catalog against the data: what will be clipped, dropped or misread.

Every declaration in a catalog is public and chosen without looking at the data — that is what
makes it safe. But a wrong declaration fails silently: a key list written ``["male", "female"]``
over data holding ``Male`` and ``Female`` leaves every row out of every GROUP BY on that column,
and bounds of ``[0, 10]`` on an income column clip almost every value to 10. No analyst can see
this (the answers are noisy and the data hidden); only the custodian, who may read the data, can.

:func:`profile_catalog` reads each table *as the custodian* and reports, per table and column:

* values outside the declared bounds (clipped to them in every SUM, AVG, …);
* values outside the declared key list (left out of every GROUP BY on the column), with the most
  frequent ones, and how many would match a key but for upper/lower case;
* the NULL share, NULLs in a column declared ``nullable = false``, and values that do not parse
  as the declared type (read as NULL; DuckDB engine);
* for a privacy unit ``{column = pid, max_rows = R, max_groups = G}``: rows without an id (never
  counted), people with more than R rows (their extra rows are dropped) and, per key column, with
  more than G distinct values (a GROUP BY on it keeps G of their groups);
* CSV lines that could not be read (skipped, by reason), and a source above its declared ``max_row_count``.

This is a custodian's tool: it prints data-derived facts without noise, spends no budget, and is
reachable only from Python and the ``dalenius catalog check`` command — never from the gateway
(the import contract in pyproject.toml forbids ``dalenius.server`` to import this module).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from dalenius.core.catalog import Catalog, Column, Key, Table
from dalenius.core.unit import IdUnit
from dalenius.executors.base import Executor
from dalenius.executors.convert import sql_string
from dalenius.executors.factory import executor_for

EXAMPLES = 5
"""How many of the most frequent values outside a key list are shown."""


@dataclass(frozen=True)
class ColumnProfile:
    """What the data hold against one column's declarations."""

    name: str
    type: str
    nulls: int
    unreadable: int | None = None
    """Values that do not parse as the declared type and are read as NULL (``None``: not checked)."""
    below: int | None = None
    above: int | None = None
    outside_keys: int | None = None
    case_only: int | None = None
    """Rows outside the key list that would match a key but for upper/lower case."""
    examples: tuple[tuple[str, int], ...] = ()
    """The most frequent values outside the key list, with their row counts."""
    over_groups: int | None = None
    """People holding more distinct values of this column than the unit's ``max_groups``."""


@dataclass(frozen=True)
class TableProfile:
    """One table's rows, per-column profiles and privacy-unit facts."""

    name: str
    rows: int
    columns: tuple[ColumnProfile, ...]
    skipped_lines: int | None = None
    skipped: dict[str, int] | None = None
    """CSV lines skipped, by reason (see :mod:`dalenius.executors.csv_text`)."""
    max_row_count: int | None = None
    unit: dict[str, Any] | None = None
    findings: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def profile_catalog(catalog: Catalog, executor: Executor | None = None) -> list[TableProfile]:
    """Profile every table of ``catalog`` against its declarations (reads the data; no noise).

    Example:
        >>> import pandas as pd
        >>> cat = Catalog.from_dict({"tables": {"t": {"source": pd.DataFrame({"x": [1, 50, 9]}),
        ...     "privacy_unit": "row", "columns": {"x": {"type": "int", "bounds": [0, 10]}}}}})
        >>> profile_catalog(cat)[0].findings
        ("column 'x': 1 of 3 rows (33.3%) above the upper bound 10: clipped to it in every aggregate.",)
    """
    original = catalog
    # The profile reads each source whole: no table is refused for its size (that is reported),
    # and no person's rows are trimmed to the cap in advance (that is measured).
    catalog = replace(
        catalog,
        constant_time=False,
        tables=tuple(replace(t, max_row_count=None) for t in catalog.tables),
    )
    engine = executor if executor is not None else executor_for(catalog)
    declared = {t.name: t.max_row_count for t in original.tables}
    try:
        return [_Profiler(engine, table, declared[table.name]).run() for table in catalog.tables]
    finally:
        if executor is None:
            engine.close()


class _Profiler:
    """Builds one table's profile with a few aggregate queries in the table's own engine."""

    def __init__(self, executor: Executor, table: Table, max_row_count: int | None) -> None:
        self.executor = executor
        self.table = table
        self.max_row_count = max_row_count
        self.quote = executor.dialect.quote
        self.text = executor.dialect.text_type
        self.relation = self.quote(table.name)

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        return self.executor.fetch(sql)

    def run(self) -> TableProfile:
        table = self.table
        self.executor.prepare(table)
        parts = ["COUNT(*)"]
        for column in table.columns:
            c = self.quote(column.name)
            parts.append(f"COUNT({c})")
            if column.bounds is not None:
                low, high = (_number(b) for b in column.bounds)
                parts.append(f"SUM(CASE WHEN {c} < {low} THEN 1 ELSE 0 END)")
                parts.append(f"SUM(CASE WHEN {c} > {high} THEN 1 ELSE 0 END)")
            if column.keys is not None:
                parts.append(f"SUM(CASE WHEN {self.outside(column)} THEN 1 ELSE 0 END)")
                if column.type == "str":
                    lowered = ", ".join(sql_string(str(k).lower()) for k in column.keys)
                    parts.append(
                        f"SUM(CASE WHEN {self.outside(column)} AND LOWER({c}) IN ({lowered}) "
                        "THEN 1 ELSE 0 END)"
                    )
        (row,) = self.fetch(f"SELECT {', '.join(parts)} FROM {self.relation}")
        values = iter(int(v or 0) for v in row)
        rows = next(values)
        unreadable = self.unreadable()
        unit = self.unit_facts()
        columns = []
        for column in table.columns:
            non_null = next(values)
            info: dict[str, Any] = {"nulls": rows - non_null}
            if column.bounds is not None:
                info["below"], info["above"] = next(values), next(values)
            if column.keys is not None:
                info["outside_keys"] = next(values)
                if column.type == "str":
                    info["case_only"] = next(values)
                if info["outside_keys"]:
                    info["examples"] = self.examples(column)
            if column.name in unreadable:
                info["unreadable"] = unreadable[column.name]
            if unit is not None and column.name in unit["over_groups"]:
                info["over_groups"] = unit["over_groups"][column.name]
            columns.append(ColumnProfile(name=column.name, type=column.type, **info))
        skipped = self.skipped_lines()
        profile = TableProfile(
            name=table.name,
            rows=rows,
            columns=tuple(columns),
            skipped_lines=None if skipped is None else sum(skipped.values()),
            skipped=skipped,
            max_row_count=self.max_row_count,
            unit=unit,
        )
        return replace(profile, findings=tuple(findings(table, profile)))

    def outside(self, column: Column) -> str:
        c = self.quote(column.name)
        listed = ", ".join(_literal(k) for k in column.keys or ())
        return f"{c} IS NOT NULL AND {c} NOT IN ({listed})"

    def examples(self, column: Column) -> tuple[tuple[str, int], ...]:
        c = self.quote(column.name)
        found = self.fetch(
            f"SELECT CAST({c} AS {self.text}) AS v, COUNT(*) AS n FROM {self.relation} "
            f"WHERE {self.outside(column)} GROUP BY {c} ORDER BY n DESC, v LIMIT {EXAMPLES}"
        )
        return tuple((str(v), int(n)) for v, n in found)

    def unreadable(self) -> dict[str, int]:
        """Per non-text column, values in the source that the declared type reads as NULL."""
        source_counts = getattr(self.executor, "source_counts", None)
        checked = [c for c in self.table.stored_columns if c.type != "str"]
        if source_counts is None or not checked:
            return {}
        raw_counts = source_counts(self.table, [c.name for c in checked])
        counts = ", ".join(f"COUNT({self.quote(c.name)})" for c in checked)
        (read_counts,) = self.fetch(f"SELECT {counts} FROM {self.stored()}")
        return {
            c.name: int(r or 0) - int(v or 0)
            for c, r, v in zip(checked, raw_counts, read_counts, strict=True)
        }

    def skipped_lines(self) -> dict[str, int] | None:
        """CSV lines the executor skipped, by reason (``None``: not a CSV source, or an engine
        that reads no files).
        """
        count = getattr(self.executor, "skipped_rows", None)
        if count is None or self.table.source.kind != "csv":
            return None
        return {str(why): int(n) for why, n in count(self.table).items()}

    def stored(self) -> str:
        """The table's rows as stored: for a unit reached through a key, before it is joined
        in (a key held by several rows of the other table repeats a row, once per unit).
        """
        stored_relation = getattr(self.executor, "stored_relation", None)
        return self.relation if stored_relation is None else str(stored_relation(self.table))

    def unit_facts(self) -> dict[str, Any] | None:
        unit = self.table.privacy_unit
        if self.table.public or not isinstance(unit, IdUnit):
            return None
        pid = self.quote(unit.column)
        keyed = [c for c in self.table.columns if c.keys is not None and c.name != unit.column]
        distinct = "".join(
            f", COUNT(DISTINCT {self.quote(c.name)}) AS g{i}" for i, c in enumerate(keyed)
        )
        over = "".join(
            f", SUM(CASE WHEN g{i} > {unit.max_groups} THEN 1 ELSE 0 END)"
            for i in range(len(keyed))
        )
        (row,) = self.fetch(
            f"SELECT COUNT(*), SUM(CASE WHEN n > {unit.max_rows} THEN 1 ELSE 0 END), "
            f"SUM(CASE WHEN n > {unit.max_rows} THEN n - {unit.max_rows} ELSE 0 END), MAX(n){over} "
            f"FROM (SELECT COUNT(*) AS n{distinct} FROM {self.relation} WHERE {pid} IS NOT NULL "
            f"GROUP BY {pid}) AS per_person"
        )
        values = [int(v or 0) for v in row]
        (no_id,) = self.fetch(f"SELECT COUNT(*) FROM {self.relation} WHERE {pid} IS NULL")
        reach = self.table.reach
        reached: dict[str, Any] = {}
        if reach is not None:
            ((stored,),) = self.fetch(f"SELECT COUNT(*) FROM {self.stored()}")
            ((joined,),) = self.fetch(f"SELECT COUNT(*) FROM {self.relation}")
            reached = {
                "through": reach.describe(),
                "stored_rows": int(stored or 0),
                "repeated_rows": int(joined or 0) - int(stored or 0),
            }
        return {
            **reached,
            "column": unit.column,
            "max_rows": unit.max_rows,
            "max_groups": unit.max_groups,
            "people": values[0],
            "people_over_rows": values[1],
            "rows_dropped": values[2],
            "most_rows": values[3],
            "rows_without_id": int(no_id[0] or 0),
            "over_groups": {c.name: n for c, n in zip(keyed, values[4:], strict=True)},
        }


def findings(table: Table, profile: TableProfile) -> list[str]:
    """The profile in sentences: only what will be clipped, dropped or misread."""
    rows = profile.rows
    out = []

    def share(n: int) -> str:
        return f"{n:,} of {rows:,} rows ({n / rows:.1%})" if rows else f"{n:,} rows"

    if profile.skipped_lines:
        reasons = ", ".join(f"{n:,} {why}" for why, n in sorted((profile.skipped or {}).items()))
        out.append(
            f"{profile.skipped_lines:,} CSV line(s) could not be read and are skipped "
            f"({reasons}): left out of every answer."
        )
    if profile.max_row_count is not None and rows > profile.max_row_count:
        out.append(
            f"the source holds {rows:,} rows, above the declared max_row_count "
            f"{profile.max_row_count:,}: the table will be refused when opened."
        )
    for column, col in zip(profile.columns, table.columns, strict=True):
        out += _column_findings(column, col, share, profile.unit)
    if profile.unit is not None:
        out += _unit_findings(profile.unit, share)
    return out


def _column_findings(
    column: ColumnProfile, col: Column, share: Callable[[int], str], unit: dict[str, Any] | None
) -> list[str]:
    """What will be misread, clipped or left out in one column (``col`` its declaration)."""
    out = []
    where = f"column {column.name!r}: "
    if column.unreadable:
        out.append(
            where + f"{share(column.unreadable)} do not read as {column.type} and are read as NULL."
        )
    if column.nulls and not col.nullable:
        out.append(
            where + f"{share(column.nulls)} are NULL, but the column is declared "
            "nullable = false: COUNT(column) will be answered as COUNT(*)."
        )
    if column.below and col.bounds is not None:
        out.append(
            where + f"{share(column.below)} below the lower bound {_number(col.bounds[0])}: "
            "clipped to it in every aggregate."
        )
    if column.above and col.bounds is not None:
        out.append(
            where + f"{share(column.above)} above the upper bound {_number(col.bounds[1])}: "
            "clipped to it in every aggregate."
        )
    if column.outside_keys:
        seen = ", ".join(f"{v!r} ({n:,})" for v, n in column.examples)
        text = (
            where + f"{share(column.outside_keys)} hold a value outside the declared keys "
            f"(most frequent: {seen}): left out of every GROUP BY on this column."
        )
        if column.case_only:
            text += (
                f" {column.case_only:,} of them match a key but for upper/lower case: "
                "check the case of the key list."
            )
        out.append(text)
    if column.over_groups and unit is not None:
        out.append(
            where + f"{column.over_groups:,} people hold more than max_groups = "
            f"{unit['max_groups']} distinct values: a GROUP BY on it keeps "
            f"{unit['max_groups']} of their groups."
        )
    return out


def _unit_findings(unit: dict[str, Any], share: Callable[[int], str]) -> list[str]:
    """What the privacy unit's caps drop, and the rows no unit holds."""
    out = []
    if unit["people_over_rows"]:
        out.append(
            f"privacy unit {unit['column']!r}: {unit['people_over_rows']:,} of "
            f"{unit['people']:,} people have more than max_rows = {unit['max_rows']} rows "
            f"(at most {unit['most_rows']:,}); {share(unit['rows_dropped'])} are dropped "
            "from every query."
        )
    through = unit.get("through")
    if through is not None and unit["repeated_rows"]:
        out.append(
            f"privacy unit {unit['column']!r}: {unit['repeated_rows']:,} rows more than the "
            f"{unit['stored_rows']:,} stored: a key that several rows hold ({through}) gives "
            "its rows once to each of their units, each under its own caps."
        )
    if through is not None and unit["rows_without_id"]:
        out.append(
            f"privacy unit {unit['column']!r}: {share(unit['rows_without_id'])} reach no unit "
            f"through {through} (no row holds their key, or its unit is NULL) and are never "
            "counted."
        )
    elif unit["rows_without_id"]:
        out.append(
            f"privacy unit {unit['column']!r}: {share(unit['rows_without_id'])} have no id "
            "(NULL) and are never counted."
        )
    return out


def _number(value: Any) -> str:
    """A bound as SQL and text: an integer exactly, else the float it came from."""
    return str(int(value)) if value.denominator == 1 else repr(float(value))


def _literal(key: Key) -> str:
    if isinstance(key, bool):
        return "TRUE" if key else "FALSE"
    if isinstance(key, int | float):
        return repr(key)
    return sql_string(key)
