"""The attacker's public side information: a voter roll drawn from the demo census, and a scenario.

Sweeney re-identified the governor of Massachusetts by joining the "de-identified" hospital
records of state employees with the Cambridge voter roll, bought for twenty dollars: both held
ZIP code, date of birth and sex. To replay that attack on Dalenius's synthetic census this module
builds the same two pieces from one population:

- the **released file**: a share of the population (a hospital's patients, a survey's
  respondents), which a custodian publishes in some form;
- the **voter roll**: name, ZIP code, date of birth and sex of the *registered adults* — a share
  of the people aged 18 or more, some with a stale ZIP code because they moved since registering.

The two overlap only in part, as in reality: some voters are not in the released file (their
matches, if any, are false), and some released people are not on the roll (children, the
unregistered). Which person is which is kept in a :class:`Truth` that only the scoring code reads;
the attacks see the voter roll's four public columns and the release.

Everything here is *data synthesis*, drawn from a seeded generator so that an experiment can be
replayed (the same seed gives the same people, sample and roll); no privacy noise comes from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dalenius.core.errors import ConfigurationError
from dalenius.datasets import generate_people
from dalenius.datasets.census import DEFAULT_SEED
from dalenius.datasets.sampling import generator

VOTER_COLUMNS = ("name", "zip", "date_of_birth", "sex")
"""What the voter roll lists about each voter (what Sweeney's roll had, the address as ZIP)."""

VOTING_AGE = 18

_SAMPLE_STREAM = 101
_ROLL_STREAM = 102


@dataclass(frozen=True)
class Truth:
    """Who is who: read by the scoring code only, never by an attack.

    Attributes:
        release_ids: the ``person_id`` of each released record, in the release's row order.
        voter_ids: the ``person_id`` of each voter, in the voter roll's row order.
    """

    release_ids: np.ndarray
    voter_ids: np.ndarray

    @property
    def overlap(self) -> int:
        """How many voters are in the released file (the people the attack can re-identify)."""
        return int(np.isin(self.voter_ids, self.release_ids).sum())


@dataclass(frozen=True)
class Scenario:
    """A population, the part of it a custodian releases, and a voter roll drawn from it.

    Attributes:
        population: every person (the demo census: ``generate_people(n, seed=seed)``).
        released: the records the custodian publishes in some form (all columns, names included:
            a release decides what to drop).
        voters: the voter roll's public columns (:data:`VOTER_COLUMNS`).
        truth: the person behind each released record and each voter.
        seed: the seed the scenario was drawn with.
    """

    population: pa.Table
    released: pa.Table
    voters: pa.Table
    truth: Truth
    seed: int


def voter_roll(
    population: pa.Table,
    *,
    registered: float = 0.7,
    moved: float = 0.05,
    seed: int = DEFAULT_SEED,
) -> tuple[pa.Table, np.ndarray]:
    """The registered adults of ``population``, as a voter roll lists them.

    Args:
        population: a table from :func:`dalenius.datasets.generate_people`.
        registered: the share of adults (18 or older) on the roll.
        moved: the share of voters whose ZIP code on the roll is stale: another ZIP code of the
            same state, as when a person moved after registering.
        seed: the same seed and population always give the same roll.

    Returns:
        The roll (columns :data:`VOTER_COLUMNS`, sorted by name as rolls are) and the
        ``person_id`` of each of its rows.

    Example:
        >>> from dalenius.datasets import generate_people
        >>> roll, ids = voter_roll(generate_people(1_000, seed=7), seed=7)
        >>> roll.column_names, roll.num_rows == len(ids)
        (['name', 'zip', 'date_of_birth', 'sex'], True)
    """
    _check_share("registered", registered)
    _check_share("moved", moved)
    rng = generator(seed, _ROLL_STREAM)
    age = population.column("age").to_numpy()
    on_roll = (age >= VOTING_AGE) & (rng.random(population.num_rows) < registered)
    rows = population.filter(pa.array(on_roll))
    zips = np.asarray(rows.column("zip").to_pylist(), dtype=object)
    states = np.asarray(rows.column("state").to_pylist(), dtype=object)
    stale = rng.random(rows.num_rows) < moved
    by_state = _zips_by_state(population)
    for i in np.flatnonzero(stale):
        choices = by_state[states[i]]
        zips[i] = choices[int(rng.integers(len(choices)))]
    roll = pa.table(
        {
            "name": rows.column("name"),
            "zip": pa.array(zips.tolist(), type=pa.string()),
            "date_of_birth": rows.column("date_of_birth"),
            "sex": rows.column("sex"),
        }
    )
    order = pc.sort_indices(roll, sort_keys=[("name", "ascending"), ("zip", "ascending")])
    ids = rows.column("person_id").to_numpy()[order.to_numpy()]
    return roll.take(order), ids


def scenario(
    n: int = 50_000,
    *,
    release_share: float = 0.5,
    registered: float = 0.7,
    moved: float = 0.05,
    seed: int = DEFAULT_SEED,
) -> Scenario:
    """The demo census of ``n`` people, a released share of it, and its voter roll.

    Args:
        n: people in the population (the demo census has 50,000).
        release_share: the share of the population in the released file, drawn at random.
        registered: the share of adults on the voter roll.
        moved: the share of voters listed under a stale ZIP code.
        seed: the census's seed (1994 is the demo's); the sample and the roll derive from it.

    Raises:
        ConfigurationError: for a share outside [0, 1] or a bad ``n`` or ``seed``, before any
            person is generated.

    Example:
        >>> s = scenario(2_000, seed=7)
        >>> s.released.num_rows > 0 and s.voters.num_rows > 0 and s.truth.overlap > 0
        True
    """
    _check_share("release_share", release_share, empty=False)
    _check_share("registered", registered, empty=False)
    _check_share("moved", moved)
    population = generate_people(n, seed=seed)
    chosen = generator(seed, _SAMPLE_STREAM).random(population.num_rows) < release_share
    released = population.filter(pa.array(chosen))
    voters, voter_ids = voter_roll(population, registered=registered, moved=moved, seed=seed)
    truth = Truth(released.column("person_id").to_numpy(), voter_ids)
    return Scenario(population, released, voters, truth, seed)


def _zips_by_state(population: pa.Table) -> dict[str, list[str]]:
    pairs = sorted(
        set(
            zip(
                population.column("state").to_pylist(),
                population.column("zip").to_pylist(),
                strict=True,
            )
        )
    )
    out: dict[str, list[str]] = {}
    for state, code in pairs:
        out.setdefault(state, []).append(code)
    return out


def _check_share(name: str, value: object, *, empty: bool = True) -> None:
    """A share in [0, 1] — in (0, 1] when ``empty`` is false (nothing to attack at 0)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= 1
        or (value == 0 and not empty)
    ):
        interval = "[0, 1]" if empty else "(0, 1]"
        raise ConfigurationError(
            f"{name} must be a share in {interval}; got {value!r}.",
            fix=f"pass for example {name}=0.5.",
        )
