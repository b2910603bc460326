"""A deterministic, entirely synthetic census-like dataset for the demo and the engines benchmark.

``dalenius demo`` must work on a fresh machine without downloads, and the engines benchmark needs
tables of 1M and 10M rows of the same shape; one generator serves both. It builds a ``people``
table (one row per person: name, date of birth, ZIP code, state, sex, age, education, occupation,
hours worked, income, marital status) and a user-level ``visits`` table (1 to 5 rows per person)
whose privacy unit is the person, and writes them with a catalog that
:func:`dalenius.core.catalog.load_catalog` reads. No row describes a real person: every value is
drawn from the model in :mod:`dalenius.datasets.model` (documented in ``docs/demo-data.md``).

Randomness here is *data synthesis*, not privacy noise, so the rule that noise comes only from
:func:`dalenius.core.rng.system_random` does not apply: the data must be reproducible, and they
are drawn from ``numpy.random.Generator(numpy.random.PCG64(...))`` keyed by the caller's seed.
Nothing in the noise path can reach that generator: the mechanisms live in layer L1 and this
package in L4, and the import-linter contract forbids a lower layer from importing a higher one.

Same seed, same output, bit for bit. People are generated in chunks of :data:`CHUNK_ROWS`, each
from its own PCG64 stream keyed by ``(seed, stream, chunk)``, so the writers can stream a 10M-row
table to Parquet one row group at a time and still write exactly the rows that
:func:`generate_people` and :func:`generate_visits` return.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from dalenius.core.errors import ConfigurationError
from dalenius.datasets import model
from dalenius.datasets.sampling import generator
from dalenius.datasets.schema import (
    CATALOG_FILE,
    PEOPLE_SCHEMA,
    PERSON_ATTRIBUTES,
    VISITS_SCHEMA,
    catalog_text,
)

DEFAULT_SEED = 1994
"""The seed of the demo and benchmark data (the year of the census behind UCI Adult)."""

CHUNK_ROWS = 1 << 20
"""People generated per chunk; also the Parquet row-group size."""

FORMATS = ("csv", "parquet")
"""File formats :func:`write_demo` can write."""


def generate_people(n: int, *, seed: int = DEFAULT_SEED) -> pa.Table:
    """Generate ``n`` synthetic people with ids 1..n, one row each (schema ``PEOPLE_SCHEMA``).

    Args:
        n: number of people (0 gives an empty table with the schema).
        seed: the same seed always gives bit-identical rows.

    Raises:
        ConfigurationError: if ``n`` or ``seed`` is not a non-negative integer.

    Example:
        >>> people = generate_people(1_000, seed=7)
        >>> people.num_rows, people.column("person_id")[-1].as_py()
        (1000, 1000)
        >>> generate_people(1_000, seed=7).equals(people)
        True
    """
    _check_count("n", n, minimum=0)
    _check_seed(seed)
    return _concat(list(_people_chunks(int(n), int(seed))), PEOPLE_SCHEMA)


def generate_visits(people: pa.Table, *, seed: int = DEFAULT_SEED) -> pa.Table:
    """Generate 1 to 5 visits per person, each carrying the person's id and attributes.

    The result (schema ``VISITS_SCHEMA``) is a user-level table: protect it with the privacy unit
    ``person_id`` and a cap of 5 rows, so that no person weighs more than 5 rows in any answer.

    Args:
        people: a table from :func:`generate_people` (it needs at least ``person_id``, ``age``,
            ``education``, ``state``, ``zip``, ``hours_per_week`` and ``income``, typed as there).
        seed: the same seed and people always give bit-identical visits.

    Raises:
        ConfigurationError: if ``people`` lacks a needed column or ``seed`` is invalid.

    Example:
        >>> visits = generate_visits(generate_people(100, seed=7), seed=7)
        >>> 100 <= visits.num_rows <= 500
        True
    """
    _check_seed(seed)
    _check_people(people)
    return _concat(list(_visits_chunks(people, int(seed))), VISITS_SCHEMA)


def write_demo(
    directory: Path,
    *,
    n: int = 50_000,
    formats: Sequence[str] = FORMATS,
    seed: int = DEFAULT_SEED,
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Write the demo tables ``people`` and ``visits`` and their catalog ``census.toml``.

    Each table is written once per format (``people.csv``, ``people.parquet``, ``visits.csv``,
    ``visits.parquet``); the catalog reads the Parquet files when they are written, else the CSV
    files. Files are written under a temporary name and renamed when complete, so an interrupted
    run never leaves a truncated table behind a catalog.

    Args:
        directory: where to write; created if missing; files of the same names are replaced.
        n: number of people.
        formats: ``"csv"``, ``"parquet"`` or both.
        seed: the same seed always gives bit-identical files.
        progress: called with the number of people written so far after each chunk of
            :data:`CHUNK_ROWS` (the CLI draws a progress bar with it).

    Returns:
        The path of the catalog file, ready for :func:`dalenius.core.catalog.load_catalog`.

    Raises:
        ConfigurationError: for a bad ``n``, ``seed`` or format, or a ``directory`` that is a file;
            nothing is written then.
    """
    _check_count("n", n, minimum=1)
    _check_seed(seed)
    chosen = _check_formats(formats)
    description = (
        f"Synthetic census-like demo data: {n:,} people and their visits, generated by "
        f"dalenius.datasets.census with seed {seed}. Entirely synthetic: no row is a real person."
    )
    return _write_dataset(
        Path(directory),
        n=int(n),
        seed=int(seed),
        formats=chosen,
        name="census",
        description=description,
        progress=progress,
    )


def write_benchmark(
    directory: Path,
    n_rows: int,
    *,
    seed: int = DEFAULT_SEED,
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Write the engines-benchmark tables as Parquet: ``n_rows`` people and their visits.

    The rows are those of :func:`generate_people` and :func:`generate_visits` for the same seed,
    streamed one chunk of :data:`CHUNK_ROWS` people at a time (one row group each), so memory
    stays flat at any size (100M people: about 5 GB of files). ``visits.parquet`` holds about
    2.37 rows per person.

    Args:
        directory: where to write ``people.parquet``, ``visits.parquet`` and ``census.toml``.
        n_rows: number of people (rows of ``people``).
        seed: the same seed always gives bit-identical files.
        progress: called with the number of people written so far after each chunk (the
            engines benchmark shows its progress with it).

    Returns:
        The path of the catalog file ``census.toml`` describing the two tables.

    Raises:
        ConfigurationError: for a bad ``n_rows`` or ``seed``, or a ``directory`` that is a file.
    """
    _check_count("n_rows", n_rows, minimum=1)
    _check_seed(seed)
    return _write_dataset(
        Path(directory),
        n=int(n_rows),
        seed=int(seed),
        formats=("parquet",),
        name="census_benchmark",
        description=_benchmark_description(int(n_rows), int(seed)),
        # Its measured figures are for a row-level people table (docs/engines.md).
        person_unit=False,
        progress=progress,
    )


def benchmark_catalog_text(n_rows: int, seed: int = DEFAULT_SEED) -> str:
    """The catalog :func:`write_benchmark` writes for ``n_rows`` people, without the data.

    The engines benchmark keeps its data between runs and rewrites this, so that it measures
    the catalog the current code writes (its declarations), not the one of the run that wrote
    the files.
    """
    return catalog_text(
        "census_benchmark",
        _benchmark_description(n_rows, seed),
        "parquet",
        person_unit=False,
    )


def _benchmark_description(n_rows: int, seed: int) -> str:
    return (
        f"Synthetic census-like benchmark data: {n_rows:,} people and their visits "
        f"(seed {seed}). Entirely synthetic: no row is a real person."
    )


def _concat(chunks: list[pa.Table], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables(chunks) if chunks else schema.empty_table()


def _people_chunks(n: int, seed: int) -> Iterator[pa.Table]:
    geo = model.geography(seed)
    for chunk, start in enumerate(range(0, n, CHUNK_ROWS)):
        rng = generator(seed, model.PEOPLE_STREAM, chunk)
        yield model.people_chunk(rng, geo, start + 1, min(CHUNK_ROWS, n - start))


def _visits_chunks(people: pa.Table, seed: int) -> Iterator[pa.Table]:
    # Chunked exactly like _people_chunks, so that streamed and in-memory visits coincide.
    next_id = 1
    for chunk, start in enumerate(range(0, people.num_rows, CHUNK_ROWS)):
        rng = generator(seed, model.VISITS_STREAM, chunk)
        visits = model.visits_chunk(rng, people.slice(start, CHUNK_ROWS), next_id)
        next_id += visits.num_rows
        yield visits


def _dataset_chunks(n: int, seed: int) -> Iterator[tuple[pa.Table, pa.Table]]:
    """Chunks of people with their visits: the rows of the in-memory functions, streamed."""
    next_id = 1
    for chunk, people in enumerate(_people_chunks(n, seed)):
        visits = model.visits_chunk(generator(seed, model.VISITS_STREAM, chunk), people, next_id)
        next_id += visits.num_rows
        yield people, visits


class _TableSink:
    """Writes one table to one file, chunk by chunk, under a temporary name until committed."""

    def __init__(self, path: Path, schema: pa.Schema, file_format: str) -> None:
        self.path = path
        self.partial = path.with_name(path.name + ".partial")
        self.parquet: pq.ParquetWriter | None = None
        self.csv: pa_csv.CSVWriter | None = None
        if file_format == "parquet":
            self.parquet = pq.ParquetWriter(self.partial, schema)
        else:
            # Strings are quoted, so readers keep ZIP codes such as "02134" as text.
            self.csv = pa_csv.CSVWriter(self.partial, schema)

    def write(self, table: pa.Table) -> None:
        if self.parquet is not None:
            self.parquet.write_table(table, row_group_size=CHUNK_ROWS)
        elif self.csv is not None:
            self.csv.write_table(table)

    def close(self) -> None:
        for writer in (self.parquet, self.csv):
            if writer is not None:
                writer.close()

    def commit(self) -> None:
        self.close()
        os.replace(self.partial, self.path)

    def abort(self) -> None:
        self.close()
        self.partial.unlink(missing_ok=True)


def _write_dataset(
    directory: Path,
    *,
    n: int,
    seed: int,
    formats: tuple[str, ...],
    name: str,
    description: str,
    person_unit: bool = True,
    progress: Callable[[int], None] | None = None,
) -> Path:
    if directory.exists() and not directory.is_dir():
        raise ConfigurationError(
            f"cannot write the dataset into {str(directory)!r}: it is a file, not a folder.",
            fix="pass the path of a folder (it is created if missing).",
        )
    directory.mkdir(parents=True, exist_ok=True)
    people_sinks: list[_TableSink] = []
    visits_sinks: list[_TableSink] = []
    try:
        for file_format in formats:
            people_sinks.append(
                _TableSink(directory / f"people.{file_format}", PEOPLE_SCHEMA, file_format)
            )
            visits_sinks.append(
                _TableSink(directory / f"visits.{file_format}", VISITS_SCHEMA, file_format)
            )
        written = 0
        for people, visits in _dataset_chunks(n, seed):
            for sink in people_sinks:
                sink.write(people)
            for sink in visits_sinks:
                sink.write(visits)
            written += people.num_rows
            if progress is not None:
                progress(written)
    except BaseException:
        for sink in people_sinks + visits_sinks:
            sink.abort()
        raise
    for sink in people_sinks + visits_sinks:
        sink.commit()
    source = "parquet" if "parquet" in formats else "csv"
    catalog = directory / CATALOG_FILE
    partial = catalog.with_name(catalog.name + ".partial")
    text = catalog_text(name, description, source, person_unit=person_unit)
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, catalog)
    return catalog


def _check_count(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ConfigurationError(
            f"{name} must be a whole number of people >= {minimum}; got {value!r}.",
            fix=f"pass for example {name}=50_000.",
        )


def _check_seed(seed: object) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigurationError(
            f"seed must be a whole number >= 0; got {seed!r}.",
            why="the seed keys numpy's PCG64 generator, which takes non-negative integers.",
            fix=f"pass seed={DEFAULT_SEED} (the default) or another whole number >= 0.",
        )


def _check_formats(formats: Sequence[str]) -> tuple[str, ...]:
    # A bare string is a sequence of letters; read "csv" as ("csv",), as the caller meant.
    requested = (formats,) if isinstance(formats, str) else tuple(formats)
    unknown = [f for f in requested if f not in FORMATS]
    if not requested or unknown:
        raise ConfigurationError(
            f"formats must be a non-empty selection of {list(FORMATS)}; got {list(requested)!r}.",
            fix='pass formats=("csv", "parquet") or one of them.',
        )
    return tuple(dict.fromkeys(requested))


def _check_people(people: object) -> None:
    if not isinstance(people, pa.Table):
        raise ConfigurationError(
            f"people must be a pyarrow.Table; got {type(people).__name__}.",
            fix="pass the table returned by generate_people(n).",
        )
    problems = []
    for column in ("person_id", *PERSON_ATTRIBUTES):
        expected = PEOPLE_SCHEMA.field(column).type
        if column not in people.column_names:
            problems.append(f"{column} is missing")
        elif people.schema.field(column).type != expected:
            problems.append(f"{column} is {people.schema.field(column).type}, not {expected}")
    if problems:
        raise ConfigurationError(
            f"people cannot carry visits: {'; '.join(problems)}.",
            why="each visit repeats its person's id and attributes, typed as in generate_people.",
            fix="pass the table returned by generate_people(n).",
        )
