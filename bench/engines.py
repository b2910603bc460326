"""Benchmark of Dalenius on each engine: its time beside the raw engine's for the same aggregate.

Run ``.venv/bin/python bench/engines.py --rows 1000000 10000000`` (see ``docs/engines.md``). For each
table size it generates the synthetic census tables once (``dalenius.datasets.census``, Parquet;
``visits`` has 1 to 5 rows per person), loads them where an engine needs them (PostgreSQL: COPY into
schema ``dalenius_bench`` of database ``test``), then runs Q1–Q13 at ε = 1:

* Q1 ``COUNT(*) WHERE age >= 40``; Q2 ``SUM(income)`` clipped to [0, 500000]; Q3 ``AVG(age)``
  clipped to [0, 100]; Q4 ``COUNT`` by education (16 public keys); Q5 ``AVG(hours_per_week)`` by
  state (50 public keys); Q6 ``COUNT`` by zip (about 5,000 keys, not public: private partition
  selection, with δ = 1e-6; reported as "not supported yet" if Dalenius refuses it); Q7 = Q5 on
  ``visits`` with the person as the privacy unit (at most 5 rows and 1 group per person); Q8
  ``VARIANCE(age)`` clipped to [0, 100]; Q9–Q13 on data as it comes (:func:`write_arrivals`):
  Q9 ``AVG(score)`` by state with 8% of persons over the cap of 5 rows, Q10/Q11 ``SUM``/``AVG``
  of a double with NULLs and a Pareto tail past its bounds, Q12/Q13 ``SUM``/``AVG`` of an integer
  15% outside its bounds.

"Raw" is the plain aggregate SQL on the same engine over the same data (``SELECT AVG(age) FROM
people``). Each time is the median of ``--repeats`` runs after a warm-up, raw and Dalenius runs
interleaved, data already loaded. Dalenius's time is split into parts: plan (parse, validate,
compile the DP plan and its SQL), ledger (reserve, commit, remaining budget; a SQLite file
ledger), version (the data fingerprint of the answer cache), SQL (the exact query in the engine),
noise, and the rest (post-processing). Every run uses a fresh analyst, so no answer comes from the
ledger's cache. Peak memory is the Python process's peak resident set during the engine's runs;
the JVM (Spark) and the server backend (PostgreSQL) are reported separately.

After each table come the *floors*: plain SQL doing work that any exact DP answer must also do
(clipping every value; one pass grouping the visits by person; ranking the rows of the persons
over the cap by an MD5 of their content), timed on the raw engine and divided by the raw query's
time: how close to raw the engine itself allows a query to get.

With ``--memory`` (DuckDB), each query then runs once more on each side in a fresh process
(``bench/peak.py``: raw DuckDB importing only ``duckdb``, Dalenius through a session), and its
peak resident set is printed beside raw's, with their ratio; also each side's growth during the
query (the peak less the resident set just before it), which leaves out the imports, and the
peak of the query's first floor run as raw DuckDB (what any exact answer must hold in memory).

The tables are generated once per size and kept under ``--data`` (a 100M-person census is 5.4 GB
and took under 5 minutes on the 2-core machine); generation streams one chunk of people at a time
and shows its progress on stderr (a bar on a terminal, else a line per chunk). ``arrivals``
(Q9–Q13) is written only when one of those queries is asked for: it is built in memory (its rows
are shuffled as a whole), about 380M rows at 100M people, more than a 24 GiB machine holds so.

This is a benchmark, not a test: it prints one table per size and asserts nothing.
"""

from __future__ import annotations

import abc
import argparse
import contextlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from dalenius.cli.render import progress
from dalenius.core.catalog import Catalog, Source, load_catalog
from dalenius.core.dialect import DIALECTS
from dalenius.core.errors import QueryError
from dalenius.core.loss import ApproxDP
from dalenius.datasets.census import benchmark_catalog_text, write_benchmark
from dalenius.engine import query_release as query_module
from dalenius.engine.session import Session, connect
from dalenius.executors.base import Executor
from dalenius.executors.factory import executor_for
from dalenius.ledger import Ledger, open_ledger

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
PG_SCHEMA = "dalenius_bench"


@dataclass(frozen=True)
class Query:
    name: str
    sql: str
    raw: str
    delta: float | None = None


QUERIES = [
    Query(
        "Q1",
        "SELECT COUNT(*) FROM people WHERE age >= 40",
        "SELECT COUNT(*) FROM people WHERE age >= 40",
    ),
    Query("Q2", "SELECT SUM(income) FROM people", "SELECT SUM(income) FROM people"),
    Query("Q3", "SELECT AVG(age) FROM people", "SELECT AVG(age) FROM people"),
    Query(
        "Q4",
        "SELECT education, COUNT(*) FROM people GROUP BY education",
        "SELECT education, COUNT(*) FROM people GROUP BY education",
    ),
    Query(
        "Q5",
        "SELECT state, AVG(hours_per_week) FROM people GROUP BY state",
        "SELECT state, AVG(hours_per_week) FROM people GROUP BY state",
    ),
    Query(
        "Q6",
        "SELECT zip, COUNT(*) FROM people GROUP BY zip",
        "SELECT zip, COUNT(*) FROM people GROUP BY zip",
        delta=1e-6,
    ),
    Query(
        "Q7",
        "SELECT state, AVG(hours_per_week) FROM visits GROUP BY state",
        "SELECT state, AVG(hours_per_week) FROM visits GROUP BY state",
    ),
    Query("Q8", "SELECT VARIANCE(age) FROM people", "SELECT VARIANCE(age) FROM people"),
    # Data as it comes (``arrivals``, see write_arrivals): persons over the row cap, a float
    # column with NULLs and a Pareto tail past its bounds, an int column partly outside them.
    Query(
        "Q9",
        "SELECT state, AVG(score) FROM arrivals GROUP BY state",
        "SELECT state, AVG(score) FROM arrivals GROUP BY state",
    ),
    Query("Q10", "SELECT SUM(amount) FROM readings", "SELECT SUM(amount) FROM readings"),
    Query("Q11", "SELECT AVG(amount) FROM readings", "SELECT AVG(amount) FROM readings"),
    Query("Q12", "SELECT SUM(score) FROM readings", "SELECT SUM(score) FROM readings"),
    Query("Q13", "SELECT AVG(score) FROM readings", "SELECT AVG(score) FROM readings"),
]
PARTS = ("plan", "ledger", "version", "sql", "noise")


@dataclass
class Clock:
    """What a time is: wall time (default), or with ``--clock cpu`` this process's CPU time.

    CPU time counts DuckDB's threads (they run in this process) and not the waits: on a machine
    loaded by other work it moves far less than wall time, so two forms of a query can be
    compared there. It misses the PostgreSQL server's and the Spark JVM's work, and the ledger's
    waits for the disk.
    """

    now: Callable[[], float] = time.perf_counter


CLOCK = Clock()


@dataclass(frozen=True)
class Floor:
    """Work any exact DP answer to a query must also do, timed as plain SQL on the raw engine."""

    query: str
    what: str
    sql: str

    def text(self, engine: str) -> str:
        """The SQL as ``engine`` reads it (its name for the text type)."""
        return self.sql.replace("{text}", DIALECTS[engine].text_type)


FLOORS = [
    Floor(
        "Q3",
        "clip every age to [0, 100], then SUM and COUNT",
        "SELECT SUM(CASE WHEN age BETWEEN 0 AND 100 THEN age WHEN age < 0 THEN 0 "
        "WHEN age > 100 THEN 100 ELSE age END), COUNT(age) FROM people",
    ),
    # Each person's COUNT is consumed (summed): with COUNT(*) over the groups instead, DuckDB
    # drops the unused per-person count and runs a bare DISTINCT, which is no aggregation. The
    # largest count too: Spark rewrites a sum of per-person counts into a count of the rows.
    Floor(
        "Q7",
        "one hash aggregation of the visits by person, its per-person COUNT summed and its largest",
        "SELECT SUM(n), MAX(n) FROM (SELECT person_id, COUNT(*) AS n FROM visits "
        "GROUP BY person_id) AS p",
    ),
    Floor(
        "Q9",
        "one hash aggregation of the arrivals by person, its per-person COUNT summed and its largest",
        "SELECT SUM(n), MAX(n) FROM (SELECT person_id, COUNT(*) AS n FROM arrivals "
        "GROUP BY person_id) AS p",
    ),
    # What bounding adds on top of that pass: the rows of the persons over the cap ranked by a
    # keyed MD5 of their content (as text), the first 5 of each kept. The query's hash also
    # carries the key and the person's id, and guards NULLs; this is its cheapest core.
    Floor(
        "Q9",
        "the over-cap persons' rows ranked by an MD5 of their content, 5 kept per person",
        "SELECT COUNT(*) FROM (SELECT ROW_NUMBER() OVER (PARTITION BY person_id ORDER BY "
        "MD5(CAST(person_id AS {text}) || '|' || CAST(score AS {text}))) AS r FROM arrivals "
        "WHERE person_id IN (SELECT person_id FROM arrivals GROUP BY person_id "
        "HAVING COUNT(*) > 5)) AS k WHERE r <= 5",
    ),
    Floor(
        "Q10",
        "clip every amount to [0, 1000], then SUM",
        "SELECT SUM(CASE WHEN amount BETWEEN 0 AND 1000 THEN amount WHEN amount < 0 THEN 0 "
        "WHEN amount > 1000 THEN 1000 ELSE amount END) FROM readings",
    ),
    Floor(
        "Q11",
        "clip every amount to [0, 1000], then SUM and COUNT",
        "SELECT SUM(CASE WHEN amount BETWEEN 0 AND 1000 THEN amount WHEN amount < 0 THEN 0 "
        "WHEN amount > 1000 THEN 1000 ELSE amount END), COUNT(amount) FROM readings",
    ),
    Floor(
        "Q12",
        "clip every score to [0, 100], then SUM",
        "SELECT SUM(CASE WHEN score BETWEEN 0 AND 100 THEN score WHEN score < 0 THEN 0 "
        "WHEN score > 100 THEN 100 ELSE score END) FROM readings",
    ),
    Floor(
        "Q13",
        "clip every score to [0, 100], then SUM and COUNT",
        "SELECT SUM(CASE WHEN score BETWEEN 0 AND 100 THEN score WHEN score < 0 THEN 0 "
        "WHEN score > 100 THEN 100 ELSE score END), COUNT(score) FROM readings",
    ),
]

ARRIVALS_CAP = 5
ARRIVALS_COLUMNS = """
person_id = {{ type = "int", nullable = false, description = "The person." }}
state = {{ type = "str", keys = {states}, nullable = false, per_unit = true, description = "The person's state." }}
amount = {{ type = "float", bounds = [0, 1000], description = "Pareto tail past 1000; NULL in 10%." }}
score = {{ type = "int", bounds = [0, 100], nullable = false, description = "About 15% outside [0, 100]." }}
"""
ARRIVALS_TOML = """
[tables.arrivals]
source = {{ parquet = "arrivals.parquet" }}
privacy_unit = {{ column = "person_id", max_rows = {cap}, max_groups = 1 }}
description = "Rows as they come: {over:.1%} of persons have more rows than the cap of {cap}."

[tables.arrivals.columns]{columns}
[tables.readings]
source = {{ parquet = "arrivals.parquet" }}
privacy_unit = "row"
description = "The arrivals' rows, each its own privacy unit."

[tables.readings.columns]{columns}"""


def write_arrivals(folder: Path, persons: int, seed: int = 2026) -> None:
    """Append ``arrivals`` and ``readings`` (the same rows) to the folder's catalog.

    Rows per person: 1 to 5 for 92% of persons, 6 to 20 (over the cap of 5) for 8%; ``state`` is
    the person's; ``amount`` is 100 times a Pareto(1.2) draw (a tail far past the bound 1000)
    with 10% NULLs; ``score`` is normal(50, 35) rounded, so about 15% falls outside [0, 100].
    numpy's generator makes the data only; no noise comes from it.
    """
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)  # data only
    over = rng.random(persons) < 0.08
    counts = np.where(over, rng.integers(6, 21, persons), rng.integers(1, 6, persons))
    person = np.repeat(np.arange(1, persons + 1, dtype=np.int64), counts)
    order = rng.permutation(person.size)  # rows arrive in no particular order
    states = list(dict.fromkeys(_states(folder)))
    state = np.asarray(states, dtype=object)[rng.integers(0, len(states), persons)]
    amount = 100.0 * (rng.pareto(1.2, person.size) + 1.0)
    score = np.rint(rng.normal(50, 35, person.size)).astype(np.int64)
    table = pa.table(
        {
            "person_id": person[order],
            "state": pa.array(np.repeat(state, counts)[order], pa.string()),
            "amount": pa.array(amount, mask=rng.random(person.size) < 0.10),
            "score": score,
        }
    )
    pq.write_table(table, folder / "arrivals.parquet", row_group_size=1 << 20)
    with open(folder / "census.toml", "a") as handle:
        handle.write(arrivals_text(states, float(over.mean())))


def arrivals_text(states: list[str], over: float) -> str:
    """The catalog of ``arrivals`` and ``readings`` (``over``: the share of persons over the cap)."""
    listed = "[" + ", ".join(f'"{x}"' for x in states) + "]"
    columns = ARRIVALS_COLUMNS.format(states=listed)
    return ARRIVALS_TOML.format(cap=ARRIVALS_CAP, over=over, columns=columns)


def refresh_catalog(folder: Path, n: int) -> None:
    """Rewrite the folder's catalog as this code writes it, keeping the data (and the share of
    persons over the cap that its ``arrivals`` were written with): data generated by an older
    run is then measured under the current declarations, not that run's."""
    path = folder / "census.toml"
    old = path.read_text()
    text = benchmark_catalog_text(n)
    over = re.search(r"Rows as they come: ([0-9.]+)% of persons", old)
    if over is not None and (folder / "arrivals.parquet").exists():
        text += arrivals_text(_states(folder), float(over.group(1)) / 100)
    if text != old:
        path.write_text(text)


def _states(folder: Path) -> list[str]:
    """The public key list of ``people.state`` in the folder's catalog."""
    catalog = load_catalog(folder / "census.toml")
    people = next(t for t in catalog.tables if t.name == "people")
    column = next(c for c in people.columns if c.name == "state")
    return [str(k) for k in column.keys or ()]


@dataclass
class Timer:
    """Seconds spent in each part of one Dalenius query."""

    parts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    depth: int = 0

    def wrap(self, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            # A timed call inside another (PostgreSQL's data version runs a query) counts once.
            self.depth += 1
            start = CLOCK.now()
            try:
                return fn(*args, **kwargs)
            finally:
                self.depth -= 1
                if self.depth == 0:
                    self.parts[part] += CLOCK.now() - start

        return timed

    def reset(self) -> None:
        for part in self.parts:
            self.parts[part] = 0.0


@dataclass
class Row:
    query: str
    dalenius: float | None
    raw: float
    parts: dict[str, float]
    note: str = ""


# -- engines ------------------------------------------------------------------------------------


class Engine(abc.ABC):
    """One engine: a Dalenius executor and a raw way to run the same SQL on the same data."""

    name = ""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.executor = executor_for(catalog)

    @abc.abstractmethod
    def raw(self, sql: str) -> Any:
        """Run ``sql`` directly on the engine (the baseline Dalenius is compared with)."""

    def side_memory(self) -> str:
        return ""

    def close(self) -> None:
        self.executor.close()


class DuckDB(Engine):
    name = "duckdb"

    def __init__(self, catalog: Catalog) -> None:
        super().__init__(catalog)
        import duckdb

        self.con = duckdb.connect(":memory:")
        for table in catalog.tables:
            self.con.execute(
                f"CREATE VIEW {table.name} AS SELECT * FROM read_parquet('{table.source.location}')"
            )

    def raw(self, sql: str) -> Any:
        return self.con.execute(sql).fetchall()

    def close(self) -> None:
        super().close()
        self.con.close()


class Postgres(Engine):
    name = "postgres"

    def __init__(self, catalog: Catalog) -> None:
        super().__init__(catalog)
        import psycopg

        self.con = psycopg.connect(PG_URL, autocommit=True)
        self.con.execute(f"SET search_path = {PG_SCHEMA}")
        self.backend = int(self.executor.fetch("SELECT pg_backend_pid()")[0][0])

    def raw(self, sql: str) -> Any:
        return self.con.execute(sql).fetchall()

    def side_memory(self) -> str:
        return f"server backend peak {_peak_of(self.backend) / 2**20:.0f} MiB"

    def close(self) -> None:
        super().close()
        self.con.close()


class Spark(Engine):
    name = "spark"

    def __init__(self, catalog: Catalog) -> None:
        super().__init__(catalog)
        from dalenius.executors.spark import shared_session

        base = shared_session()
        self.spark = base.newSession()
        for table in catalog.tables:
            self.spark.read.parquet(table.source.location).createOrReplaceTempView(table.name)
        self.jvm = int(base.sparkContext._gateway.proc.pid)

    def raw(self, sql: str) -> Any:
        """The raw query with the shuffle partitions Dalenius's executor would choose for it."""
        from dalenius.executors.spark import input_bytes, shuffle_partitions

        frame = self.spark.sql(sql)
        count = shuffle_partitions(input_bytes(frame))
        self.spark.conf.set("spark.sql.shuffle.partitions", str(count))
        return frame.collect()

    def side_memory(self) -> str:
        return f"JVM peak {_peak_of(self.jvm) / 2**20:.0f} MiB"


def load_postgres(catalog: Catalog) -> Catalog:
    """COPY the Parquet tables into schema ``dalenius_bench`` (once per size) and point at them."""
    import psycopg

    types = {
        "int": "bigint",
        "float": "double precision",
        "str": "text",
        "bool": "boolean",
        "date": "date",
    }
    with psycopg.connect(PG_URL, autocommit=True) as con:
        con.execute(f"DROP SCHEMA IF EXISTS {PG_SCHEMA} CASCADE")
        con.execute(f"CREATE SCHEMA {PG_SCHEMA}")
        for table in catalog.tables:
            path = table.source.location
            columns = ", ".join(f"{c.name} {types[c.type]}" for c in table.columns)
            con.execute(f"CREATE TABLE {PG_SCHEMA}.{table.name} ({columns})")
            names = [c.name for c in table.columns]
            copy_sql = f"COPY {PG_SCHEMA}.{table.name} ({', '.join(names)}) FROM STDIN (FORMAT csv)"
            with con.cursor() as cur, cur.copy(copy_sql) as copy:
                for batch in pq.ParquetFile(path).iter_batches(batch_size=200_000, columns=names):
                    sink = _CsvSink()
                    pa_csv.write_csv(batch, sink, pa_csv.WriteOptions(include_header=False))
                    copy.write(sink.data)
            con.execute(f"ANALYZE {PG_SCHEMA}.{table.name}")
    tables = tuple(
        replace(t, source=Source("postgres", PG_URL, table=f"{PG_SCHEMA}.{t.name}"))
        for t in catalog.tables
    )
    return replace(catalog, engine="postgres", tables=tables)


class _CsvSink:
    """A write-only file object collecting the bytes pyarrow writes."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, chunk: bytes) -> int:
        self.data += chunk
        return len(chunk)

    def close(self) -> None:
        pass

    @property
    def closed(self) -> bool:
        return False


# -- measuring ----------------------------------------------------------------------------------


def _status(pid: int | str, key: str) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _peak_of(pid: int) -> int:
    try:
        return _status(pid, "VmHWM")
    except OSError:
        return 0


def _reset_peak() -> None:
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


@contextlib.contextmanager
def timed_parts(executor: Executor, ledger: Ledger, timer: Timer) -> Iterator[None]:
    """Time the parts of :meth:`Session.query` by wrapping what it calls (restored afterwards)."""
    wrapped = [
        (executor, "fetch", "sql"),
        (executor, "prepare", "sql"),
        (executor, "data_version", "version"),
        (ledger, "reserve", "ledger"),
        (ledger, "commit", "ledger"),
        (ledger, "remaining", "ledger"),
        (query_module, "add_noise", "noise"),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in wrapped]
    for owner, name, part in wrapped:
        setattr(owner, name, timer.wrap(part, getattr(owner, name)))
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def make_session(
    catalog: Catalog, executor: Executor, ledger: Ledger, analyst: str, timer: Timer
) -> Session:
    # A budget no run exhausts; every run is a fresh analyst, so none is answered from the cache.
    ledger.set_budget(analyst, catalog.name, ApproxDP(Fraction(10**6), Fraction(1, 2)))
    session = connect(catalog, ledger=ledger, analyst=analyst, executor=executor)
    session.prepare = timer.wrap("plan", session.prepare)  # type: ignore[method-assign]
    return session


def run_engine(
    engine: Engine, repeats: int, ledger_path: Path, queries: list[Query]
) -> tuple[list[Row], int]:
    ledger = open_ledger(str(ledger_path))
    # Q6's private partition selection spends (ε, δ): account the dataset as approximate DP.
    ledger.set_dataset(engine.catalog.name, definition="approx")
    timer = Timer()
    counter = iter(range(10**9))
    rows = []
    _reset_peak()
    with timed_parts(engine.executor, ledger, timer):
        for query in queries:
            rows.append(measure(engine, query, repeats, ledger, timer, counter))
    peak = _status("self", "VmHWM")
    ledger.close()
    return rows, peak


def measure(
    engine: Engine, query: Query, repeats: int, ledger: Ledger, timer: Timer, counter: Iterator[int]
) -> Row:
    def dalenius() -> tuple[float, dict[str, float]]:
        session = make_session(
            engine.catalog, engine.executor, ledger, f"bench-{next(counter)}", timer
        )
        timer.reset()
        start = CLOCK.now()
        session.query(query.sql, epsilon=1, delta=query.delta)
        return CLOCK.now() - start, dict(timer.parts)

    def raw() -> float:
        start = CLOCK.now()
        engine.raw(query.raw)
        return CLOCK.now() - start

    try:
        dalenius()  # warm-up (and the check that Dalenius answers it)
    except QueryError as exc:
        raw()
        raw_times = [raw() for _ in range(repeats)]
        first = str(exc).splitlines()[0]
        return Row(
            query.name, None, statistics.median(raw_times), {}, f"not supported yet ({first[:60]})"
        )
    raw()
    d_times, r_times, parts = [], [], []
    for _ in range(repeats):
        r_times.append(raw())
        elapsed, split = dalenius()
        d_times.append(elapsed)
        parts.append(split)
    median_parts = {p: statistics.median(s[p] for s in parts) for p in PARTS}
    return Row(query.name, statistics.median(d_times), statistics.median(r_times), median_parts)


@dataclass(frozen=True)
class Peak:
    """One query's peak resident set on each side, each in a fresh process (``bench/peak.py``)."""

    query: str
    raw: int
    raw_before: int
    dalenius: int
    dalenius_before: int
    floor: tuple[int, int] | None = None  # the query's first floor, raw: peak, RSS before


def _peak_run(*args: str) -> tuple[int, int]:
    """Run ``bench/peak.py`` with ``args`` in a fresh process; its peak and pre-query RSS."""
    command = [sys.executable, str(Path(__file__).with_name("peak.py")), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    fields = dict(item.split("=") for item in done.stdout.split())
    return int(fields["peak"]), int(fields["before"])


def measure_peaks(catalog: Catalog, catalog_path: Path, queries: list[Query]) -> list[Peak]:
    """Each query once raw and once through Dalenius, each in its own fresh process, alternated."""
    tables = [f"{t.name}={t.source.location}" for t in catalog.tables]
    peaks = []
    for query in queries:
        raw_peak, raw_before = _peak_run("raw", query.raw, *tables)
        delta = () if query.delta is None else ("--delta", repr(query.delta))
        ours, ours_before = _peak_run("dalenius", query.sql, "--catalog", str(catalog_path), *delta)
        floor = next((f for f in FLOORS if f.query == query.name), None)
        floor_peak = None if floor is None else _peak_run("raw", floor.text("duckdb"), *tables)
        peaks.append(Peak(query.name, raw_peak, raw_before, ours, ours_before, floor_peak))
    return peaks


def print_peaks(peaks: list[Peak]) -> None:
    """One line per query: each side's peak and growth during the query, in MiB, and the ratios."""
    mib = 2**20
    for p in peaks:
        grown_raw, grown_ours = p.raw - p.raw_before, p.dalenius - p.dalenius_before
        growth = f"{grown_ours / grown_raw:.2f}" if grown_raw > 0 else "—"
        floor_text = ""
        if p.floor is not None:
            peak, before = p.floor
            floor_text = (
                f"; its floor's peak {peak / mib:.0f} MiB (+{(peak - before) / mib:.0f}) "
                f"= {peak / p.raw:.2f} x raw"
            )
        print(
            f"memory {p.query}: raw peak {p.raw / mib:.0f} MiB (+{grown_raw / mib:.0f} in the "
            f"query), Dalenius peak {p.dalenius / mib:.0f} MiB (+{grown_ours / mib:.0f}); "
            f"Dalenius / raw = {p.dalenius / p.raw:.2f} peak, {growth} growth" + floor_text
        )


def generate(folder: Path, n: int) -> None:
    """Write the census tables for ``n`` people, showing progress on stderr as chunks are written.

    On a terminal the CLI's progress bar; elsewhere (a log file) one line per chunk.
    """
    start = time.perf_counter()
    tty = sys.stderr.isatty()
    with progress(f"generating {n:,} people", n, "people") as update:

        def report(done: int) -> None:
            update(done)
            if not tty:
                took = time.perf_counter() - start
                print(
                    f"generated {done:,} / {n:,} people ({done / n:.0%}) in {took:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )

        write_benchmark(folder, n, progress=report)
    print(f"generated {n:,} people in {time.perf_counter() - start:.1f} s into {folder}")


ARRIVAL_TABLES = ("arrivals", "readings")


# -- output -------------------------------------------------------------------------------------


def print_floors(engine: Engine, rows: list[Row], repeats: int) -> None:
    """Time each floor and print it beside the raw query it belongs to, and Dalenius beside it."""
    raw = {row.query: row.raw for row in rows}
    ours = {row.query: row.dalenius for row in rows}
    for floor in FLOORS:
        if floor.query not in raw:
            continue
        engine.raw(floor.text(engine.name))
        times = []
        for _ in range(repeats):
            start = CLOCK.now()
            engine.raw(floor.text(engine.name))
            times.append(CLOCK.now() - start)
        took = statistics.median(times)
        mine = ours[floor.query]
        versus = "—" if mine is None else f"{mine / took:.2f}"
        print(
            f"floor {floor.query}: {floor.what}: {took * 1e3:.1f} ms "
            f"= {took / raw[floor.query]:.2f} x raw {floor.query}; "
            f"Dalenius {floor.query} = {versus} x this floor"
        )


def print_table(rows_n: int, engine: Engine, rows: list[Row], peak: int) -> None:
    side = engine.side_memory()
    print(
        f"\n{engine.name} — {rows_n:,} people — peak RSS of this process {peak / 2**20:.0f} MiB"
        + (f"; {side}" if side else "")
    )
    head = f"{'query':5} {'dalenius ms':>11} {'raw ms':>9} {'ratio':>6}  " + " ".join(
        f"{p:>8}" for p in (*PARTS, "other")
    )
    print(head)
    print("-" * len(head))
    for row in rows:
        if row.dalenius is None:
            print(f"{row.query:5} {'—':>11} {row.raw * 1e3:9.1f} {'—':>6}  {row.note}")
            continue
        other = row.dalenius - sum(row.parts.values())
        parts = " ".join(f"{row.parts[p] * 1e3:8.1f}" for p in PARTS) + f" {other * 1e3:8.1f}"
        ratio = row.dalenius / row.raw if row.raw else float("nan")
        print(
            f"{row.query:5} {row.dalenius * 1e3:11.1f} {row.raw * 1e3:9.1f} {ratio:6.2f}  {parts}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, nargs="+", default=[1_000_000], help="people per table size"
    )
    parser.add_argument("--engines", nargs="+", default=["duckdb", "postgres", "spark"])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per query (median)")
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall time, or this process's CPU time (DuckDB only: see Clock)",
    )
    parser.add_argument(
        "--queries", nargs="+", default=[q.name for q in QUERIES], help="which of Q1-Q13 to run"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(tempfile.gettempdir()) / "dalenius-bench",
        help="where the generated tables are kept between runs",
    )
    parser.add_argument(
        "--memory",
        action="store_true",
        help="DuckDB: also each query's peak memory, raw and Dalenius, each in a fresh process",
    )
    args = parser.parse_args(argv)
    CLOCK.now = time.process_time if args.clock == "cpu" else time.perf_counter
    classes = {"duckdb": DuckDB, "postgres": Postgres, "spark": Spark}
    chosen = [q for q in QUERIES if q.name in args.queries]
    for n in args.rows:
        folder = args.data / f"rows-{n}"
        catalog_path = folder / "census.toml"
        if not catalog_path.exists():
            generate(folder, n)
        refresh_catalog(folder, n)
        arrivals = any(t in q.sql for q in chosen for t in ARRIVAL_TABLES)
        if arrivals and not (folder / "arrivals.parquet").exists():
            write_arrivals(folder, n)
        catalog = load_catalog(catalog_path)
        for name in args.engines:
            variant = catalog
            if name == "postgres":
                start = time.perf_counter()
                variant = load_postgres(catalog)
                print(f"loaded {n:,} people into PostgreSQL in {time.perf_counter() - start:.1f} s")
            elif name == "spark":
                variant = replace(catalog, engine="spark")
            engine = classes[name](variant)
            with tempfile.TemporaryDirectory() as tmp:
                rows, peak = run_engine(engine, args.repeats, Path(tmp) / "ledger.sqlite", chosen)
            print_table(n, engine, rows, peak)
            print_floors(engine, rows, args.repeats)
            engine.close()
            if args.memory and name == "duckdb":
                print_peaks(measure_peaks(catalog, catalog_path, chosen))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
