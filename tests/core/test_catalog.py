from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.core.catalog import load_catalog, parse_catalog
from dalenius.core.errors import CatalogError
from dalenius.core.unit import IdUnit, RowUnit


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "data.csv").write_text("age,sex,pid\n30,F,1\n")
    path = tmp_path / "cat.toml"
    path.write_text(text)
    return path


def edited(old: str, new: str, table: str) -> str:
    """The GOOD catalog with one edit (a renamed table renames its columns section too)."""
    text = GOOD.replace(old, new)
    if old.startswith("[tables.people]"):
        text = text.replace("[tables.people.columns]", f"[tables.{table}.columns]")
    return text


GOOD = """
[dataset]
name = "survey"

[tables.people]
source = { csv = "data.csv" }
privacy_unit = "row"

[tables.people.columns]
age = { type = "int", bounds = [0, 100], nullable = false }
sex = { type = "str", keys = ["F", "M"] }
"""


def test_loads_a_valid_catalog(tmp_path: Path) -> None:
    cat = load_catalog(write(tmp_path, GOOD))
    assert cat.name == "survey"
    table = cat.table("PEOPLE")
    assert table is not None
    assert table.privacy_unit == RowUnit()
    age = table.column("age")
    assert age is not None and age.bounds == (Fraction(0), Fraction(100)) and not age.nullable
    assert table.source.location == str(tmp_path / "data.csv")


def test_id_unit_with_caps(tmp_path: Path) -> None:
    text = GOOD.replace(
        'privacy_unit = "row"', 'privacy_unit = { column = "pid", max_rows = 5, max_groups = 2 }'
    ).replace("sex = {", 'pid = { type = "int" }\nsex = {')
    table = load_catalog(write(tmp_path, text)).tables[0]
    assert table.privacy_unit == IdUnit("pid", 5, 2)


def test_per_unit_is_declared_on_a_private_table_only(tmp_path: Path) -> None:
    text = GOOD.replace('keys = ["F", "M"]', 'keys = ["F", "M"], per_unit = true')
    people = load_catalog(write(tmp_path, text)).tables[0]
    sex, age = people.column("sex"), people.column("age")
    assert sex is not None and age is not None and sex.per_unit and not age.per_unit
    public = text.replace('privacy_unit = "row"', "public = true")
    with pytest.raises(CatalogError, match="this table is public") as info:
        load_catalog(write(tmp_path, public))
    assert (info.value.table, info.value.column) == ("people", "sex")
    assert "remove per_unit" in str(info.value)


def test_dataset_name_defaults_to_file_stem(tmp_path: Path) -> None:
    text = GOOD.replace('[dataset]\nname = "survey"\n', "")
    assert load_catalog(write(tmp_path, text)).name == "cat"


@pytest.mark.parametrize(
    ("old", "new", "table", "column", "fragment"),
    [
        ("bounds = [0, 100]", "bounds = [100, 0]", "people", "age", "lower bound 100 is above"),
        ("bounds = [0, 100]", "bounds = [0]", "people", "age", "two numbers"),
        ("bounds = [0, 100]", 'bounds = ["a", 1]', "people", "age", "must be numbers"),
        ("bounds = [0, 100]", "bounds = [0, inf]", "people", "age", "finite"),
        ("bounds = [0, 100]", "bounds = [0.5, 100]", "people", "age", "integers"),
        ('type = "int"', 'type = "integer"', "people", "age", "type must be one of"),
        ('keys = ["F", "M"]', 'keys = ["F", "F"]', "people", "sex", "listed twice"),
        ('keys = ["F", "M"]', 'keys = ["F", 1]', "people", "sex", "does not match"),
        ('keys = ["F", "M"]', "keys = []", "people", "sex", "non-empty"),
        ('keys = ["F", "M"]', 'keys = ["F", "M"], bounds = [0, 1]', "people", "sex", "numeric"),
        ("nullable = false", "bound = 3", "people", "age", "unknown key"),
        ('keys = ["F", "M"]', 'keys = ["F", "M"], per_unit = 1', "people", "sex", "true or false"),
        ('privacy_unit = "row"', 'privacy_unit = "person"', "people", None, "privacy_unit"),
        (
            'privacy_unit = "row"',
            'privacy_unit = { column = "nope" }',
            "people",
            None,
            "not a declared column",
        ),
        ('privacy_unit = "row"', "", "people", None, "no privacy_unit"),
        (
            'source = { csv = "data.csv" }',
            'source = { csv = "missing.csv" }',
            "people",
            None,
            "does not exist",
        ),
        (
            'source = { csv = "data.csv" }',
            'source = { excel = "data.xls" }',
            "people",
            None,
            "exactly one of",
        ),
        (
            'source = { csv = "data.csv" }',
            'source = { duckdb = "data.csv" }',
            "people",
            None,
            "must name the table",
        ),
        ("[tables.people]", "[tables.bad-name]", "bad-name", None, "plain SQL identifier"),
    ],
)
def test_validation_errors_name_file_table_column(
    tmp_path: Path, old: str, new: str, table: str, column: str | None, fragment: str
) -> None:
    path = write(tmp_path, edited(old, new, table))
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    err = info.value
    assert fragment in str(err)
    assert err.file == str(path)
    assert err.table == table
    assert err.column == column
    assert str(path) in str(err)


def test_missing_file_and_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="does not exist"):
        load_catalog(tmp_path / "nope.toml")
    with pytest.raises(CatalogError, match="not valid TOML"):
        parse_catalog("[tables\n", file="x.toml")
    with pytest.raises(CatalogError, match="declares no tables"):
        parse_catalog("[dataset]\nname='x'\n")


def test_unknown_sections_and_keys_are_refused(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="unknown top-level"):
        load_catalog(write(tmp_path, GOOD + "\n[extra]\nx = 1\n"))
    with pytest.raises(CatalogError, match="unknown key"):
        load_catalog(
            write(
                tmp_path, GOOD.replace('privacy_unit = "row"', 'privacy_unit = "row"\nowner = "me"')
            )
        )


def test_adult_fixture_loads(adult_catalog_path: Path) -> None:
    cat = load_catalog(adult_catalog_path)
    assert cat.table_names == ("adult", "edu_levels")
    assert cat.tables[1].public
    assert cat.tables[0].column("hours_per_week") is not None
