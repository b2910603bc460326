"""The public shape of the census tables: Arrow schemas, bounds, key lists and the catalog TOML.

Bounds and key lists are part of the DP mechanism and must be public, so they are fixed here from
the model's vocabularies, never read off generated data. The catalog written next to the data
files is built from the same declarations as the Arrow schemas, so the two cannot drift apart.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass

import pyarrow as pa

from dalenius.datasets import vocab

REFERENCE_DATE = datetime.date(2024, 1, 1)
"""The day on which ``age`` is each person's age in whole years, given ``date_of_birth``."""

MAX_AGE = 100
MAX_HOURS = 99
MAX_INCOME = 500_000
MAX_VISITS = 5
MAX_VISIT_MINUTES = 240

CATALOG_FILE = "census.toml"

PEOPLE_SCHEMA = pa.schema(
    [
        pa.field("person_id", pa.int64(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("date_of_birth", pa.date32(), nullable=False),
        pa.field("zip", pa.string(), nullable=False),
        pa.field("state", pa.string(), nullable=False),
        pa.field("sex", pa.string(), nullable=False),
        pa.field("age", pa.int64(), nullable=False),
        pa.field("education", pa.string(), nullable=False),
        pa.field("occupation", pa.string(), nullable=False),
        pa.field("hours_per_week", pa.int64(), nullable=False),
        pa.field("income", pa.int64(), nullable=False),
        pa.field("married", pa.bool_(), nullable=False),
    ]
)
"""Columns and Arrow types of the ``people`` table: one row per person."""

VISITS_SCHEMA = pa.schema(
    [
        pa.field("visit_id", pa.int64(), nullable=False),
        pa.field("person_id", pa.int64(), nullable=False),
        pa.field("visit_date", pa.date32(), nullable=False),
        pa.field("duration_minutes", pa.int64(), nullable=False),
        pa.field("age", pa.int64(), nullable=False),
        pa.field("education", pa.string(), nullable=False),
        pa.field("state", pa.string(), nullable=False),
        pa.field("zip", pa.string(), nullable=False),
        pa.field("hours_per_week", pa.int64(), nullable=False),
        pa.field("income", pa.int64(), nullable=False),
    ]
)
"""Columns and Arrow types of the ``visits`` table: 1 to 5 rows per person."""

PERSON_ATTRIBUTES = ("age", "education", "state", "zip", "hours_per_week", "income")
"""The person's columns that every visit repeats (besides ``person_id``)."""


@dataclass(frozen=True)
class ColumnSpec:
    """Public metadata of one column, as the catalog declares it.

    Attributes:
        name: the column name, as in the Arrow schemas.
        type: the catalog type (``int``, ``str``, ``bool`` or ``date``).
        description: one sentence for people reading the catalog.
        bounds: public clipping range of a numeric column.
        keys: public list of the values of a categorical column.
    """

    name: str
    type: str
    description: str
    bounds: tuple[int, int] | None = None
    keys: tuple[str, ...] | tuple[bool, ...] | None = None


COLUMNS: dict[str, ColumnSpec] = {
    spec.name: spec
    for spec in (
        ColumnSpec("person_id", "int", "Identifier of the person (1..n)."),
        ColumnSpec("name", "str", "Given name and surname: a direct identifier, so no keys."),
        ColumnSpec("date_of_birth", "date", "Date of birth: a quasi-identifier, so no keys."),
        ColumnSpec("zip", "str", "5-digit ZIP code: a quasi-identifier, so no keys."),
        ColumnSpec("state", "str", "US state postal code.", keys=vocab.STATE_CODES),
        ColumnSpec("sex", "str", "Female or Male.", keys=vocab.SEXES),
        ColumnSpec("age", "int", f"Age in whole years on {REFERENCE_DATE}.", bounds=(0, MAX_AGE)),
        ColumnSpec(
            "education", "str", "Highest schooling (UCI Adult levels).", keys=vocab.EDUCATION
        ),
        ColumnSpec(
            "occupation", "str", "UCI Adult occupation, or Not-working.", keys=vocab.OCCUPATIONS
        ),
        ColumnSpec("hours_per_week", "int", "Usual hours worked a week.", bounds=(0, MAX_HOURS)),
        ColumnSpec("income", "int", "Yearly income in dollars.", bounds=(0, MAX_INCOME)),
        ColumnSpec("married", "bool", "Currently married.", keys=(False, True)),
        ColumnSpec("visit_id", "int", "Identifier of the visit."),
        ColumnSpec("visit_date", "date", f"Day of the visit, in {REFERENCE_DATE.year - 1}."),
        ColumnSpec(
            "duration_minutes",
            "int",
            "Length of the visit in minutes.",
            bounds=(0, MAX_VISIT_MINUTES),
        ),
    )
}
"""Catalog metadata of every column of both tables, by name."""


def _toml(value: object) -> str:
    """A TOML literal for a string, bool, int or tuple of them (a JSON string is a TOML string)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))


def _column_line(spec: ColumnSpec, *, per_unit: bool = False) -> str:
    fields = [f"type = {_toml(spec.type)}"]
    if spec.bounds is not None:
        fields.append(f"bounds = {_toml(spec.bounds)}")
    if spec.keys is not None:
        fields.append(f"keys = {_toml(spec.keys)}")
    # The generator never writes a NULL, and saying so lets COUNT(col) equal COUNT(*).
    fields.append("nullable = false")
    if per_unit:
        fields.append("per_unit = true")
    fields.append(f"description = {_toml(spec.description)}")
    return f"{spec.name} = {{ {', '.join(fields)} }}"


def catalog_text(
    name: str, description: str, source: str = "parquet", *, person_unit: bool = True
) -> str:
    """The catalog TOML of the ``people`` and ``visits`` tables, read from ``people.<source>`` etc.

    ``visits`` protects each ``person_id`` with at most :data:`MAX_VISITS` rows and one group per
    person. ``people`` (one row per person) declares the same unit, ``person_id`` with one row,
    so that the two private tables can be joined on the person (a private ⋈ private join needs
    both sides to name the same unit); with ``person_unit=False`` it protects each row instead,
    which is the same person but cannot be joined (the engines benchmark keeps that form).

    Args:
        name: the dataset name.
        description: one or two sentences for the ``[dataset]`` section.
        source: ``"parquet"`` or ``"csv"``: which files the tables are read from.
        person_unit: whether ``people`` declares the person (``person_id``) as its unit.

    Example:
        >>> import tomllib
        >>> doc = tomllib.loads(catalog_text("census", "A synthetic demo."))
        >>> doc["tables"]["visits"]["privacy_unit"]
        {'column': 'person_id', 'max_rows': 5, 'max_groups': 1}
        >>> doc["tables"]["people"]["privacy_unit"]
        {'column': 'person_id', 'max_rows': 1, 'max_groups': 1}
        >>> doc["tables"]["people"]["columns"]["income"]["bounds"]
        [0, 500000]
    """
    lines = [
        "# Written by dalenius.datasets.census. Everything here is public: bounds and key lists",
        "# are fixed by the generator's model, never read off the data.",
        "",
        "[dataset]",
        f"name = {_toml(name)}",
        f"description = {_toml(description)}",
        "",
        "[tables.people]",
        f"source = {{ {source} = {_toml('people.' + source)} }}",
        (
            'privacy_unit = { column = "person_id", max_rows = 1, max_groups = 1 }'
            if person_unit
            else 'privacy_unit = "row"'
        ),
        'description = "One row per synthetic person; the person is the privacy unit."',
        "",
        "[tables.people.columns]",
        *(_column_line(COLUMNS[field.name]) for field in PEOPLE_SCHEMA),
        "",
        "[tables.visits]",
        f"source = {{ {source} = {_toml('visits.' + source)} }}",
        f'privacy_unit = {{ column = "person_id", max_rows = {MAX_VISITS}, max_groups = 1 }}',
        f'description = "1 to {MAX_VISITS} visits per person; the person is the privacy unit."',
        "",
        "[tables.visits.columns]",
        # A visit repeats its person's attributes: one value per person (per_unit).
        *(
            _column_line(COLUMNS[field.name], per_unit=field.name in PERSON_ATTRIBUTES)
            for field in VISITS_SCHEMA
        ),
        "",
    ]
    return "\n".join(lines)
