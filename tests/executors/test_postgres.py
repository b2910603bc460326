"""The PostgreSQL executor: typed reads, refusals, a read-only session, data versions, and
floating-point arithmetic that never raises."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from tests.conformance.engines import POSTGRES_ADMIN_URL

from dalenius.core.catalog import Catalog, parse_catalog
from dalenius.core.errors import CatalogError, ExecutionError
from dalenius.executors.pg_functions import FUNCTIONS
from dalenius.executors.postgres import PostgresExecutor, redact
from dalenius.sql.emit.dialects import POSTGRES_FUNCTIONS

pytestmark = pytest.mark.postgres


def catalog(schema: str, table: str, columns: str, **options: str) -> Catalog:
    given = ", ".join(f'{k} = "{v}"' for k, v in options.items())
    options_text = f", options = {{ {given} }}" if options else ""
    return parse_catalog(
        f'[tables.t]\nsource = {{ postgres = "{POSTGRES_ADMIN_URL}", table = "{schema}.{table}"'
        f'{options_text} }}\nprivacy_unit = "row"\n\n[tables.t.columns]\n{columns}'
    )


@pytest.fixture(scope="module")
def typed(pg_admin: Any, pg_schema: str) -> str:
    """A table with one column of every type the executor reads."""
    pg_admin.execute(
        f'CREATE TABLE "{pg_schema}".typed (a smallint, b integer, c bigint, f real, '
        "g double precision, h numeric(12, 3), s varchar(10), ch char(3), ok boolean, "
        "day date, ts timestamp, tz timestamptz)"
    )
    pg_admin.execute(
        f"INSERT INTO \"{pg_schema}\".typed VALUES (1, 2, 3, 0.5, 2.25, 2.5, 'x', 'ab', true, "
        "'2021-02-03', '2021-02-03 23:59:00', now()), "
        "(NULL, NULL, NULL, 'NaN', '-Infinity', -2.5, '', 'c', NULL, NULL, NULL, NULL)"
    )
    return "typed"


def test_typed_columns_are_read_exactly(pg_schema: str, typed: str) -> None:
    columns = (
        'a = "int"\nb = "int"\nc = "int"\nf = "float"\ng = "float"\nh = "int"\ns = "str"\n'
        'ch = "str"\nok = "bool"\nday = "date"\nts = "date"\n'
    )
    with PostgresExecutor(catalog(pg_schema, typed, columns)) as ex:
        rows = ex.fetch(
            "SELECT a, b, c, f, g, h, s, ch, ok, CAST(day AS TEXT), CAST(ts AS TEXT) "
            'FROM "t" ORDER BY a'
        )
    assert rows[0] == (1, 2, 3, 0.5, 2.25, 3, "x", "ab", True, "2021-02-03", "2021-02-03")
    # NaN is read as NULL on every engine (the totality rule); infinities are kept.
    assert rows[1][3] is None and rows[1][4] == -math.inf
    # numeric -2.5 rounds half away from zero; '' is NULL, as DuckDB reads empty text.
    assert rows[1][5] == -3 and rows[1][6] is None


@pytest.mark.parametrize(
    ("columns", "column", "pg_type"),
    [
        ('g = "int"', "g", "float8"),
        ('ok = "int"', "ok", "bool"),
        ('g = "str"', "g", "float8"),
        ('tz = "date"', "tz", "timestamptz"),
        ('c = "bool"', "c", "int8"),
    ],
)
def test_a_type_that_would_need_a_guess_is_refused(
    pg_schema: str, typed: str, columns: str, column: str, pg_type: str
) -> None:
    with pytest.raises(CatalogError) as info:
        PostgresExecutor(catalog(pg_schema, typed, columns))
    message = str(info.value)
    assert f"table 't', column '{column}'" in message
    assert pg_type in message
    assert info.value.fix


def test_missing_tables_and_columns_are_named(pg_schema: str, typed: str) -> None:
    with pytest.raises(CatalogError, match="has no table"):
        PostgresExecutor(catalog(pg_schema, "nosuch", 'a = "int"'))
    with pytest.raises(CatalogError, match="has no column 'zz'") as info:
        PostgresExecutor(catalog(pg_schema, typed, 'zz = "int"'))
    assert "a, b, c" in str(info.value)


def test_a_catalog_names_one_database() -> None:
    text = (
        '[tables.a]\nsource = { postgres = "postgresql://h1/db", table = "a" }\n'
        'privacy_unit = "row"\ncolumns = { x = "int" }\n'
        '[tables.b]\nsource = { postgres = "postgresql://h2/db", table = "b" }\n'
        'privacy_unit = "row"\ncolumns = { x = "int" }\n'
    )
    with pytest.raises(CatalogError, match="2 different PostgreSQL databases"):
        PostgresExecutor(parse_catalog(text))


def test_an_unreachable_server_is_an_execution_error_without_the_password() -> None:
    text = (
        '[tables.a]\nsource = { postgres = "postgresql://ann:s3cret@127.0.0.1:1/db", '
        'table = "a" }\nprivacy_unit = "row"\ncolumns = { x = "int" }\n'
    )
    with pytest.raises(ExecutionError) as info:
        PostgresExecutor(parse_catalog(text))
    assert "s3cret" not in str(info.value)
    assert "ann:***@127.0.0.1:1" in str(info.value)
    assert redact("postgresql://h/db") == "postgresql://h/db"


def test_the_session_is_read_only(pg_admin: Any, pg_schema: str, typed: str) -> None:
    with PostgresExecutor(catalog(pg_schema, typed, 'c = "int"')) as ex:
        with pytest.raises(ExecutionError, match="read-only"):
            ex.fetch(f'CREATE TABLE "{pg_schema}".intruder (x int)')
        assert ex.fetch('SELECT SUM("c") FROM "t"') == [(3,)]
    found = pg_admin.execute(f"SELECT to_regclass('\"{pg_schema}\".intruder')").fetchone()
    assert found == (None,)


def test_only_declared_columns_are_visible(pg_schema: str, typed: str) -> None:
    with (
        PostgresExecutor(catalog(pg_schema, typed, 'c = "int"')) as ex,
        pytest.raises(ExecutionError, match="does not exist"),
    ):
        ex.fetch('SELECT "g" FROM "t"')


def test_a_dropped_connection_is_reopened(pg_admin: Any, pg_schema: str, typed: str) -> None:
    with PostgresExecutor(catalog(pg_schema, typed, 'c = "int"')) as ex:
        (pid,) = ex.fetch("SELECT pg_backend_pid()")[0]
        pg_admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert ex.fetch('SELECT SUM("c") FROM "t"') == [(3,)]
        assert ex.fetch("SELECT pg_backend_pid()")[0][0] != pid


def test_scan_versions_change_with_every_write(pg_admin: Any, pg_schema: str) -> None:
    pg_admin.execute(f'CREATE TABLE "{pg_schema}".v (x int)')
    pg_admin.execute(f'INSERT INTO "{pg_schema}".v VALUES (0)')
    cat = catalog(pg_schema, "v", 'x = "int"', data_version="scan")
    with PostgresExecutor(cat) as ex:
        table = cat.tables[0]
        seen = {ex.data_version(table)}
        assert ex.data_version(table) in seen, "no write, same version"
        writes = (
            "INSERT INTO {t} VALUES (1)",
            "UPDATE {t} SET x = 2 WHERE x = 1",
            "DELETE FROM {t} WHERE x = 0",
        )
        for write in writes:
            pg_admin.execute(write.format(t=f'"{pg_schema}".v'))
            version = ex.data_version(table)
            assert version not in seen, write
            seen.add(version)


def test_stats_versions_are_stable_and_see_a_truncate(pg_admin: Any, pg_schema: str) -> None:
    pg_admin.execute(f'CREATE TABLE "{pg_schema}".w (x int)')
    pg_admin.execute(f'INSERT INTO "{pg_schema}".w VALUES (1)')
    cat = catalog(pg_schema, "w", 'x = "int"')
    with PostgresExecutor(cat) as ex:
        table = cat.tables[0]
        first = ex.data_version(table)
        assert ex.data_version(table) == first
        pg_admin.execute(f'TRUNCATE "{pg_schema}".w')  # a new storage file, at once
        assert ex.data_version(table) != first


def test_a_bad_version_mode_is_refused(pg_schema: str, typed: str) -> None:
    with pytest.raises(CatalogError, match="data_version must be one of stats, scan"):
        PostgresExecutor(catalog(pg_schema, typed, 'c = "int"', data_version="fast"))


def test_every_function_the_dialect_calls_is_defined() -> None:
    assert set(POSTGRES_FUNCTIONS) <= set(FUNCTIONS)


EXTREMES = [
    0.0, -0.0, 1.0, -1.5, 3.0, 0.1, 1e308, -1e308, 1.7976931348623157e308, 5e-324, -5e-324,
    1e-200, 1e200, 1e-160, 1e160, 2.0**-537, 2.0**-538, 2.2250738585072014e-308, 1e-308,
    math.inf, -math.inf, math.nan,
]  # fmt: skip


def _literal(x: float) -> str:
    text = (
        "NaN"
        if math.isnan(x)
        else ("Infinity" if x > 0 else "-Infinity")
        if math.isinf(x)
        else repr(x)
    )
    return f"CAST('{text}' AS float8)"


def test_double_arithmetic_gives_ieee_results_and_never_raises(pg_schema: str, typed: str) -> None:
    # PostgreSQL itself raises on overflow and underflow; an error that depended on one row's
    # value would reveal it. Every pair of extremes, for + - * /, against numpy's IEEE result.
    ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
    pairs = [(a, b) for a, b in itertools.product(EXTREMES, EXTREMES)]
    wrong = []
    with PostgresExecutor(catalog(pg_schema, typed, 'c = "int"')) as ex, np.errstate(all="ignore"):
        for name, op in ops.items():
            calls = [f"pg_temp.dalenius_{name}({_literal(a)}, {_literal(b)})" for a, b in pairs]
            got = ex.fetch("SELECT " + ", ".join(calls))[0]
            for (a, b), value in zip(pairs, got, strict=True):
                if name == "div" and b == 0:
                    expected: float | None = None  # the SQL divides by NULLIF(b, 0)
                else:
                    expected = float(op(np.float64(a), np.float64(b)))
                same = value == expected or (
                    expected is not None and math.isnan(expected) and math.isnan(value)
                )
                if not same:
                    wrong.append((name, a, b, value, expected))
    assert not wrong, wrong


def test_round_and_modulo_of_doubles(pg_schema: str, typed: str) -> None:
    with PostgresExecutor(catalog(pg_schema, typed, 'c = "int"')) as ex:
        row = ex.fetch(
            "SELECT pg_temp.dalenius_round(2.5, 0), pg_temp.dalenius_round(-2.5, 0), "
            "pg_temp.dalenius_round(1234.5678, -2), pg_temp.dalenius_round(CAST('NaN' AS float8), 1), "
            "pg_temp.dalenius_mod(5.5, 2), pg_temp.dalenius_mod(-5.5, 2), "
            "pg_temp.dalenius_mod(5, CAST('Infinity' AS float8)), pg_temp.dalenius_mod(5, 0), "
            "pg_temp.dalenius_round(1.7976931348623157e308, -300)"
        )[0]
    assert row[:3] == (3.0, -3.0, 1200.0)
    assert math.isnan(row[3])
    assert row[4:8] == (1.5, -1.5, 5.0, None)
    assert row[8] == 1.79769313e308  # rounded in NUMERIC from the 15-digit decimal form
