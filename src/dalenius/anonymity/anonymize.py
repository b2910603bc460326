"""``anonymize``: from a table to a released table that satisfies the requested privacy models.

Every argument is checked before any data is read; the data are then loaded into DuckDB, reduced
to their frequency set, searched (optimal lattice search or Mondrian), and the release is built by
one SQL query. The release is checked again, class by class, against every model before it is
returned — a release that does not satisfy the models is never returned or written. Columns
marked as identifiers are never part of a release; suppressed records are removed.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dalenius.anonymity.check import CheckReport, _report
from dalenius.anonymity.encode import (
    Encoded,
    encode,
    mapping_table_name,
    sensitive_table_name,
    sensitive_totals,
)
from dalenius.anonymity.hierarchy import Hierarchy
from dalenius.anonymity.lattice import Evaluator, NodeResult, Progress, search
from dalenius.anonymity.metrics import METRICS, average_class_size, cost_tables, node_loss
from dalenius.anonymity.models import ClassStats, KAnonymity, Model, Sensitive
from dalenius.anonymity.mondrian import mondrian_release
from dalenius.anonymity.report import Report
from dalenius.anonymity.source import SOURCE_TABLE, Loaded, check_distinct, load, quote
from dalenius.core.errors import ConfigurationError, InternalError, UserError

ALGORITHMS = ("lattice", "mondrian")
MONDRIAN_MODES = ("strict", "relaxed")
OUTPUT_FORMATS = (".parquet", ".csv")


class UnsatisfiableError(UserError):
    """The privacy models cannot be met within the suppression limit; nothing was released.

    Attributes:
        needed: the fewest records any evaluated solution had to suppress.
        allowed: the most records the limit allows to be suppressed.
        closest: the levels of that solution (lattice), if any.
    """

    code = "unsatisfiable"

    def __init__(
        self, *, needed: int, allowed: int, rows: int, closest: dict[str, int] | None, models: str
    ) -> None:
        self.needed = needed
        self.allowed = allowed
        self.closest = closest
        where = (
            f" (at levels {', '.join(f'{k}={v}' for k, v in closest.items())})" if closest else ""
        )
        super().__init__(
            f"{models} cannot be satisfied within the suppression limit: the best solution "
            f"reached{where} suppresses {needed:,} of {rows:,} records ({needed / rows:.2%}); "
            f"the limit allows {allowed:,}. Nothing was released.",
            why="a release must satisfy every requested model; one that does not is never written.",
            fix=f"raise suppression_limit to at least {math.ceil(needed / rows * 10000) / 10000:g}, "
            "relax the models, or give the hierarchies coarser levels.",
        )


@dataclass
class Release:
    """A released table and its report.

    Attributes:
        table: the released records (identifiers dropped, quasi-identifiers generalised,
            suppressed records removed), as a pyarrow Table.
        report: what was done and what risk remains.
    """

    table: pa.Table
    report: Report

    def to_pandas(self) -> Any:
        """The released table as a pandas DataFrame."""
        return self.table.to_pandas()

    def write(self, path: str | Path) -> Path:
        """Write the release as Parquet or CSV (by the suffix); returns the path."""
        return write_table(self.table, path)

    def _repr_html_(self) -> str:
        head = self.table.slice(0, 10).to_pandas().to_html(index=False)
        return str(
            self.report._repr_html_() + f"<p>first rows of {self.table.num_rows:,}</p>" + head
        )


def check_output_path(path: str | Path) -> Path:
    """Refuse an output path whose suffix is not .parquet or .csv (before any data is read)."""
    out = Path(path)
    if out.suffix.lower() not in OUTPUT_FORMATS:
        raise ConfigurationError(
            f"cannot write {str(out)!r}: the release is written as .parquet or .csv.",
            fix="name the output release.parquet or release.csv.",
        )
    if out.parent and not out.parent.exists():
        raise ConfigurationError(
            f"the folder {str(out.parent)!r} does not exist.", fix="create it first."
        )
    return out


def write_table(table: pa.Table, path: str | Path) -> Path:
    """Write ``table`` to ``path`` atomically (a partial file is never left under that name)."""
    out = check_output_path(path)
    partial = out.with_name(out.name + ".partial")
    try:
        if out.suffix.lower() == ".parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, partial)
        else:
            import pyarrow.csv as pacsv

            pacsv.write_csv(table, partial)
        os.replace(partial, out)
    finally:
        if partial.exists():
            partial.unlink()
    return out


def anonymize(
    data: Any,
    *,
    quasi_identifiers: Sequence[str],
    models: Sequence[Model] | None = None,
    k: int | None = None,
    sensitive: Sequence[str] = (),
    identifiers: Sequence[str] = (),
    hierarchies: Mapping[str, Hierarchy] | None = None,
    suppression_limit: float = 0.0,
    metric: str = "ncp",
    algorithm: str = "lattice",
    mondrian: str = "strict",
    ordered: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> Release:
    """Release ``data`` so that every equivalence class satisfies ``models``.

    Args:
        data: a catalog table, duckdb relation, pandas/Polars DataFrame, pyarrow Table or path.
        quasi_identifiers: columns an attacker may know; they are generalised.
        models: privacy models (``KAnonymity(5)``, ``DistinctLDiversity(2)``, …).
        k: shorthand for ``models=[KAnonymity(k)]``.
        sensitive: columns the ℓ/t/β/δ/α models protect; released as they are.
        identifiers: direct identifiers; never released.
        hierarchies: one per quasi-identifier for the lattice search; a quasi-identifier without
            one is either released as is or withheld (``Hierarchy.identity()``).
        suppression_limit: the largest share of records that may be suppressed, in [0, 1].
        metric: the information loss the lattice search minimises (see ``METRICS``).
        algorithm: ``lattice`` (optimal full-domain generalisation) or ``mondrian``.
        mondrian: ``strict`` or ``relaxed`` partitioning (Mondrian only).
        ordered: sensitive columns with ordered values (default: the numeric ones).
        progress: called with (nodes settled, total) during the lattice search.

    Raises:
        ConfigurationError: for bad arguments, unknown columns, a column in two roles, or k larger
            than the table — before anything is released.
        HierarchyError: a hierarchy that misses a value of its column.
        UnsatisfiableError: when no solution meets the models within the suppression limit.

    Example:
        >>> import pandas as pd
        >>> df = pd.DataFrame({"age": [21, 23, 29, 35, 37, 38], "zip": ["13053"] * 6})
        >>> r = anonymize(df, quasi_identifiers=["age"], k=3,
        ...               hierarchies={"age": Hierarchy.intervals([10])})
        >>> r.table.column("age").to_pylist()
        ['[20, 30)', '[20, 30)', '[20, 30)', '[30, 40)', '[30, 40)', '[30, 40)']
    """
    started = time.perf_counter()
    chosen = _check_arguments(
        models,
        k,
        quasi_identifiers,
        sensitive,
        identifiers,
        hierarchies,
        suppression_limit,
        metric,
        algorithm,
        mondrian,
    )
    loaded = load(data)
    qis = [loaded.column(c, "quasi-identifier") for c in quasi_identifiers]
    sens = [loaded.column(c, "sensitive") for c in sensitive]
    ids = [loaded.column(c, "identifier") for c in identifiers]
    if ordered is not None:
        ordered_set = {loaded.column(c, "ordered sensitive") for c in ordered}
    else:
        ordered_set = {c for c in sens if loaded.is_numeric(c)}
    hier = _hierarchies(loaded, qis, hierarchies or {})
    need = max(m.min_class_size() for m in chosen)
    if need > loaded.rows:
        raise ConfigurationError(
            f"the models need classes of at least {need} records, but the table has only "
            f"{loaded.rows}.",
            fix=f"choose k (or ℓ) at most {loaded.rows}, or anonymise a larger table.",
        )
    needs_sensitive = any(m.needs_sensitive for m in chosen)
    enc = encode(loaded, qis, hier, sens, ordered_set, with_sensitive=needs_sensitive)
    if algorithm == "lattice":
        table, report_parts = _lattice_release(
            loaded, enc, chosen, metric, suppression_limit, ids, progress
        )
    else:
        table, report_parts = mondrian_release(loaded, enc, chosen, mondrian, ids)
    released = _verify(
        loaded, chosen, table, qis, sens, sensitive_totals(loaded, sens, ordered_set)
    )
    report = Report(
        algorithm=report_parts["algorithm"],
        models=tuple(m.describe() for m in chosen),
        rows_in=loaded.rows,
        rows_out=table.num_rows,
        suppressed=loaded.rows - table.num_rows,
        suppression_limit=float(suppression_limit),
        levels=report_parts.get("levels", {}),
        loss=report_parts["loss"],
        metric=metric if algorithm == "lattice" else "ncp",
        released=released,
        dropped=tuple(ids),
        nodes_evaluated=report_parts.get("evaluated", 0),
        nodes_total=report_parts.get("total", 0),
        seconds=time.perf_counter() - started,
        notes=tuple(report_parts.get("notes", ())),
    )
    return Release(table, report)


def _check_arguments(
    models: Sequence[Model] | None,
    k: int | None,
    qis: Sequence[str],
    sensitive: Sequence[str],
    identifiers: Sequence[str],
    hierarchies: Mapping[str, Hierarchy] | None,
    suppression_limit: float,
    metric: str,
    algorithm: str,
    mondrian: str,
) -> list[Model]:
    """Refuse arguments that cannot describe an anonymisation, before any data is read.

    Long because it checks every argument in turn, each refusal naming the parameter, the reason and
    the fix.
    """
    chosen = list(models or [])
    if k is not None:
        chosen.insert(0, KAnonymity(k))
    if not chosen:
        raise ConfigurationError(
            "no privacy model is requested.", fix="pass k=5 or models=[KAnonymity(5), ...]."
        )
    if (
        isinstance(suppression_limit, bool)
        or not isinstance(suppression_limit, int | float)
        or not 0 <= suppression_limit <= 1
    ):
        raise ConfigurationError(
            f"suppression_limit must be a share in [0, 1]; got {suppression_limit!r}.",
            fix="write suppression_limit = 0.01 to allow suppressing up to 1% of the records.",
        )
    if metric not in METRICS:
        raise ConfigurationError(
            f"unknown information-loss metric {metric!r}.", fix=f"use one of {', '.join(METRICS)}."
        )
    if algorithm not in ALGORITHMS:
        raise ConfigurationError(
            f"unknown algorithm {algorithm!r}.", fix=f"use one of {', '.join(ALGORITHMS)}."
        )
    if mondrian not in MONDRIAN_MODES:
        raise ConfigurationError(
            f"unknown Mondrian mode {mondrian!r}.", fix=f"use one of {', '.join(MONDRIAN_MODES)}."
        )
    if not qis:
        raise ConfigurationError(
            "no quasi-identifiers were given.", fix="name the columns an attacker may know."
        )
    for name, group in (
        ("quasi-identifier", qis),
        ("sensitive", sensitive),
        ("identifier", identifiers),
    ):
        check_distinct(list(group), name)
    roles = [
        ("quasi-identifier", set(qis)),
        ("sensitive", set(sensitive)),
        ("identifier", set(identifiers)),
    ]
    for i, (a, sa) in enumerate(roles):
        for b, sb in roles[i + 1 :]:
            both = sorted(sa & sb)
            if both:
                raise ConfigurationError(
                    f"the column(s) {both} are both {a} and {b}.",
                    fix="declare each column in exactly one role.",
                )
    needs = [m.describe() for m in chosen if m.needs_sensitive]
    if needs and not sensitive:
        raise ConfigurationError(
            f"{needs[0]} protects a sensitive attribute, but none was named.",
            fix="name the sensitive column(s), e.g. sensitive=['disease'].",
        )
    for col in hierarchies or {}:
        if col not in qis:
            raise ConfigurationError(
                f"a hierarchy is given for {col!r}, which is not a quasi-identifier.",
                fix="remove the hierarchy or add the column to the quasi-identifiers.",
            )
    if algorithm == "mondrian" and suppression_limit:
        raise ConfigurationError(
            "Mondrian does not suppress records; suppression_limit must be 0 with it.",
            fix="set suppression_limit = 0, or use algorithm = 'lattice'.",
        )
    return chosen


def _hierarchies(
    loaded: Loaded, qis: Sequence[str], given: Mapping[str, Hierarchy]
) -> dict[str, Hierarchy]:
    by_lower = {k.lower(): v for k, v in given.items()}
    return {c: given.get(c) or by_lower.get(c.lower()) or Hierarchy.identity() for c in qis}


def _lattice_release(
    loaded: Loaded,
    enc: Encoded,
    models: Sequence[Model],
    metric: str,
    limit_share: float,
    identifiers: Sequence[str],
    progress: Progress | None,
) -> tuple[pa.Table, dict[str, Any]]:
    result = search(enc, models, metric=metric, suppression_limit=limit_share, progress=progress)
    limit = math.floor(limit_share * enc.n + 1e-9)
    if result.best is None:
        closest = result.closest
        raise UnsatisfiableError(
            needed=closest.suppressed,
            allowed=limit,
            rows=enc.n,
            closest=dict(zip(enc.qis, closest.node, strict=True)),
            models="; ".join(m.describe() for m in models),
        )
    best = result.best
    ev = Evaluator(enc, models, metric, limit)
    stats = ev.stats(best.node)
    ok = ev.passing(stats, models)
    _register_suppressed(loaded, enc, best, stats, ok)
    table = _release_sql(loaded, enc, best.node, identifiers)
    losses = all_losses(enc, best.node, stats, ok, models)
    return table, {
        "algorithm": "lattice (optimal full-domain generalisation)",
        "levels": dict(zip(enc.qis, best.node, strict=True)),
        "loss": losses,
        "evaluated": result.evaluated,
        "total": result.total,
    }


def all_losses(
    enc: Encoded, node: tuple[int, ...], stats: ClassStats, ok: np.ndarray, models: Sequence[Model]
) -> dict[str, float]:
    """Every information-loss metric of releasing ``node`` with the failing classes suppressed."""
    size = stats.size
    out = {}
    for metric in METRICS:
        tables = cost_tables(enc, metric) if metric != "discernibility" else None
        out[metric] = node_loss(enc, metric, node, tables, ok[stats.cls], size, ok)
    k = max((m.min_class_size() for m in models), default=1)
    out["average_class_size"] = average_class_size(int(size[ok].sum()), int(ok.sum()), k)
    return out


def _register_suppressed(
    loaded: Loaded, enc: Encoded, best: NodeResult, stats: ClassStats, ok: np.ndarray
) -> None:
    failing_rows = ~ok[stats.cls]
    columns: dict[str, Any] = {}
    for a, level in enumerate(best.node):
        labels = np.asarray(enc.levels[a].labels[level], dtype=object)
        columns[f"g{a}"] = pa.array(labels[enc.base[a][failing_rows]].tolist(), type=pa.string())
    table = pa.table(columns) if columns else pa.table({})
    loaded.con.register("__suppressed", table)


def _release_sql(
    loaded: Loaded, enc: Encoded, node: tuple[int, ...], identifiers: Sequence[str]
) -> pa.Table:
    index = {c: i for i, c in enumerate(enc.qis)}
    select = []
    for col in loaded.columns:
        if col in identifiers:
            continue
        if col in index and node[index[col]] > 0:
            select.append(f"m{index[col]}.l{node[index[col]]} AS {quote(col)}")
        else:
            select.append(f"src.{quote(col)}")
    joins = "".join(
        f" JOIN {mapping_table_name(i)} m{i} ON src.{quote(c)} IS NOT DISTINCT FROM m{i}.v"
        for i, c in enumerate(enc.qis)
    )
    label = [f"m{i}.l{node[i]}" if node[i] > 0 else f"m{i}.l0" for i in range(len(enc.qis))]
    cond = " AND ".join(f"s.g{i} = {label[i]}" for i in range(len(enc.qis)))
    sql = (
        f"SELECT {', '.join(select)} FROM {SOURCE_TABLE} src{joins} "
        f"WHERE NOT EXISTS (SELECT 1 FROM __suppressed s WHERE {cond}) ORDER BY src.rowid"
    )
    return loaded.con.sql(sql).to_arrow_table()


def _verify(
    loaded: Loaded,
    models: Sequence[Model],
    table: pa.Table,
    qis: Sequence[str],
    sens: Sequence[str],
    sensitive: Sequence[Sensitive],
) -> CheckReport | None:
    """Re-check the release class by class; a failure here is a bug, never a release."""
    if table.num_rows == 0:
        return None
    loaded.con.register("__release", table)
    q_cols = ", ".join(f"r.{quote(c)}" for c in qis)
    s_joins = "".join(
        f" JOIN {sensitive_table_name(j)} s{j} ON r.{quote(c)} IS NOT DISTINCT FROM s{j}.v"
        for j, c in enumerate(sens)
    )
    s_cols = "".join(f", s{j}.c AS s{j}" for j in range(len(sens)))
    sql = (
        f"WITH g AS (SELECT {q_cols}{s_cols}, count(*) AS n FROM __release r{s_joins} GROUP BY ALL) "
        f"SELECT dense_rank() OVER (ORDER BY {', '.join(quote(c) for c in qis)}) - 1 AS cls"
        f"{''.join(f', s{j}' for j in range(len(sens)))}, n FROM g"
    )
    arrays = loaded.con.execute(sql).fetchnumpy()
    stats = ClassStats(
        np.asarray(arrays["cls"], dtype=np.int64),
        np.asarray(arrays["n"], dtype=np.int64),
        [np.asarray(arrays[f"s{j}"], dtype=np.int64) for j in range(len(sens))],
        list(sensitive),
    )
    for model in models:
        if not bool(np.all(model.passes(stats))):
            raise InternalError(
                f"the release failed {model.describe()} on re-checking; nothing was released. "
                "This is a bug in Dalenius: please report it."
            )
    loaded.con.unregister("__release")
    return _report(table.num_rows, qis, stats)
