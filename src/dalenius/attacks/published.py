"""Released microdata as everybody sees it, and the releases a custodian might publish.

The linking and homogeneity attacks work on a *published file*, not on query answers: the
records a custodian released and the public description of how they were coarsened (a
generalisation scheme is published with the file — the analysts need it to read the labels, and
Kerckhoffs's principle says the attacker knows it anyway). :class:`Published` is that file; it is
the only thing :mod:`dalenius.attacks.linking` and :mod:`dalenius.attacks.homogeneity` are given
about the data, besides the attacker's own side information.

This module is the custodian's side (like :mod:`dalenius.attacks.targets` for query attacks): it
reads the records and builds each release, returning beside it the person behind each released
record, which only the scoring code reads. The releases, weakest first:

* :func:`deidentified` (``raw``) — identifiers dropped, everything else as it is: the
  Massachusetts hospital file;
* :func:`anonymous` with ``KAnonymity(k)`` (``k-anonymous``), with ``DistinctLDiversity(ℓ)``
  (``l-diverse``) or ``TCloseness(t)`` (``t-close``) — the anonymity toolkit's optimal full-domain
  generalisation with record suppression (:func:`dalenius.anonymity.anonymize`);
* :func:`dalenius_synthetic` (``dalenius``) — synthetic rows drawn from a model fitted to noisy
  marginals (MST, :mod:`dalenius.releases.synthetic`) through a budgeted Dalenius session: no row
  is a person, and ZIP code and date of birth, having no public domain, cannot be released at all.
"""

from __future__ import annotations

import datetime
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa

from dalenius.anonymity import DistinctLDiversity, Hierarchy, KAnonymity, TCloseness, anonymize
from dalenius.anonymity.models import Model
from dalenius.attacks.voters import Scenario
from dalenius.core.catalog import Catalog
from dalenius.core.errors import ConfigurationError, InternalError
from dalenius.core.loss import ApproxDP
from dalenius.datasets.schema import REFERENCE_DATE, catalog_text
from dalenius.engine.session import connect

Coarsen = Callable[[Sequence[Any]], list[Any]]


@dataclass(frozen=True)
class Key:
    """How the attacker puts one of their own columns in the terms of a released column.

    Attributes:
        source: the attacker's column (``zip``, ``date_of_birth``, ``age``, ...).
        coarsen: maps the attacker's values to the released labels (the identity for a column
            released as is).
    """

    source: str
    coarsen: Coarsen = field(compare=False)

    def apply(self, values: Sequence[Any]) -> list[Any]:
        """The released labels of ``values``."""
        return self.coarsen(values)


@dataclass(frozen=True)
class Published:
    """A released file: its records and the public scheme that coarsened its quasi-identifiers.

    Attributes:
        kind: ``raw``, ``k-anonymous``, ``l-diverse``, ``t-close`` or ``dalenius``.
        label: how the release is described in reports (``5-anonymous``, ...).
        table: the released records.
        keys: for each released quasi-identifier, how an attacker's column maps onto it.
        sensitive: the released attribute the attacker wants to learn.
        records_are_people: whether each record is one real person's (not so for synthetic rows).
        notes: what the release's description says (levels, suppression, loss spent).
        k: the smallest class the release's models guarantee (1 for a raw file, 0 when the
            records are not people).
        epsilon: the ε a differentially private release spent (``None`` for the others).
    """

    kind: str
    label: str
    table: pa.Table
    keys: Mapping[str, Key]
    sensitive: str
    records_are_people: bool = True
    notes: tuple[str, ...] = ()
    k: int = 1
    epsilon: Fraction | None = None

    @property
    def quasi_identifiers(self) -> tuple[str, ...]:
        """The released columns an attacker links on."""
        return tuple(self.keys)

    def record_keys(self) -> list[tuple[Any, ...]]:
        """Each released record's quasi-identifier labels."""
        columns = [self.table.column(c).to_pylist() for c in self.keys]
        return list(zip(*columns, strict=True)) if columns else [()] * self.table.num_rows

    def keys_of(self, known: pa.Table) -> list[tuple[Any, ...]]:
        """The labels an attacker's records get under the release's scheme (one tuple a row).

        Raises:
            ConfigurationError: if ``known`` lacks a column the scheme needs.
        """
        missing = [k.source for k in self.keys.values() if k.source not in known.column_names]
        if missing:
            raise ConfigurationError(
                f"the attacker's table lacks {missing}, which {self.label} is linked on.",
                fix=f"give a table with the columns {sorted({k.source for k in self.keys.values()})}.",
            )
        columns = [k.apply(known.column(k.source).to_pylist()) for k in self.keys.values()]
        return list(zip(*columns, strict=True)) if columns else [()] * known.num_rows


@dataclass(frozen=True)
class Issued:
    """A release and the person behind each of its records (read by the scoring code only).

    Attributes:
        published: what everybody sees.
        ids: the ``person_id`` (or row number) of each released record; empty for synthetic rows.
        rows_in: how many records the custodian held.
    """

    published: Published
    ids: np.ndarray
    rows_in: int


CENSUS_QUASI_IDENTIFIERS = ("zip", "date_of_birth", "sex")
"""Sweeney's quasi-identifiers: 5-digit ZIP code, date of birth and sex."""

CENSUS_HIERARCHIES: Mapping[str, Hierarchy] = {
    "zip": Hierarchy.mask([1, 2, 3, 4, 5]),
    "date_of_birth": Hierarchy.dates(["month", "year", "decade"]),
    "sex": Hierarchy.identity(),
}
"""The public generalisation scheme of the census's quasi-identifiers (ZIP digits masked from the
right; dates to month, year, decade; sex kept or withheld)."""


def _identity(values: Sequence[Any]) -> list[Any]:
    return list(values)


def deidentified(
    records: pa.Table,
    *,
    quasi_identifiers: Sequence[str] = CENSUS_QUASI_IDENTIFIERS,
    sensitive: str,
    id_column: str = "person_id",
) -> Issued:
    """The "de-identified" file: quasi-identifiers and the sensitive column, names dropped.

    Example:
        >>> from dalenius.datasets import generate_people
        >>> issued = deidentified(generate_people(100, seed=7), sensitive="occupation")
        >>> issued.published.table.column_names
        ['zip', 'date_of_birth', 'sex', 'occupation']
    """
    _check_columns(records, [*quasi_identifiers, sensitive, id_column])
    table = records.select([*quasi_identifiers, sensitive])
    published = Published(
        kind="raw",
        label="raw (names dropped)",
        table=table,
        keys={c: Key(c, _identity) for c in quasi_identifiers},
        sensitive=sensitive,
        notes=("every record as held, without name or id",),
    )
    return Issued(published, records.column(id_column).to_numpy(), records.num_rows)


def anonymous(
    records: pa.Table,
    *,
    models: Sequence[Model],
    sensitive: str,
    quasi_identifiers: Sequence[str] = CENSUS_QUASI_IDENTIFIERS,
    hierarchies: Mapping[str, Hierarchy] = CENSUS_HIERARCHIES,
    suppression_limit: float = 0.05,
    id_column: str = "person_id",
    kind: str = "k-anonymous",
    progress: Callable[[int, int], None] | None = None,
) -> Issued:
    """A release of the anonymity toolkit: optimal full-domain generalisation with suppression.

    The quasi-identifiers are generalised to the levels :func:`dalenius.anonymity.anonymize`
    finds; those levels and the hierarchies are the published scheme an attacker uses to coarsen
    their own records the same way.

    Raises:
        ConfigurationError, UnsatisfiableError: as :func:`dalenius.anonymity.anonymize` does.
    """
    _check_columns(records, [*quasi_identifiers, sensitive, id_column])
    source = records.select([*quasi_identifiers, sensitive])
    needs_sensitive = any(m.needs_sensitive for m in models)
    release = anonymize(
        source,
        quasi_identifiers=list(quasi_identifiers),
        models=list(models),
        sensitive=[sensitive] if needs_sensitive else [],
        hierarchies=dict(hierarchies),
        suppression_limit=suppression_limit,
        progress=progress,
    )
    levels = release.report.levels
    keys = {
        c: Key(c, _generaliser(hierarchies.get(c, Hierarchy.identity()), levels.get(c, 0)))
        for c in quasi_identifiers
    }
    # Suppression removes whole classes, so a record is released iff its class is.
    all_keys = list(
        zip(*(keys[c].apply(source.column(c).to_pylist()) for c in quasi_identifiers), strict=True)
    )
    published = Published(
        kind=kind,
        label=" + ".join(m.describe() for m in models),
        table=release.table.select([*quasi_identifiers, sensitive]),
        keys=keys,
        sensitive=sensitive,
        notes=(
            "levels " + ", ".join(f"{c}={v}" for c, v in levels.items()),
            f"{release.report.suppressed:,} of {records.num_rows:,} records suppressed",
        ),
        k=max(m.min_class_size() for m in models),
    )
    kept = set(published.record_keys())
    mask = np.fromiter((k in kept for k in all_keys), dtype=bool, count=len(all_keys))
    ids = records.column(id_column).to_numpy()[mask]
    if len(ids) != release.table.num_rows:
        raise InternalError(
            "the released records do not line up with the source records; this is a bug in "
            "Dalenius: please report it."
        )
    return Issued(published, ids, records.num_rows)


def _generaliser(hierarchy: Hierarchy, level: int) -> Coarsen:
    """The published coarsening of one column at ``level`` (level 0: the value as it is)."""
    if level == 0:
        return _identity

    def coarsen(values: Sequence[Any]) -> list[Any]:
        memo: dict[Any, Any] = {}
        out = []
        for v in values:
            if v not in memo:
                memo[v] = hierarchy.labeller(v)[level - 1]
            out.append(memo[v])
        return out

    return coarsen


SYNTHETIC_COLUMNS = ("state", "sex", "age")
"""The census quasi-identifiers a DP synthetic release can hold, beside the sensitive column: ZIP
code and date of birth have no public domain (their values would come from the data), so they
cannot be released."""


def dalenius_synthetic(
    records: pa.Table,
    *,
    sensitive: str,
    epsilon: float = 1.0,
    delta: float = 1e-6,
    columns: Sequence[str] | None = None,
    age_bins: int = 10,
    zip_to_state: Mapping[str, str] | None = None,
) -> Issued:
    """Synthetic census rows from Dalenius (MST) under an (ε, δ) budget: no record is a person.

    The records are declared with the census catalog's keys and bounds, a session with a budget
    of exactly ``(epsilon, delta)`` is opened, and :meth:`~dalenius.engine.session.Session.synthesize`
    releases as many rows as there were records. The attacker links on what is left of the
    quasi-identifiers — state (from the public ZIP directory ``zip_to_state``), sex and age band
    (from the date of birth) — and reads the sensitive column of the matching synthetic rows.
    ``columns`` defaults to :data:`SYNTHETIC_COLUMNS` and the sensitive column.

    Raises:
        ConfigurationError: if a column is unknown or the sensitive column is not among ``columns``.
    """
    columns = [*SYNTHETIC_COLUMNS, sensitive] if columns is None else list(columns)
    if sensitive not in columns:
        raise ConfigurationError(
            f"the sensitive column {sensitive!r} is not among the synthetic columns {list(columns)}.",
            fix=f"add {sensitive!r} to columns.",
        )
    _check_columns(records, [*columns, "person_id"])
    # The census catalog's declarations (keys, bounds, the person as unit), over the records in
    # memory: nothing is written to disk.
    doc = tomllib.loads(catalog_text("released", "The released file of an attack experiment."))
    del doc["tables"]["visits"]
    doc["tables"]["people"]["source"] = records
    budget = ApproxDP(Fraction(str(epsilon)), Fraction(str(delta)))
    with connect(Catalog.from_dict(doc), budget=budget, ledger="memory:") as session:
        result = session.synthesize(
            "people",
            list(columns),
            epsilon=epsilon,
            delta=delta,
            bins=age_bins,
            rows=records.num_rows,
        )
    frame = result.release.to_pandas()
    table = pa.Table.from_pandas(frame, preserve_index=False)
    age_labels = sorted(set(table.column("age").to_pylist())) if "age" in columns else []
    keys: dict[str, Key] = {}
    if "state" in columns:
        directory_ = dict(zip_to_state or _zip_directory(records))
        keys["state"] = Key("zip", lambda zs: [directory_.get(z) for z in zs])
    if "sex" in columns:
        keys["sex"] = Key("sex", _identity)
    if "age" in columns:
        keys["age"] = Key("date_of_birth", _age_band(age_bins))
    published = Published(
        kind="dalenius",
        label=f"dalenius (synthetic, ε={epsilon:g}, δ={delta:g})",
        table=table.select([*keys, sensitive]),
        keys=keys,
        sensitive=sensitive,
        records_are_people=False,
        k=0,
        epsilon=budget.epsilon,
        notes=(
            f"{table.num_rows:,} synthetic rows over {', '.join(columns)}; loss {result.loss}",
            f"age bands {', '.join(map(str, age_labels[:3]))}, …" if age_labels else "",
        ),
    )
    return Issued(published, np.array([], dtype=np.int64), records.num_rows)


def _zip_directory(records: pa.Table) -> dict[str, str]:
    return dict(
        zip(records.column("zip").to_pylist(), records.column("state").to_pylist(), strict=True)
    )


def _age_band(bins: int) -> Coarsen:
    """Date of birth → the synthetic release's age band (age in whole years on the census day)."""
    width = 100 / bins

    def band(day: datetime.date) -> str:
        age = (
            REFERENCE_DATE.year
            - day.year
            - ((REFERENCE_DATE.month, REFERENCE_DATE.day) < (day.month, day.day))
        )
        i = min(int(max(age, 0) // width), bins - 1)
        low, high = i * width, (i + 1) * width
        return f"[{low:g}, {high:g}{']' if i == bins - 1 else ')'}"

    return lambda days: [band(d) for d in days]


def _check_columns(records: pa.Table, needed: Sequence[str]) -> None:
    missing = [c for c in needed if c not in records.column_names]
    if missing:
        raise ConfigurationError(
            f"the records lack the column(s) {missing}.",
            fix="give the census's people table (dalenius.datasets.generate_people).",
        )


AGAINST = ("raw", "k-anonymous", "l-diverse", "t-close", "dalenius")
"""The releases a microdata attack can be run against."""


def check_against(against: str, *, k: int = 5, l: int = 3, t: float = 0.2) -> list[Model]:  # noqa: E741
    """The privacy models of the release ``against`` names (checked before any data is read).

    Raises:
        ConfigurationError: for an unknown release or a bad k, ℓ or t.

    Example:
        >>> [m.describe() for m in check_against("l-diverse", k=4, l=3)]
        ['k-anonymity (k=4)', 'distinct ℓ-diversity (ℓ=3)']
    """
    if against not in AGAINST:
        raise ConfigurationError(
            f"unknown release {against!r} to attack.",
            fix=f"use one of {', '.join(AGAINST)}.",
        )
    if against == "k-anonymous":
        return [KAnonymity(k)]
    if against == "l-diverse":
        return [KAnonymity(k), DistinctLDiversity(l)]
    if against == "t-close":
        return [KAnonymity(k), TCloseness(t)]
    return []


def publish(
    world: Scenario,
    against: str,
    *,
    k: int = 5,
    l: int = 3,  # noqa: E741 - the literature's name
    t: float = 0.2,
    epsilon: float = 1.0,
    delta: float = 1e-6,
    sensitive: str = "occupation",
    suppression_limit: float = 0.05,
    progress: Callable[[int, int], None] | None = None,
) -> Issued:
    """The release of ``world``'s file that ``against`` names (see :data:`AGAINST`).

    Raises:
        ConfigurationError: for an unknown ``against`` or a bad k, ℓ, t — before any release is
            built.
    """
    models = check_against(against, k=k, l=l, t=t)
    if against == "raw":
        return deidentified(world.released, sensitive=sensitive)
    if against == "dalenius":
        return dalenius_synthetic(
            world.released,
            sensitive=sensitive,
            epsilon=epsilon,
            delta=delta,
            zip_to_state=_zip_directory(world.population),
        )
    return anonymous(
        world.released,
        models=models,
        sensitive=sensitive,
        suppression_limit=suppression_limit,
        kind=against,
        progress=progress,
    )
