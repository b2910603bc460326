"""Contribution bounding holds on every engine: one unit far above its caps moves each exact
measurement by at most the sensitivity the plan charges, and keeps at most ``max_rows`` rows in at
most ``max_groups`` groups, whatever rows the keyed hash happens to keep.

The keyed hash that ranks a unit's groups and rows is one MD5 of one canonical text on every
engine (:func:`dalenius.sql.emit.dialects.keyed_hash`), so for the same hash key every engine keeps the
same rows and gives the same exact answers; the last tests check that across engines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
from sqlglot import exp
from tests.conformance.engines import OTHER_ENGINES
from tests.support.exact import exact_units_for, neighbour_moves, same_exact_units

from dalenius.core.dialect import DUCKDB, Dialect
from dalenius.engine.session import Session
from dalenius.sql.emit import statements
from dalenius.sql.emit.dialects import keyed_hash

QUERIES = [
    "SELECT day, COUNT(*), SUM(amount) FROM visits GROUP BY day",
    "SELECT COUNT(*), AVG(amount) FROM visits WHERE amount > 10",
]

ENGINES = [
    pytest.param("duckdb", 3, id="duckdb"),
    pytest.param("postgres", 3, marks=pytest.mark.postgres, id="postgres"),
    # A Spark query costs about a second: one fresh hash key per query is enough there.
    pytest.param("spark", 1, marks=pytest.mark.spark, id="spark"),
]


@pytest.mark.parametrize(("engine", "repeats"), ENGINES)
def test_removing_a_heavy_unit_moves_each_measurement_by_at_most_its_sensitivity(
    engine: str, repeats: int, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    sessions = sessions_on(engine)
    heavy, light = sessions["heavy"], sessions["visits"]
    for sql in QUERIES:
        for _ in range(repeats):  # a fresh hash key each time: the bound holds for every key
            neighbour_moves(heavy, light, sql)


CAPPED_QUERIES = [
    # A count of distinct units depends on the group cap: the catalog's max_groups holds.
    ("SELECT day, COUNT(*), COUNT(DISTINCT pid) FROM visits GROUP BY day", "max_groups"),
    # Nothing here depends on it: the planner lifts it to max_rows (plan.compile.to_dp).
    (QUERIES[0], "max_rows"),
]


@pytest.mark.parametrize(("engine", "repeats"), ENGINES)
@pytest.mark.parametrize(("sql", "group_cap"), CAPPED_QUERIES)
def test_a_heavy_unit_keeps_at_most_max_rows_in_max_groups(
    engine: str,
    repeats: int,
    sql: str,
    group_cap: str,
    sessions_on: Callable[[str], dict[str, Session]],
) -> None:
    sessions = sessions_on(engine)
    unit = sessions["heavy"].catalog.tables[0].privacy_unit
    assert sessions["heavy"].prepare(sql, 1).plan.bounding.max_groups == getattr(unit, group_cap)
    for _ in range(repeats):
        with_unit = np.array(exact_units_for(sessions["heavy"], sql)["m0"])
        without = np.array(exact_units_for(sessions["visits"], sql)["m0"])
        kept = with_unit - without  # other units are within their caps: untouched
        assert kept.min() >= 0
        assert 1 <= kept.sum() <= unit.max_rows
        assert np.count_nonzero(kept) <= getattr(unit, group_cap)


MIXED_QUERIES = [
    ("SELECT day, COUNT(*), SUM(amount) FROM mixed GROUP BY day", None),
    ("SELECT flag, day, AVG(amount), VARIANCE(amount) FROM mixed GROUP BY flag, day", None),
    ("SELECT code, COUNT(*) FROM mixed GROUP BY code", 1e-6),
    ("SELECT code, flag, COUNT(*) FROM mixed GROUP BY code, flag", 1e-6),
    ("SELECT COUNT(*), MEDIAN(amount) FROM mixed", None),
    ("SELECT day, COUNT(DISTINCT code) FROM mixed GROUP BY day", None),
]


def _mixed(sessions: dict[str, Session]) -> Session:
    """The ``mixed`` session, its table loaded in its engine."""
    session = sessions["mixed"]
    for table in session.catalog.tables:
        session.executor.prepare(table)
    return session


def _canonical(rows: list[tuple[object, ...]]) -> list[str]:
    """Rows in a comparable form: sorted, -0.0 as 0.0 (engines report either for one group)."""
    return sorted(repr(tuple(v + 0.0 if isinstance(v, float) else v for v in row)) for row in rows)


def _every_unit_ranked(sql: str) -> str:
    """The statement with every unit treated as over its caps: every row is ranked.

    Rows bounded as rows (:func:`dalenius.sql.emit.bounding.bounded`) name the units over their caps in
    a ``HAVING NOT``; a statement aggregating each unit once
    (:func:`dalenius.sql.emit.bounding.bounded_aggregate`) marks them ``__over_caps``, or, from
    its (unit, group) cells, finds them with a ``HAVING`` on their summed rows (on Spark, by
    comparing each unit's total, a window over its cells).
    """
    if "HAVING NOT " in sql:
        assert sql.count("HAVING NOT ") == 1, sql
        return sql.replace("HAVING NOT ", "HAVING 1 = 1 OR NOT ")
    if not sql.startswith("WITH "):  # Spark's rows form ranks every row already
        assert "ROW_NUMBER() OVER" in sql and "__split" not in sql, sql
        return sql
    if "__total > " in sql:  # Spark's cells: each unit's total beside its cells, by a window
        assert sql.count("__total > ") >= 2, sql  # the unit, and each key
        return sql.replace("__total > ", "1 = 1 OR __total > ")
    cells = "FROM __units GROUP BY __u HAVING "
    if cells in sql:
        assert sql.count(cells) == 1, sql
        return sql.replace(cells, f"{cells}1 = 1 OR ")
    assert sql.count(" AS __over_caps") == 1, sql
    return sql.replace(" AS __over_caps", " OR TRUE AS __over_caps")


@pytest.mark.parametrize(("engine", "repeats"), ENGINES)
def test_ranking_only_units_over_their_caps_keeps_the_rows_ranking_every_unit_keeps(
    engine: str, repeats: int, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    """The engine ranks the rows of units over their caps only; the kept rows are the same.

    ``mixed`` has units within the caps in one group and in two, over the row cap, over the
    group cap, and with NULL keys; the exact measurements are compared, for the same hash key,
    with the statement that ranks every unit's rows.
    """
    session = _mixed(sessions_on(engine))
    over = 0
    for sql, delta in MIXED_QUERIES:
        for salt in range(repeats):
            exact = session.prepare(sql, 1, delta, salt=1_000_003 * salt + 17).exact
            for statement in [exact.main, *(q for _, q in exact.histograms)]:
                ours = _canonical(session.executor.fetch(statement))
                reference = _canonical(session.executor.fetch(_every_unit_ranked(statement)))
                assert ours == reference, (engine, sql, statement)
        units = session.executor.fetch(
            "SELECT COUNT(*) FROM (SELECT pid FROM mixed GROUP BY pid HAVING COUNT(*) > 3) AS o"
        )
        over = int(units[0][0])
    assert over > 50  # the data does exercise the ranked path


ON_DUCKDB_AND_POSTGRES = pytest.mark.parametrize(
    "engine",
    [
        pytest.param("duckdb", id="duckdb"),
        pytest.param("postgres", marks=pytest.mark.postgres, id="postgres"),
    ],
)
"""The statement forms compared here are DuckDB's and PostgreSQL's (Spark's are DuckDB's without
its top-n aggregate, compared in the test above)."""

PER_UNIT_QUERIES = [
    *MIXED_QUERIES,
    ("SELECT COUNT(*), SUM(amount) FROM mixed WHERE amount > 1000", None),
    ("SELECT day, flag, code, COUNT(*), AVG(amount) FROM mixed GROUP BY day, flag, code", 1e-6),
    ("SELECT 'all' AS k, day, COUNT(*) FROM mixed GROUP BY 1, day", None),
    # No double read, public keys: DuckDB keeps the over-cap units' rows by ARG_MIN.
    ("SELECT day, flag, COUNT(*) FROM mixed GROUP BY day, flag", None),
    ("SELECT COUNT(*) FROM mixed WHERE code = 'c1' OR code IS NULL", None),
]


@ON_DUCKDB_AND_POSTGRES
def test_aggregating_each_unit_once_answers_as_bounding_the_rows_does(
    engine: str,
    sessions_on: Callable[[str], dict[str, Session]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The main statement that aggregates each unit once gives the answers, bit for bit, of the
    statement that aggregates the bounded rows (:func:`dalenius.sql.emit.bounding.bounded`), for the
    same hash key: units within their caps in one group or several, over either cap, NULL,
    boolean and text keys with and without a public list, a constant key, and no row at all."""
    session = _mixed(sessions_on(engine))
    dialect = session.executor.dialect
    for sql, delta in PER_UNIT_QUERIES:
        plan = session.prepare(sql, 1, delta).plan
        for salt in (17, 1_000_020):
            per_unit = statements.exact_queries(plan, dialect, salt=salt).main
            with monkeypatch.context() as patch:
                patch.setattr(statements, "bounded_aggregate", lambda *a, **k: None)
                rows = statements.exact_queries(plan, dialect, salt=salt).main
            # COUNT(DISTINCT x) does not add up over units: the rows are bounded instead.
            counts_distinct = any(m.kind == "count_distinct" for m in plan.measurements)
            # The units over their caps are marked (__over_caps) or, from cells, kept (__over).
            marks = ("__over_caps", "__over AS MATERIALIZED")
            assert any(m in per_unit for m in marks) is not counts_distinct, per_unit
            assert not any(m in rows for m in marks)
            ours = _canonical(session.executor.fetch(per_unit))
            assert ours == _canonical(session.executor.fetch(rows)), (engine, sql)


DECLARED_QUERIES = [
    "SELECT day, COUNT(*), SUM(amount) FROM mixed GROUP BY day",
    "SELECT flag, day, AVG(amount), VARIANCE(amount) FROM mixed GROUP BY flag, day",
    # No double read, public keys: DuckDB keeps the over-cap units' rows by ARG_MIN.
    "SELECT day, flag, COUNT(*) FROM mixed GROUP BY day, flag",
]


@ON_DUCKDB_AND_POSTGRES
def test_keys_declared_per_unit_aggregate_each_unit_once_and_keep_the_cells_rows(
    engine: str,
    sessions_on: Callable[[str], dict[str, Session]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With every key column declared ``per_unit``, each unit is aggregated once and the units
    in several groups are read again with those over the cap; the exact answers are, bit for bit,
    those of the (unit, group) cells form and of the bounded rows, for the same hash key, on
    ``mixed``, whose units the declaration misdescribes (1 to 4 days each, up to 6 rows)."""
    session = _mixed(sessions_on(engine))
    dialect = session.executor.dialect
    for sql in DECLARED_QUERIES:
        plan = session.prepare(sql, 1).plan
        assert plan.bounding.max_groups >= plan.bounding.max_rows  # the cap no sum needs, lifted
        for salt in (17, 1_000_020):
            cells = statements.exact_queries(plan, dialect, salt=salt).main
            with monkeypatch.context() as patch:
                patch.setattr(statements, "_per_unit_keys", lambda _: True)
                once = statements.exact_queries(plan, dialect, salt=salt).main
                patch.setattr(statements, "bounded_aggregate", lambda *a, **k: None)
                rows = statements.exact_queries(plan, dialect, salt=salt).main
            assert "__over AS MATERIALIZED" in cells and "__over_caps" not in cells
            assert "__over_caps" in once and "__over AS MATERIALIZED" not in once
            ours = _canonical(session.executor.fetch(once))
            assert ours == _canonical(session.executor.fetch(cells)), (engine, sql, salt)
            assert ours == _canonical(session.executor.fetch(rows)), (engine, sql, salt)


SELECTIVE = [
    # amount's bounds are [0, 100]: each WHERE is estimated to keep at most a quarter of the rows.
    "SELECT COUNT(*), SUM(amount) FROM mixed WHERE amount < 10",
    "SELECT day, COUNT(*), SUM(amount) FROM mixed WHERE amount BETWEEN 20 AND 30 GROUP BY day",
    "SELECT flag, AVG(amount) FROM mixed WHERE amount > 90 OR amount < 5 GROUP BY flag",
]


@ON_DUCKDB_AND_POSTGRES
def test_a_selective_where_keeps_its_rows_and_answers_as_reading_them_again(
    engine: str,
    sessions_on: Callable[[str], dict[str, Session]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A WHERE estimated from public bounds to keep few rows has them kept (``MATERIALIZED``) and
    the units over the cap found by counting rows; the exact answers are, bit for bit, those of
    the statement that reads the table again, and of the bounded rows, for several hash keys."""
    session = _mixed(sessions_on(engine))
    dialect = session.executor.dialect
    for sql in SELECTIVE:
        plan = session.prepare(sql, 1).plan
        for salt in (17, 1_000_020):
            kept = statements.exact_queries(plan, dialect, salt=salt).main
            with monkeypatch.context() as patch:
                patch.setattr(statements, "estimated_share", lambda *a: 1)
                again = statements.exact_queries(plan, dialect, salt=salt).main
                patch.setattr(statements, "bounded_aggregate", lambda *a, **k: None)
                rows = statements.exact_queries(plan, dialect, salt=salt).main
            assert "__input AS MATERIALIZED" in kept and "COUNT(*) > 3 AS __over_caps" in kept
            assert "__input AS MATERIALIZED" not in again
            ours = _canonical(session.executor.fetch(kept))
            assert ours == _canonical(session.executor.fetch(again)), (engine, sql, salt)
            assert ours == _canonical(session.executor.fetch(rows)), (engine, sql, salt)


def test_a_top_n_aggregate_keeps_the_rows_the_window_keeps(
    sessions_on: Callable[[str], dict[str, Session]],
) -> None:
    """DuckDB keeps an over-cap unit's first rows by hash with ``ARG_MIN(row, hash, n)``; the
    exact answers are, bit for bit, those of the window that ranks the same rows, for several
    hash keys. A query reading a double keeps the window (its ties are broken by the doubles)."""
    session = _mixed(sessions_on("duckdb"))
    windowed = replace(DUCKDB, top_n_aggregate=False)
    for sql, _ in PER_UNIT_QUERIES[-2:]:
        plan = session.prepare(sql, 1).plan
        for salt in (17, 1_000_020, 77):
            top = statements.exact_queries(plan, DUCKDB, salt=salt).main
            window = statements.exact_queries(plan, windowed, salt=salt).main
            assert "ARG_MIN(" in top and "ROW_NUMBER()" not in top, top
            assert "ARG_MIN(" not in window and "ROW_NUMBER()" in window
            ours = _canonical(session.executor.fetch(top))
            assert ours == _canonical(session.executor.fetch(window)), (sql, salt)
    doubles = session.prepare(PER_UNIT_QUERIES[0][0], 1).plan
    assert "ARG_MIN(" not in statements.exact_queries(doubles, DUCKDB, salt=3).main


def test_spark_keeps_the_split_of_units_for_its_executor_to_evaluate_once(
    sessions_on: Callable[[str], dict[str, Session]],
) -> None:
    """Spark's statement aggregates each unit once, as DuckDB's does, and asks for the split of
    the units within and over their caps to be kept (``MATERIALIZED``): its executor evaluates
    such an expression once (``tests/executors/test_spark.py``), so one read decides each unit.
    Nothing else is kept: each unit's total over its cells is a window beside them, and the list
    of units over their caps is broadcast to the read of their rows. The rows are distributed by
    unit before the cells are aggregated, so the aggregation and the window share one exchange;
    no other engine is asked to.
    """
    session = sessions_on("duckdb")["mixed"]
    for sql, _ in MIXED_QUERIES[:2]:
        plan = session.prepare(sql, 1).plan
        spark = statements.exact_queries(plan, "spark", salt=3).main
        assert spark.count("MATERIALIZED (") - spark.count("NOT MATERIALIZED (") == 1, spark
        assert "__split AS MATERIALIZED (" in spark
        assert "IN (SELECT /*+ BROADCAST(__split) */ __ou FROM __split" in spark
        duckdb = statements.exact_queries(plan, "duckdb", salt=3).main
        assert "BROADCAST" not in duckdb
    cells = session.prepare(MIXED_QUERIES[0][0], 1).plan
    spark_cells = statements.exact_queries(cells, "spark", salt=3).main
    assert "SUM(__p0) OVER (PARTITION BY __u) AS __total" in spark_cells
    distributed = (
        "FROM (SELECT * FROM __input DISTRIBUTE BY `mixed__pid`) AS __d GROUP BY `mixed__pid`, __i0"
    )
    assert spark_cells.count("DISTRIBUTE BY") == 1, spark_cells
    assert distributed in spark_cells, spark_cells
    for engine in ("duckdb", "postgres"):
        assert "DISTRIBUTE BY" not in statements.exact_queries(cells, engine, salt=3).main


# Values at the edges of each canonical form: the extreme BIGINTs, empty and non-ASCII text, the
# separators inside a text, negative zero, NaN, doubles beyond the clamp and below its grid, dates
# before 1970 and at both ends of the calendar, NULLs. (An integer the engine computes in double
# arithmetic is hashed as a double: the queries below group by such keys.)
HASHED_ROWS = [
    ("0", "0.1", "''", "TRUE", "'1970-01-01'"),
    ("-1", "-0.0", "'a|b'", "FALSE", "'1969-12-31'"),
    (str(2**62), "1e300", "'ü'", "NULL", "'2024-02-29'"),
    ("NULL", "-1e300", "'3:x'", "TRUE", "'0001-01-01'"),
    ("7", "1e-300", "NULL", "FALSE", "'9999-12-31'"),
    ("8", "123456.789", "'😀 ǅ'", "TRUE", "NULL"),
    ("9", str(float(2**40 + 1)), "'N'", "TRUE", "'2000-01-01'"),
    ("10", "NULL", "'Ab'", "NULL", "'2000-01-01'"),
    ("11", "'NaN'", "'x'", "TRUE", "'2000-01-01'"),
    ("12", "-5.000001", "' '", "TRUE", "'2000-01-01'"),
    (str(-(2**63)), "2.5", "'x'", "TRUE", "'2000-01-01'"),
    (str(2**63 - 1), "2.5", "'x'", "TRUE", "'2000-01-01'"),
]
HASHED_COLUMNS = [
    ("i", "int", "BIGINT"),
    ("f", "float", "DOUBLE"),
    ("s", "str", "TEXT"),
    ("b", "bool", "BOOLEAN"),
    ("d", "date", "DATE"),
]


def _hashes_of_edge_values(dialect: Dialect) -> str:
    """One row per value set: its hash under each column alone and under all of them."""
    selects = []
    for k, row in enumerate(HASHED_ROWS):
        parts = [exp.alias_(exp.Literal.number(k), "k")]
        for (name, _, sql_type), value in zip(HASHED_COLUMNS, row, strict=True):
            cast = exp.cast(exp.maybe_parse(value), exp.DataType.build(sql_type))
            parts.append(exp.alias_(cast, name))
        selects.append(exp.select(*parts))
    union: exp.Query = selects[0]
    for select in selects[1:]:
        union = exp.union(union, select, distinct=False)
    typed = [(exp.column(name), kind) for name, kind, _ in HASHED_COLUMNS]
    hashes = [exp.alias_(keyed_hash(dialect, 42, [c]), f"h_{c[0].name}") for c in typed]
    hashes.append(exp.alias_(keyed_hash(dialect, 42, typed), "h_all"))
    query = exp.select(exp.column("k"), *hashes).from_(union.subquery("t")).order_by("k")
    return query.sql(dialect.name)


@pytest.mark.parametrize("engine", OTHER_ENGINES)
def test_the_keyed_hash_is_the_same_on_every_engine(
    engine: str, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    reference = sessions_on("duckdb")["mixed"].executor
    other = sessions_on(engine)["mixed"].executor
    want = [tuple(r) for r in reference.fetch(_hashes_of_edge_values(reference.dialect))]
    got = [tuple(r) for r in other.fetch(_hashes_of_edge_values(other.dialect))]
    assert len(want) == len(HASHED_ROWS)
    assert len({r[-1] for r in want}) == len(HASHED_ROWS)  # no two value sets hash alike
    assert got == want


@pytest.mark.parametrize("engine", OTHER_ENGINES)
def test_units_over_their_caps_keep_the_same_rows_on_every_engine(
    engine: str, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    """For the same hash key every engine keeps the same groups and rows of each unit over its
    caps, so the exact answers agree bit for bit (``mixed``: over 50 such units, text, boolean
    and NULL keys, a double measured; ``heavy``: one unit of 140 rows)."""
    cases = [("mixed", sql, delta) for sql, delta in PER_UNIT_QUERIES]
    # Integer keys the engine computes as doubles (up to three per person, over the group cap of
    # two): an expression, and a field a subquery projects.
    band = "CASE WHEN amount > 100 THEN 20 WHEN amount > 50 THEN 10 ELSE 0 END + pid % 2"
    cases += [
        ("mixed", f"SELECT {band} AS b, COUNT(*) FROM mixed GROUP BY b", 1e-6),
        (
            "mixed",
            f"SELECT b, COUNT(*), SUM(amount) FROM (SELECT pid, amount, {band} AS b FROM mixed) "
            "AS s GROUP BY b",
            1e-6,
        ),
        # BigQuery's form: per-person parts per day (a count, a sum of doubles), one day kept.
        (
            "mixed",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, "
            "max_groups_contributed = 1) day, COUNT(*), "
            "SUM(amount, contribution_bounds_per_group => (0, 100)) FROM mixed GROUP BY day",
            1e-6,
        ),
    ]
    for dataset, sql, delta in cases:
        same_exact_units(sessions_on("duckdb")[dataset], sessions_on(engine)[dataset], sql, delta)
