"""Seeded synthetic people for attack experiments: the data a custodian would hold.

An experiment needs a database whose secrets it knows, to score the attacker. This module makes
one: the demo census's synthetic people (:func:`dalenius.datasets.generate_people`: name, date of
birth, ZIP, sex, age, income, ...) plus two columns the course's stories use — ``height_cm`` (the
"John is 10 cm taller than the average woman" example) and ``secret``, a sensitive 0/1 attribute
(a diagnosis) that differencing, averaging and reconstruction attacks try to learn — written as a
CSV file with a Dalenius catalog beside it.

The people are drawn from a *seeded* generator so that an experiment can be repeated; that
generator makes data only. Noise, in every target, comes from the operating system's generator
(:func:`dalenius.core.rng.system_random`), never from here.

This module is the experimenter's side: it may read the rows it wrote (to score an attack), the
attacks themselves may not (they see only :mod:`dalenius.attacks.targets`).

Example:
    >>> import tempfile, pathlib
    >>> people = make_people(50, seed=7)
    >>> people.num_rows, people.column_names[-2:]
    (50, ['height_cm', 'secret'])
    >>> db = write_population(people, pathlib.Path(tempfile.mkdtemp()))
    >>> db.catalog.table_names
    ('people',)
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.errors import ConfigurationError
from dalenius.datasets import generate_people
from dalenius.datasets.sampling import generator
from dalenius.datasets.schema import MAX_AGE, MAX_INCOME

TABLE = "people"
"""The table every attack-lab catalog holds."""

COLUMNS = (
    "person_id",
    "name",
    "date_of_birth",
    "zip",
    "sex",
    "age",
    "income",
    "height_cm",
    "secret",
)
"""The columns written, in order (a subset of the census's people plus the two added ones)."""

HEIGHT_BOUNDS = (130, 210)
"""Public clipping bounds of ``height_cm`` (whole centimetres)."""

_STREAM = 0xA77AC
"""The seeded stream of the added columns, apart from the census generator's own streams."""

_MEAN_HEIGHT = {"Female": 163.0, "Male": 177.0}
_SD_HEIGHT = 7.0


def make_people(n: int, *, seed: int, secret_rate: float = 0.5) -> pa.Table:
    """``n`` synthetic people with a height and a sensitive 0/1 ``secret`` (seeded: data only).

    Args:
        n: number of people (at least 1).
        seed: the same seed gives the same people.
        secret_rate: the share of people whose ``secret`` is 1 (each drawn independently).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigurationError(f"n must be a whole number >= 1, got {n!r}.", fix="use n=200.")
    if not 0 <= secret_rate <= 1:
        raise ConfigurationError(
            f"secret_rate must be in [0, 1], got {secret_rate!r}.", fix="use 0.5."
        )
    census = generate_people(n, seed=seed)
    rng = generator(seed, _STREAM)
    mean = np.where(pc.equal(census.column("sex"), "Female").to_numpy(), *_MEAN_HEIGHT.values())
    height = np.clip(np.rint(rng.normal(mean, _SD_HEIGHT)), *HEIGHT_BOUNDS).astype(np.int64)
    secret = (rng.random(n) < secret_rate).astype(np.int64)
    base = census.select([c for c in COLUMNS if c in census.column_names])
    return base.append_column("height_cm", pa.array(height)).append_column(
        "secret", pa.array(secret)
    )


@dataclass(frozen=True)
class Database:
    """A written experiment database: the catalog a target opens, and the truth to score against.

    Attributes:
        catalog_path: the catalog TOML file (one table, :data:`TABLE`, privacy unit: one row).
        catalog: the loaded catalog.
        truth: the rows as written. Only the experimenter reads them, to score an attack.
    """

    catalog_path: Path
    catalog: Catalog
    truth: pa.Table


def write_population(people: pa.Table, directory: Path, *, name: str = "attack_lab") -> Database:
    """Write ``people`` as ``<directory>/<name>.csv`` with its catalog ``<name>.toml``.

    Every column is declared with public metadata that does not depend on the rows (bounds from
    the census's definitions, keys only for closed vocabularies), as a custodian would.
    """
    directory.mkdir(parents=True, exist_ok=True)
    csv_path = directory / f"{name}.csv"
    with csv_path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(people.column_names)
        writer.writerows(
            zip(*(people.column(c).to_pylist() for c in people.column_names), strict=True)
        )
    catalog_path = directory / f"{name}.toml"
    catalog_path.write_text(_catalog_text(name, csv_path.name, people.column_names))
    return Database(catalog_path, load_catalog(catalog_path), people)


_DECLARATIONS = {
    "person_id": 'type = "int"',
    "name": 'type = "str"',
    "date_of_birth": 'type = "date"',
    "zip": 'type = "str"',
    "sex": 'type = "str", keys = ["Female", "Male"]',
    "age": f'type = "int", bounds = [0, {MAX_AGE}]',
    "income": f'type = "int", bounds = [0, {MAX_INCOME}]',
    "height_cm": f'type = "int", bounds = [{HEIGHT_BOUNDS[0]}, {HEIGHT_BOUNDS[1]}]',
    "secret": 'type = "int", bounds = [0, 1]',
}


def _catalog_text(name: str, csv_name: str, columns: list[str]) -> str:
    unknown = [c for c in columns if c not in _DECLARATIONS]
    if unknown:
        raise ConfigurationError(
            f"no public declaration for column(s) {', '.join(unknown)}.",
            fix=f"keep to the columns {', '.join(_DECLARATIONS)}.",
        )
    lines = [
        "[dataset]",
        f"name = {json.dumps(name)}",
        'description = "Synthetic people for an attack experiment (seeded; no real person)."',
        "",
        f"[tables.{TABLE}]",
        f"source = {{ csv = {json.dumps(csv_name)} }}",
        'privacy_unit = "row"',
        "",
        f"[tables.{TABLE}.columns]",
        *(f"{c} = {{ {_DECLARATIONS[c]}, nullable = false }}" for c in columns),
    ]
    return "\n".join(lines) + "\n"
