"""The datasets this gateway process has opened: each registered catalog with its engine.

Registrations are shared by every gateway process through the state store; opening a catalog (and
its DuckDB engine, which loads CSV tables into memory) is done once per process, on first use, and
again only if the registration or the catalog file changes. Every request still checks the store,
so a dataset removed by a curator in one process disappears from all of them at once.
"""

from __future__ import annotations

import glob
import os
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.errors import CatalogError, ConfigurationError
from dalenius.executors.base import Executor
from dalenius.executors.factory import executor_for
from dalenius.server.priority import at_low_priority
from dalenius.server.store import Registration

FILE_SOURCES = ("csv", "parquet", "duckdb")
"""Source kinds that name files on the server (confined to the data root)."""

NEVER_READ = (Path("/proc"), Path("/sys"), Path("/dev"))
"""System folders no catalog source may read, whatever the configuration."""


@dataclass(frozen=True)
class OpenDataset:
    """A registered dataset, opened: its catalog, its engine and its public descriptions."""

    registration: Registration
    catalog: Catalog
    executor: Executor
    descriptions: dict[str, Any]
    stamp: tuple[str, int, int]


def catalog_stamp(path: str) -> tuple[str, int, int]:
    """Path, size and modification time of a catalog file: it is reopened when they change."""
    try:
        stat = os.stat(path)
    except OSError:
        return (path, -1, -1)
    return (path, stat.st_size, stat.st_mtime_ns)


def read_descriptions(path: str) -> dict[str, Any]:
    """The ``description`` texts a catalog gives its tables and columns (all public).

    The catalog loader validates them but keeps only the dataset's; the console shows them all.
    """
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}
    tables: dict[str, Any] = {}
    for name, table in (doc.get("tables") or {}).items():
        if not isinstance(table, dict):
            continue
        columns = {
            column: spec.get("description", "")
            for column, spec in (table.get("columns") or {}).items()
            if isinstance(spec, dict) and isinstance(spec.get("description", ""), str)
        }
        description = table.get("description", "")
        tables[name] = {
            "description": description if isinstance(description, str) else "",
            "columns": columns,
        }
    return tables


def confine(catalog: Catalog, root: Path | None) -> None:
    """Refuse a catalog whose file sources lie outside ``root`` (after symbolic links are resolved).

    A pattern (``data/*.csv``) is checked file by file, and its folder too, so a file added later
    outside the root cannot match. System folders (``/proc``, ``/sys``, ``/dev``) are refused
    even without a root. The message names the table and the path, never the file's content.

    Raises:
        CatalogError: naming the table whose source is outside.
    """
    folder = root.resolve() if root is not None else None
    for table in catalog.tables:
        if table.source.kind not in FILE_SOURCES:
            continue
        location = table.source.location
        pattern = any(ch in location for ch in "*?[")
        paths = [Path(p) for p in glob.glob(location)] if pattern else [Path(location)]
        paths.append(Path(location).parent if pattern else Path(location))
        for path in paths:
            try:
                real = path.resolve()
            except (OSError, RuntimeError):
                real = None
            outside = real is None or any(real.is_relative_to(s) for s in NEVER_READ)
            if folder is not None and real is not None and not real.is_relative_to(folder):
                outside = True
            if outside:
                where = f"the gateway's data folder {str(folder)!r}" if folder else "the data"
                raise CatalogError(
                    f"the source {location!r} is outside {where}.",
                    table=table.name,
                    why="a gateway reads only files under its configured data_root "
                    "(symbolic links resolved), and never system folders.",
                    fix="copy the data under data_root and point the catalog's source there.",
                )


def open_catalog(
    path: str, *, data_root: Path | None = None, time_limit: float | None = None
) -> tuple[Catalog, Executor]:
    """Load a catalog and open the engine it names, checking that every table can be read.

    Args:
        path: the catalog file.
        data_root: if given, every file source must lie inside it (see :func:`confine`).
        time_limit: the engine's time limit for one query, in seconds.

    Raises:
        CatalogError: the catalog is malformed, a source is outside the data root, or cannot be
            read.
    """
    catalog = load_catalog(path)
    confine(catalog, data_root)
    executor = executor_for(catalog)
    executor.time_limit = time_limit
    return catalog, executor


class DatasetCache:
    """Opened datasets of this process, by name.

    Args:
        data_root: every file source must lie inside it (``None``: anywhere but system folders).
        time_limit: the engine's time limit for one query, in seconds.
    """

    def __init__(self, data_root: Path | None = None, time_limit: float | None = None) -> None:
        self.data_root = data_root
        self.time_limit = time_limit
        self._open: dict[str, OpenDataset] = {}
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}

    def get(self, registration: Registration) -> OpenDataset:
        """The opened dataset for a registration, opening (or reopening) it if needed."""
        stamp = catalog_stamp(registration.catalog)
        found = self._open.get(registration.name)
        if found is not None and found.registration == registration and found.stamp == stamp:
            return found
        with self._lock:
            loading = self._loading.setdefault(registration.name, threading.Lock())
        with loading:
            found = self._open.get(registration.name)
            if found is not None and found.registration == registration and found.stamp == stamp:
                return found
            catalog, executor = at_low_priority(
                lambda: open_catalog(
                    registration.catalog, data_root=self.data_root, time_limit=self.time_limit
                )
            )
            if catalog.name != registration.name:
                raise ConfigurationError(
                    f"The catalog {registration.catalog} now names its dataset "
                    f"{catalog.name!r}, but it was registered as {registration.name!r}.",
                    why="budgets are kept by dataset name; a renamed catalog is another dataset.",
                    fix="restore the [dataset] name, or remove and register the dataset again.",
                )
            opened = OpenDataset(
                registration=registration,
                catalog=catalog,
                executor=executor,
                descriptions=read_descriptions(registration.catalog),
                stamp=stamp,
            )
            # A replaced engine is not closed here: a request may still be using it; it is
            # closed when the last reference to it goes.
            self._open[registration.name] = opened
            return opened

    def forget(self, name: str) -> None:
        """Drop an opened dataset (after it was removed)."""
        with self._lock:
            self._open.pop(name, None)

    def close(self) -> None:
        """Close every engine."""
        with self._lock:
            opened = list(self._open.values())
            self._open.clear()
        for dataset in opened:
            dataset.executor.close()
