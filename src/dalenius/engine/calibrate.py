"""Calibrate constant-time release: measure each plan class on adversarial tables, write deadlines.

The deadline of a plan class must hold for *every* dataset the catalog allows, so it is measured on
synthetic tables built to be slow, never on the real data (which it must not depend on). Each table
gets the declared ``max_row_count`` rows, in two variants:

* ``one person``: one person holds 90% of the rows (an id unit; the per-person row cap, enforced at
  load in constant-time mode, then throws most of them away — measured, not assumed), numeric
  values alternating between far outliers that defeat min/max statistics, the longest keys;
* ``all distinct``: every person, every string and every number distinct (strings 200 characters
  long), with the same outliers: the most groups and the largest hash tables.

For each plan class the catalog allows (:func:`class_queries`) and each variant, the query runs
``runs`` times through a real session (SQLite ledger, constant-time engine settings) after a short
warm-up; the deadline is the ``quantile`` of the slower variant's times, multiplied by ``margin``.
The time measured is what a deadline covers: from the ready plan to the finished answer (reserve,
engine, noise, commit, post-processing).
"""

from __future__ import annotations

import itertools
import math
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from dalenius.core.catalog import Catalog, Column, Source, Table
from dalenius.core.deadlines import Deadlines, public_fingerprint
from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import ApproxDP
from dalenius.core.unit import IdUnit
from dalenius.engine.session import Session
from dalenius.engine.timing import Deadline
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger
from dalenius.plan.protocol import ReleasePlan
from dalenius.releases.perturbation import units_of_one_row

VARIANTS = ("one person", "all distinct")
HEAVY_SHARE = 0.9
"""The share of rows the one heavy person holds in the ``one person`` variant."""
LONG_STRING = 200
"""Length of the strings of columns without public keys."""
WARMUP = 3
"""Unmeasured runs before each measured series (first parse and plan of the engine's SQL)."""

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class ClassQuery:
    """The query calibrating one plan class, and the δ it needs (unkeyed GROUP BY); for a
    release product's class, ``release`` asks for the product instead (``sql`` describes it).
    """

    plan_class: str
    sql: str
    delta: float | None = None
    release: Callable[[Session], object] | None = field(default=None, compare=False)

    def run(self, session: Session) -> object:
        """Ask for this class's release once."""
        if self.release is not None:
            return self.release(session)
        return session.query(self.sql, 1.0, delta=self.delta)


@dataclass(frozen=True)
class Measured:
    """The latencies of one plan class on one adversarial variant, in milliseconds."""

    plan_class: str
    variant: str
    millis: tuple[float, ...]


def class_queries(catalog: Catalog) -> list[ClassQuery]:
    """One demanding query per plan class the catalog's tables allow.

    A scan sums and averages the first bounded column; a GROUP BY groups by a keyed column (and an
    unkeyed one, if any, which needs δ); a quantile takes a median; a join joins a private table
    with a public table or a second private table on a shared column.
    """
    private = [t for t in catalog.tables if not t.public]
    if not private:
        raise ConfigurationError(
            "the catalog has no private table to calibrate.",
            fix="calibrate a catalog with at least one table that is not public.",
        )
    table = private[0]
    name = table.name
    bounded = [c for c in table.columns if c.bounds is not None and c.is_numeric]
    sums = ", ".join(f'SUM("{c.name}"), AVG("{c.name}")' for c in bounded[:2])
    aggregates = f"COUNT(*), {sums}" if sums else "COUNT(*)"
    out = [ClassQuery("scan", f'SELECT {aggregates} FROM "{name}"')]
    keyed = [c for c in table.columns if c.keys is not None]
    unkeyed = [
        c
        for c in table.columns
        if c.keys is None
        and c.type in ("str", "int")
        and c.bounds is None
        and not _is_unit(table, c)
    ]
    if keyed:
        key = keyed[0].name
        out.append(
            ClassQuery("group_by", f'SELECT "{key}", {aggregates} FROM "{name}" GROUP BY "{key}"')
        )
    elif unkeyed:
        key = unkeyed[0].name
        sql = f'SELECT "{key}", COUNT(*) FROM "{name}" GROUP BY "{key}"'
        out.append(ClassQuery("group_by", sql, delta=1e-6))
    if bounded:
        value = bounded[0].name
        out.append(ClassQuery("quantile", f'SELECT MEDIAN("{value}") FROM "{name}"'))
    join = _join_query(catalog, table)
    if join is not None:
        out.append(ClassQuery("join", join))
    return out + product_queries(table, [c.name for c in keyed], bounded)


def product_queries(
    table: Table, keyed: Sequence[str], bounded: Sequence[Column]
) -> list[ClassQuery]:
    """One demanding request per release product the table allows (each its own plan class):
    a hierarchy over its first two keyed columns, flows between them, a density of its first
    bounded column, synthetic rows of its keyed and bounded columns (MST, and AIM), private bounds
    of its first numeric column, cap suggestions when its unit is a column, and, when its unit holds
    one row, record perturbation of every bounded and keyed column.
    """
    name = table.name
    out: list[ClassQuery] = []
    if keyed:
        levels = list(keyed[:2])
        out.append(
            ClassQuery(
                "hierarchy",
                f"HIERARCHY({' > '.join(levels)}) FROM {name}",
                release=lambda s: s.hierarchy(name, levels, epsilon=1),
            )
        )
    if len(keyed) >= 2:
        origin, destination = keyed[0], keyed[1]
        out.append(
            ClassQuery(
                "onthemap",
                f"ONTHEMAP({origin} -> {destination}) FROM {name}",
                release=lambda s: s.onthemap(
                    name, origin=origin, destination=destination, epsilon=8, per_destination=10
                ),
            )
        )
    if bounded:
        column = bounded[0]
        low, high = column.bounds if column.bounds is not None else (0, 1)
        bandwidth = max(float(high - low) / 20, 1e-6)
        out.append(
            ClassQuery(
                "density",
                f"DENSITY({column.name}) FROM {name}",
                release=lambda s: s.density(
                    name, column.name, bandwidth=bandwidth, epsilon=1, delta=1e-6
                ),
            )
        )
    columns = [*keyed[:3], *(c.name for c in bounded[:2])]
    if columns:
        out.append(
            ClassQuery(
                "synthetic",
                f"SYNTHETIC({', '.join(columns)}) FROM {name}",
                release=lambda s: s.synthesize(name, columns, epsilon=1, delta=1e-6),
            )
        )
        out.append(
            ClassQuery(
                "aim",
                f"SYNTHETIC({', '.join(columns)}) FROM {name} WITH AIM(2)",
                release=lambda s: s.synthesize(name, columns, epsilon=1, delta=1e-6, method="aim"),
            )
        )
    return out + _table_products(table, keyed, bounded)


def _table_products(
    table: Table, keyed: Sequence[str], bounded: Sequence[Column]
) -> list[ClassQuery]:
    """The products about the table itself (see :func:`product_queries`): private bounds, cap
    suggestions and record perturbation.
    """
    name = table.name
    out: list[ClassQuery] = []
    numeric = [c.name for c in table.columns if c.is_numeric and not _is_unit(table, c)]
    if numeric:
        out.append(
            ClassQuery(
                "bounds",
                f"BOUNDS({numeric[0]}) FROM {name}",
                release=lambda s: s.choose_bounds(name, numeric[0], epsilon=1),
            )
        )
    if isinstance(table.privacy_unit, IdUnit):
        groups = list(keyed[:1])
        out.append(
            ClassQuery(
                "contributions",
                f"CONTRIBUTIONS(rows{''.join(', ' + g for g in groups)}) FROM {name}",
                release=lambda s: s.suggest_caps(name, epsilon=1, groups=groups),
            )
        )
    perturbed = _perturbable(table, keyed, bounded)
    if perturbed:
        out.append(
            ClassQuery(
                "perturbation",
                f"PERTURB({', '.join(perturbed)}) FROM {name}",
                release=lambda s: s.perturb(name, perturbed, epsilon=1),
            )
        )
    return out


def _perturbable(table: Table, keyed: Sequence[str], bounded: Sequence[Column]) -> list[str]:
    """Every column record perturbation can release, on a table whose unit holds one row (its
    work grows with the columns, so the calibrated request takes them all); none otherwise.
    """
    if not units_of_one_row(table):
        return []
    named = set(keyed)
    wide = [c.name for c in table.columns if c.name in named and len(c.keys or ()) >= 2]
    return list(dict.fromkeys([*(c.name for c in bounded), *wide]))


def _is_unit(table: Table, column: Column) -> bool:
    unit = table.privacy_unit
    return isinstance(unit, IdUnit) and unit.column.lower() == column.name.lower()


def _join_query(catalog: Catalog, table: Table) -> str | None:
    for other in catalog.tables:
        if other is table:
            continue
        if other.public:
            for column in table.columns:
                match = other.column(column.name)
                if match is not None and match.type == column.type:
                    return (
                        f'SELECT COUNT(*) FROM "{table.name}" AS a JOIN "{other.name}" AS b '
                        f'ON a."{column.name}" = b."{match.name}"'
                    )
        unit, theirs = table.privacy_unit, other.privacy_unit
        if isinstance(unit, IdUnit) and isinstance(theirs, IdUnit):
            return (
                f'SELECT COUNT(*) FROM "{table.name}" AS a JOIN "{other.name}" AS b '
                f'ON a."{unit.column}" = b."{theirs.column}"'
            )
    return None


# -- adversarial tables ---------------------------------------------------------------------------


def _value(column: Column, table: Table, variant: str) -> str:
    """DuckDB SQL for column ``column`` of row ``i`` (``range``) of an adversarial table."""
    n = int(table.max_row_count or 1)
    name = column.name
    if _is_unit(table, column):
        if variant == "one person" and not table.public:
            return f"CASE WHEN i < {int(n * HEAVY_SHARE)} THEN 0 ELSE i END"
        return "i"
    if column.keys is not None:
        keys = sorted(column.keys, key=lambda k: -len(str(k)))
        if variant == "one person":
            # The longest key, except every 7th row cycling through all keys.
            longest = _literal(keys[0])
            cycle = _cycle(keys)
            return f"CASE WHEN i % 7 = 0 THEN {cycle} ELSE {longest} END"
        return _cycle(keys)
    if column.type == "str":
        return f"lpad(CAST(i AS VARCHAR), {LONG_STRING}, 'x')"
    if column.type == "bool":
        return "i % 2 = 0"
    if column.type == "date":
        return "DATE '1970-01-01' + CAST(i % 100000 AS INTEGER)"
    # Numbers: every 97th row a far outlier of alternating sign, so min/max statistics span the
    # type's range; the rest spread over the bounds.
    if column.type == "int":
        outlier = "(CASE WHEN i % 2 = 0 THEN 4611686018427387904 ELSE -4611686018427387904 END)"
        low, high = column.bounds if column.bounds is not None else (0, n)
        width = max(1, int(high) - int(low) + 1)
        spread = f"({int(low)} + i % {width})"
    else:
        outlier = "(CASE WHEN i % 2 = 0 THEN 1e300 ELSE -1e300 END)"
        low, high = column.bounds if column.bounds is not None else (0, 1)
        spread = f"({float(low)!r} + (i % 1000) / 1000.0 * {float(high - low)!r})"
    del name
    return f"CASE WHEN i % 97 = 0 THEN {outlier} ELSE {spread} END"


def _literal(key: object) -> str:
    if isinstance(key, bool):
        return "TRUE" if key else "FALSE"
    if isinstance(key, int | float):
        return repr(key)
    return "'" + str(key).replace("'", "''") + "'"


def _cycle(keys: Sequence[object]) -> str:
    items = ", ".join(_literal(k) for k in keys)
    return f"[{items}][1 + i % {len(keys)}]"


def write_adversarial(catalog: Catalog, variant: str, folder: Path) -> Catalog:
    """Write every table of ``catalog`` as an adversarial Parquet file; the catalog reading them."""
    con = duckdb.connect(":memory:")
    tables = []
    try:
        for table in catalog.tables:
            path = folder / f"{table.name}.{variant.replace(' ', '_')}.parquet"
            select = ", ".join(f'{_value(c, table, variant)} AS "{c.name}"' for c in table.columns)
            rows = int(table.max_row_count or 1)
            target = str(path).replace("'", "''")
            con.execute(
                f"COPY (SELECT {select} FROM range({rows}) AS r(i)) TO '{target}' (FORMAT PARQUET)"
            )
            tables.append(replace(table, source=Source(kind="parquet", location=str(path))))
    finally:
        con.close()
    return replace(catalog, tables=tuple(tables), constant_time=True, deadlines_path=None)


# -- measuring ------------------------------------------------------------------------------------


class _TimedSession(Session):
    """A session that times each release from its ready plan and never answers from the cache."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.started = 0.0
        self._fresh = itertools.count()

    def _deadline(self, kind: str, arrival: float) -> Deadline | None:
        self.started = arrival
        return None

    def _request_key(self, plan: ReleasePlan[Any]) -> str:
        return f"{super()._request_key(plan)}:{next(self._fresh)}"


def measure(
    catalog: Catalog,
    runs: int,
    *,
    progress: Progress | None = None,
    folder: Path | None = None,
    ledger: str = "sqlite",
) -> list[Measured]:
    """Time every plan class of ``catalog`` ``runs`` times on each adversarial variant.

    ``ledger`` is ``sqlite`` (a SQLite file in a temporary folder, as a gateway keeps its record)
    or ``memory`` (for benchmarks that run with an in-memory ledger).
    """
    queries = class_queries(catalog)
    out: list[Measured] = []
    with tempfile.TemporaryDirectory(prefix="dalenius-calibrate-", dir=folder) as tmp:
        base = Path(tmp)
        for variant in VARIANTS:
            synthetic = write_adversarial(catalog, variant, base)
            url = None if ledger == "memory" else str(base / f"ledger-{variant[0]}.sqlite")
            book = open_ledger(url)
            executor = DuckDBExecutor(synthetic)
            session = _TimedSession(synthetic, ledger=book, executor=executor)
            book.set_budget(
                session.analyst, synthetic.name, ApproxDP(Fraction(10**12), Fraction(1, 2))
            )
            try:
                for query in queries:
                    out.append(_series(session, query, variant, runs, progress))
            finally:
                session.close()
    return out


def _series(
    session: _TimedSession, query: ClassQuery, variant: str, runs: int, progress: Progress | None
) -> Measured:
    millis = []
    label = f"{query.plan_class} on {variant}"
    for i in range(WARMUP + runs):
        query.run(session)
        if i >= WARMUP:
            millis.append((time.monotonic() - session.started) * 1000.0)
        if progress is not None:
            progress(label, i + 1, WARMUP + runs)
    return Measured(query.plan_class, variant, tuple(millis))


def deadlines_from(
    catalog: Catalog,
    measured: list[Measured],
    *,
    engine: str,
    runs: int,
    quantile: float,
    margin: float,
) -> Deadlines:
    """Per plan class: the ``quantile`` of the slowest variant's times, times ``margin``."""
    worst: dict[str, float] = {}
    for series in measured:
        value = float(np.quantile(np.array(series.millis), quantile, method="higher"))
        worst[series.plan_class] = max(worst.get(series.plan_class, 0.0), value)
    return Deadlines(
        deadlines_ms={k: math.ceil(v * margin * 1000) / 1000 for k, v in worst.items()},
        measured_ms=worst,
        fingerprint=public_fingerprint(catalog, engine),
        engine=engine,
        runs=runs,
        quantile=quantile,
        margin=margin,
    )


def calibrate(
    catalog: Catalog,
    *,
    runs: int = 200,
    quantile: float = 0.999,
    margin: float = 2.0,
    progress: Progress | None = None,
    folder: Path | None = None,
    ledger: str = "sqlite",
) -> tuple[Deadlines, list[Measured]]:
    """Measure ``catalog``'s plan classes on adversarial tables and compute its deadlines.

    Raises:
        ConfigurationError: a table has no ``max_row_count``, the engine is not DuckDB, or a
            parameter is out of range.
    """
    _check(catalog, runs, quantile, margin)
    measured = measure(catalog, runs, progress=progress, folder=folder, ledger=ledger)
    engine = f"duckdb {duckdb.__version__}"
    deadlines = deadlines_from(
        catalog, measured, engine=engine, runs=runs, quantile=quantile, margin=margin
    )
    return deadlines, measured


def _check(catalog: Catalog, runs: int, quantile: float, margin: float) -> None:
    if catalog.engine != "duckdb":
        raise ConfigurationError(
            f"calibration runs on the duckdb engine only; this catalog uses {catalog.engine}.",
            fix='set engine = "duckdb" in [dataset].',
        )
    for table in catalog.tables:
        if table.max_row_count is None:
            raise ConfigurationError(
                f"table {table.name!r} declares no max_row_count.",
                why="deadlines are measured on adversarial tables of the declared size.",
                fix=f"add max_row_count = N to [tables.{table.name}].",
            )
    if runs < 1:
        raise ConfigurationError(f"runs must be at least 1, got {runs}.", fix="use --runs 200.")
    if not 0 < quantile <= 1:
        raise ConfigurationError(
            f"quantile must be in (0, 1], got {quantile}.", fix="use --quantile 0.999."
        )
    if not margin >= 1:
        raise ConfigurationError(f"margin must be at least 1, got {margin}.", fix="use --margin 2.")


def iter_lines(measured: list[Measured], deadlines: Deadlines) -> Iterator[str]:
    """A readable report: each class and variant's median and quantile, then the deadlines."""
    for series in measured:
        values = np.array(series.millis)
        yield (
            f"{series.plan_class:9} {series.variant:13} median {np.median(values):8.2f} ms   "
            f"q{deadlines.quantile:g} {np.quantile(values, deadlines.quantile, method='higher'):8.2f} ms"
            f"   max {values.max():8.2f} ms"
        )
    for name, value in deadlines.deadlines_ms.items():
        yield (
            f"deadline {name:9} {value:8.2f} ms  (= {deadlines.measured_ms[name]:.2f} ms × "
            f"{deadlines.margin:g}); {miss_line(measured, name, value)}"
        )


def miss_line(measured: list[Measured], plan_class: str, deadline_ms: float) -> str:
    """How many calibration runs of a class would have missed its deadline, with a 95% bound.

    With no miss in n runs, the one-sided 95% upper bound on the miss probability δ_t is
    1 − 0.05^(1/n) (about 3/n): an empirical bound for these adversarial tables on this machine,
    not a proof for every dataset.
    """
    times = [t for s in measured if s.plan_class == plan_class for t in s.millis]
    missed = sum(1 for t in times if t > deadline_ms)
    if missed:
        return f"{missed} of {len(times)} calibration runs would have missed it"
    bound = 1 - 0.05 ** (1 / len(times))
    return f"0 of {len(times)} runs would have missed it (delta_t <= {bound:.2g} at 95%)"
