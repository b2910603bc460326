"""Release deadlines of constant-time mode: per plan class, computed from public facts only.

In constant-time mode every outcome of a query after the data gate leaves at ``arrival + T``. ``T``
must not depend on the data, so it is fixed before the query runs from what the catalog declares:
each table's maximum row count, the privacy unit's caps, the engine, and the *plan class* of the
query (:data:`PLAN_CLASSES`). ``dalenius calibrate`` measures the worst case on adversarial tables
of the declared size and writes one deadline per class to a sidecar TOML file that the catalog
names (``[dataset] deadlines``)::

    [calibration]
    fingerprint = "3f1c..."      # of the public facts the deadlines were measured for
    engine = "duckdb 1.1.3"
    runs = 400
    quantile = 0.999
    margin = 2.0

    [deadlines_ms]
    scan = 41.2
    group_by = 55.0

    [measured_ms]                 # the worst-case quantile before the margin
    scan = 20.6
    group_by = 27.5

A sidecar measured for other public facts (a changed row cap, unit or column) is *stale*: queries
are refused, before the gate, until the custodian calibrates again.
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dalenius.core.errors import CatalogError, ConfigurationError

if TYPE_CHECKING:
    from dalenius.core.catalog import Catalog

PLAN_CLASSES = (
    "scan",
    "group_by",
    "join",
    "quantile",
    "density",
    "hierarchy",
    "synthetic",
    "aim",
    "onthemap",
    "perturbation",
    "bounds",
    "contributions",
)
"""Plan classes: a query belongs to the most expensive class whose feature it uses (a quantile,
then a join, then a GROUP BY; otherwise it is a scan); each release product is a class of its own.
"""

SIDECAR_SECTIONS = ("calibration", "deadlines_ms", "measured_ms")


@dataclass(frozen=True)
class Deadlines:
    """Calibrated deadlines of one dataset.

    Attributes:
        deadlines_ms: the release deadline T of each calibrated plan class, in milliseconds.
        measured_ms: the worst-case latency quantile calibration measured, before the margin.
        fingerprint: :func:`public_fingerprint` of the catalog they were measured for.
        engine: the engine and its version at calibration.
        runs: releases measured per class and adversarial table.
        quantile: the latency quantile taken of the worst adversarial table.
        margin: the factor applied to it.
        path: the sidecar file.
    """

    deadlines_ms: dict[str, float]
    fingerprint: str
    measured_ms: dict[str, float] = field(default_factory=dict)
    engine: str = ""
    runs: int = 0
    quantile: float = 0.0
    margin: float = 0.0
    path: Path | None = None

    def seconds(self, plan_class: str) -> float | None:
        """The deadline of ``plan_class`` in seconds, or ``None`` if it was not calibrated."""
        value = self.deadlines_ms.get(plan_class)
        return None if value is None else value / 1000.0


def public_fingerprint(catalog: Catalog, engine: str) -> str:
    """A hash of every public fact a deadline depends on (never of the data).

    The dataset's tables with their declared row caps, privacy units and columns, and the engine
    with its version: changing any of them makes earlier deadlines stale.
    """
    facts = {
        "engine": engine,
        "tables": [
            {
                "name": t.name,
                "max_row_count": t.max_row_count,
                "public": t.public,
                "unit": repr(t.privacy_unit),
                "columns": [repr(c) for c in t.columns],
                "source": t.source.kind,
            }
            for t in catalog.tables
        ],
    }
    payload = json.dumps(facts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def load_deadlines(path: Path) -> Deadlines | None:
    """Read a sidecar file; ``None`` if it does not exist yet (not calibrated).

    Raises:
        CatalogError: the file exists but is malformed.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"the deadlines file cannot be read: {exc}.", file=str(path)) from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(
            f"the deadlines file is not valid TOML: {exc}.",
            file=str(path),
            fix="run `dalenius calibrate CATALOG` to write it again.",
        ) from None
    return _parse(doc, path)


def _parse(doc: dict[str, object], path: Path) -> Deadlines:
    def bad(what: str) -> CatalogError:
        return CatalogError(
            what, file=str(path), fix="run `dalenius calibrate CATALOG` to write it again."
        )

    unknown = set(doc) - set(SIDECAR_SECTIONS)
    if unknown:
        raise bad(f"unknown section(s) {sorted(unknown)} in the deadlines file.")
    calibration = doc.get("calibration")
    if not isinstance(calibration, dict) or not isinstance(calibration.get("fingerprint"), str):
        raise bad("the deadlines file has no [calibration] fingerprint.")
    tables: dict[str, dict[str, float]] = {}
    for section in ("deadlines_ms", "measured_ms"):
        raw = doc.get(section, {})
        if not isinstance(raw, dict):
            raise bad(f"[{section}] must be a table of numbers.")
        values: dict[str, float] = {}
        for name, value in raw.items():
            if name not in PLAN_CLASSES:
                raise bad(f"[{section}] names an unknown plan class {name!r}.")
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not ok or not math.isfinite(float(value)) or float(value) <= 0:
                raise bad(f"[{section}] {name} must be a positive number of milliseconds.")
            values[name] = float(value)
        tables[section] = values
    return Deadlines(
        deadlines_ms=tables["deadlines_ms"],
        measured_ms=tables["measured_ms"],
        fingerprint=str(calibration["fingerprint"]),
        engine=str(calibration.get("engine", "")),
        runs=int(calibration.get("runs", 0)),
        quantile=float(calibration.get("quantile", 0.0)),
        margin=float(calibration.get("margin", 0.0)),
        path=path,
    )


def write_deadlines(deadlines: Deadlines, path: Path) -> None:
    """Write a sidecar file (plain TOML; replaced atomically)."""
    lines = [
        "# Release deadlines of constant-time mode, written by `dalenius calibrate`.",
        "# Public: computed from adversarial synthetic tables of the declared size, never from the data.",
        "",
        "[calibration]",
        f"fingerprint = {json.dumps(deadlines.fingerprint)}",
        f"engine = {json.dumps(deadlines.engine)}",
        f"runs = {int(deadlines.runs)}",
        f"quantile = {float(deadlines.quantile)!r}",
        f"margin = {float(deadlines.margin)!r}",
    ]
    for section, values in (
        ("deadlines_ms", deadlines.deadlines_ms),
        ("measured_ms", deadlines.measured_ms),
    ):
        lines += ["", f"[{section}]"]
        lines += [f"{name} = {round(values[name], 3)!r}" for name in PLAN_CLASSES if name in values]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)


def current_deadlines(catalog: Catalog, engine: str) -> Deadlines:
    """The catalog's deadlines, checked to be calibrated for its current public facts.

    Raises:
        ConfigurationError: constant-time mode is on but the dataset was not calibrated, or was
            calibrated for other public facts (decided from the catalog alone, before any data).
    """
    path = catalog.deadlines_path
    found = load_deadlines(path) if path is not None else None
    fix = f"the custodian runs `dalenius calibrate {catalog.path or 'CATALOG'}`."
    if found is None:
        raise ConfigurationError(
            f"the dataset {catalog.name!r} releases in constant time but has no calibrated "
            "deadlines.",
            why="every answer must leave at a deadline fixed in advance from public facts.",
            fix=fix,
        )
    if found.fingerprint != public_fingerprint(catalog, engine):
        raise ConfigurationError(
            f"the deadlines of dataset {catalog.name!r} were calibrated for other public facts "
            "(row caps, privacy units, columns or engine version).",
            why="a deadline measured for smaller tables or another engine could be missed.",
            fix=fix,
        )
    return found
