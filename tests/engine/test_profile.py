"""The custodian's catalog check: what the declarations will clip, drop or misread, measured."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dalenius.cli.main import main
from dalenius.core.catalog import Catalog, load_catalog, parse_catalog
from dalenius.engine.profile import profile_catalog


@pytest.fixture(scope="module")
def wrong_catalog(tmp_path_factory: pytest.TempPathFactory, adult_catalog_path: Path) -> Path:
    """The Adult fixture with a key list in the wrong case and bounds far too tight."""
    text = adult_catalog_path.read_text()
    for old, new in (
        ('keys = ["Female", "Male", "Unknown"]', 'keys = ["female", "male"]'),
        ("bounds = [1.5, 60.25]", "bounds = [0, 10]"),
        ("[tables.adult]\n", "[tables.adult]\nmax_row_count = 30000\n"),
    ):
        assert old in text
        text = text.replace(old, new)
    text = text.replace('"../../../shared', f'"{adult_catalog_path.parent}/../../../shared')
    text = text.replace('"edu_levels.csv"', f'"{adult_catalog_path.parent}/edu_levels.csv"')
    path = tmp_path_factory.mktemp("check") / "wrong.toml"
    path.write_text(text)
    return path


def test_wrong_keys_and_bounds_on_adult(wrong_catalog: Path, shared_data: Path) -> None:
    data = pd.read_csv(shared_data / "adult.csv")
    (adult, lookup) = profile_catalog(load_catalog(wrong_catalog))
    assert adult.rows == len(data) > 30000
    sex = next(c for c in adult.columns if c.name == "sex")
    assert sex.outside_keys == sex.case_only == len(data)
    assert sex.examples == tuple(
        (str(k), int(n)) for k, n in data.sex.value_counts().sort_index(ascending=False).items()
    )
    hours = next(c for c in adult.columns if c.name == "hours_per_week")
    assert (hours.below, hours.above) == (0, int((data.hours_per_week > 10).sum()))
    workclass = next(c for c in adult.columns if c.name == "workclass")
    assert workclass.nulls == int(data.workclass.isna().sum()) > 0
    text = "\n".join(adult.findings)
    assert (
        "column 'sex': 32,561 of 32,561 rows (100.0%) hold a value outside the declared keys"
        in text
    )
    assert "but for upper/lower case" in text
    assert "above the upper bound 10: clipped" in text
    assert "above the declared max_row_count 30,000" in text
    assert lookup.findings == ()


def test_cli_prints_what_will_be_clipped_or_dropped(
    wrong_catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["catalog", "check", str(wrong_catalog)]) == 0
    out = capsys.readouterr().out
    words = " ".join(out.split())  # the findings wrap at the terminal's width
    assert "Table adult: 32,561 rows" in out
    assert "outside the declared keys" in words and "upper/lower case" in words
    assert "\x1b[" not in out  # no colour codes when the output is not a terminal
    assert main(["catalog", "check", "--strict", "--json", str(wrong_catalog)]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["tables"][0]["columns"][9]["outside_keys"] == 32561


def test_unit_caps_nulls_and_unreadable_values(tmp_path: Path) -> None:
    (tmp_path / "v.csv").write_text(
        "pid,n,kind\n1,5,a\n1,n/a,b\n1,7,c\n2,1,a\n,2,a\n3,x,A\n3,1,a\n4,2,b,extra\n"
    )
    catalog = parse_catalog(
        '[tables.v]\nsource = { csv = "v.csv" }\n'
        'privacy_unit = { column = "pid", max_rows = 2, max_groups = 1 }\n'
        "[tables.v.columns]\n"
        'pid = "int"\nn = { type = "int", bounds = [0, 6], nullable = false }\n'
        'kind = { type = "str", keys = ["a", "b"] }\n',
        base_dir=tmp_path,
    )
    (table,) = profile_catalog(catalog)
    assert table.rows == 7 and table.skipped_lines == 1
    n = table.columns[1]
    assert (n.unreadable, n.nulls, n.above) == (2, 2, 1)
    kind = table.columns[2]
    assert (kind.outside_keys, kind.case_only, kind.examples) == (2, 1, (("A", 1), ("c", 1)))
    assert kind.over_groups == 2  # pid 1 holds a, b (c is outside the keys); pid 3 holds a, A
    assert table.unit is not None
    assert {
        k: table.unit[k] for k in ("people", "people_over_rows", "rows_dropped", "most_rows")
    } == {
        "people": 3,
        "people_over_rows": 1,
        "rows_dropped": 1,
        "most_rows": 3,
    }
    assert table.unit["rows_without_id"] == 1
    text = "\n".join(table.findings)
    for fragment in (
        "1 CSV line(s) could not be read",
        "2 of 7 rows (28.6%) do not read as int",
        "declared nullable = false",
        "1 of 3 people have more than max_rows = 2 rows (at most 3)",
        "have no id (NULL) and are never counted",
        "2 people hold more than max_groups = 1",
    ):
        assert fragment in text


def test_an_in_memory_table_is_checked_too() -> None:
    frame = pd.DataFrame({"age": [10, 20, 200]})
    catalog = Catalog.from_dict(
        {
            "tables": {
                "t": {
                    "source": frame,
                    "privacy_unit": "row",
                    "columns": {"age": {"type": "int", "bounds": [0, 100]}},
                }
            }
        }
    )
    (table,) = profile_catalog(catalog)
    assert table.columns[0].above == 1 and table.skipped_lines is None


@pytest.mark.postgres
def test_postgres_gives_the_same_profile_as_duckdb() -> None:
    from tests.conformance.engines import POSTGRES_ADMIN_URL, connect_admin, fresh_schema

    rows = [(1, 5, "a"), (1, 9, "B"), (1, 7, "c"), (2, None, "a"), (None, 2, "b"), (3, -1, "A")]
    schema = fresh_schema()
    admin = connect_admin()
    admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        admin.execute(f'CREATE TABLE "{schema}".v (pid bigint, n bigint, kind text)')
        with admin.cursor() as cur:
            cur.executemany(f'INSERT INTO "{schema}".v VALUES (%s, %s, %s)', rows)
        table = {
            "privacy_unit": {"column": "pid", "max_rows": 2, "max_groups": 1},
            "columns": {
                "pid": "int",
                "n": {"type": "int", "bounds": [0, 6]},
                "kind": {"type": "str", "keys": ["a", "b"]},
            },
        }
        in_pg = Catalog.from_dict(
            {
                "tables": {
                    "v": {
                        **table,
                        "source": {"postgres": POSTGRES_ADMIN_URL, "table": f"{schema}.v"},
                    }
                }
            }
        )
        frame = pd.DataFrame(rows, columns=["pid", "n", "kind"])
        in_duckdb = Catalog.from_dict({"tables": {"v": {**table, "source": frame}}})
        (pg,) = profile_catalog(in_pg)
        (duck,) = profile_catalog(in_duckdb)
    finally:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        admin.close()
    assert pg.findings == duck.findings and pg.unit == duck.unit
    assert [
        (c.nulls, c.below, c.above, c.outside_keys, c.case_only, c.examples) for c in pg.columns
    ] == [
        (c.nulls, c.below, c.above, c.outside_keys, c.case_only, c.examples) for c in duck.columns
    ]
    assert pg.columns[2].examples == (("A", 1), ("B", 1), ("c", 1))
