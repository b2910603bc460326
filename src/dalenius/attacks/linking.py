"""The linking attack: re-identify a "de-identified" file by joining it with a voter roll.

**The story** (the course's database class; Sweeney 2002). In 1997 Massachusetts released the
hospital records of state employees with names removed. Latanya Sweeney bought the Cambridge
voter roll — name, address, ZIP code, date of birth, sex — joined the two on ZIP code, date of
birth and sex, and found the governor's record: in his ZIP code only six people shared his
birthday, three of them men, one of them him. Sweeney later estimated that 87% of the US
population is unique on (5-digit ZIP, date of birth, sex).

**The experiment** (:func:`run`). The demo census is the population; a share of it is the
released file; the registered adults, some listed under a stale ZIP code, are the voter roll
(:mod:`dalenius.attacks.voters`). The attacker coarsens each voter with the release's published
scheme and takes the matching records (:mod:`dalenius.attacks.matching`):

* a voter who matches exactly one record is *claimed* re-identified (right or wrong);
* the attacker links every matched voter to one record of the class, picked at random — the
  attack's success is that pick being the voter's own record. A class of c records gives a
  person in it a chance of 1/c, so against a k-anonymous release no voter is picked right with
  probability above 1/k (the prosecutor risk bound), whatever the attacker does;
* from the linked class the attacker also guesses the voter's sensitive value (the most frequent
  one in the class). The guess is scored separately for voters who are in the file and voters
  who are not: the gap is what the release tells about people *because they are in it*.

Against Dalenius the file is synthetic (:func:`~dalenius.attacks.published.dalenius_synthetic`):
ZIP code and date of birth cannot be released, no row is a person, so no pick is ever a person's
record, and the sensitive guess is as good for people outside the file as inside it — what the
attacker learns is the population's pattern (people of this age and sex mostly do X), which
differential privacy allows and Dalenius's 1977 desideratum could not forbid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dalenius.attacks.matching import Matches, match
from dalenius.attacks.plots import pyplot, save
from dalenius.attacks.published import Issued, check_against, publish
from dalenius.attacks.report import AttackReport, Rate
from dalenius.attacks.voters import Scenario, scenario
from dalenius.core.rng import system_random

SENSITIVE = "occupation"
"""The census column the attacker wants to learn by default (half the census is not working)."""

UNIQUENESS_SETS: tuple[tuple[str, ...], ...] = (
    ("zip", "date_of_birth", "sex"),
    ("zip", "birth_year", "sex"),
    ("state", "date_of_birth", "sex"),
    ("zip", "sex"),
)
"""Quasi-identifier sets whose uniqueness the report shows, Sweeney's first."""

COURSE_UNIQUE = 0.87
"""Sweeney's estimate: the share of the US population unique on (ZIP, date of birth, sex)."""


@dataclass(frozen=True)
class LinkingResult:
    """What the linking attack achieved against one release.

    Attributes:
        label: the release, as described in reports.
        kind: ``raw``, ``k-anonymous``, ``l-diverse``, ``t-close`` or ``dalenius``.
        population: people in the population.
        uniqueness: share of the population unique on each quasi-identifier set, by name.
        released: records in the released file; ``rows_in`` the records the custodian held.
        voters: voters on the roll; ``overlap`` of them are in the released file.
        matched: voters matching at least one released record.
        claims: voters matching exactly one record; ``claims_right`` of them are that voter's.
        picks_right: voters in the file whose randomly picked record is their own.
        expected_right: the expected number of such voters (the sum over voters of 1/class size).
        smallest_class: the smallest class a voter fell in (the bound is 1/smallest_class).
        guess_in: sensitive value guessed right / tried, for voters in the file.
        guess_out: the same for voters not in the file.
        records_are_people: whether the released records are persons' records at all.
        notes: the release's description.
        bound: the most an attacker can pick right (1/k for a k-anonymous file; 0 when no
            record is a person's), if the release guarantees any.
        k: the class size the release guarantees (1: a raw file; 0: synthetic rows).
        epsilon: the ε the release spent, if it is differentially private.
    """

    label: str
    kind: str
    population: int
    uniqueness: dict[str, float]
    rows_in: int
    released: int
    voters: int
    overlap: int
    matched: int
    claims: int
    claims_right: int
    picks_right: int
    expected_right: float
    smallest_class: int
    guess_in: Rate
    guess_out: Rate
    records_are_people: bool
    notes: tuple[str, ...]
    bound: float | None
    k: int
    epsilon: Fraction | None = None

    @property
    def rate(self) -> Rate:
        """Voters in the file linked to their own record (by the attacker's random pick)."""
        return Rate(self.picks_right, self.overlap)

    @property
    def expected_rate(self) -> float:
        """The expected share of voters in the file linked to their own record."""
        return self.expected_right / self.overlap if self.overlap else 0.0

    def report(self) -> AttackReport:
        """The attack report (success with its interval; the rest in ``details``)."""
        details: dict[str, Any] = {
            "released records": f"{self.released:,} of {self.rows_in:,}",
            "voters in the released file": f"{self.overlap:,} of {self.voters:,}",
            "voters matching one record exactly": (
                f"{self.claims:,}, of whom {self.claims_right:,} are right"
                + (f" ({self.claims_right / self.claims:.1%})" if self.claims else "")
            ),
            "expected share linked right": f"{self.expected_rate:.2%}",
            "sensitive value guessed right, in the file": _rate_text(self.guess_in),
            "sensitive value guessed right, not in the file": _rate_text(self.guess_out),
        }
        if not self.records_are_people:
            details["released records that are a person's"] = "none (synthetic rows)"
        for note in self.notes:
            if note:
                details.setdefault("release", note)
                if details["release"] != note:
                    details["release"] += "; " + note
        return AttackReport(
            attack="linking",
            target=self.label,
            metric="a voter in the file is linked to their own record",
            rate=self.rate,
            bound=self.bound,
            bound_text=_bound_text(self),
            queries=0,
            epsilon_spent=self.epsilon,
            budget=self.epsilon,
            details=details,
        )

    def uniqueness_text(self) -> str:
        """The population's uniqueness on each quasi-identifier set, Sweeney's first, in words."""
        first, *rest = self.uniqueness.items()
        text = (
            f"{first[1]:.1%} of the {self.population:,} people are unique on {first[0]} "
            f"(the course: {COURSE_UNIQUE:.0%} of the US population)"
        )
        if rest:
            text += "; on " + "; on ".join(f"{name}: {share:.1%}" for name, share in rest)
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        doc = self.report().to_dict()
        doc["measures"] = {
            "uniqueness": self.uniqueness,
            "population": self.population,
            "released": self.released,
            "voters": self.voters,
            "overlap": self.overlap,
            "matched": self.matched,
            "claims": self.claims,
            "claims_right": self.claims_right,
            "expected_rate": self.expected_rate,
            "smallest_class": self.smallest_class,
            "guess_in": self.guess_in.estimate,
            "guess_out": self.guess_out.estimate,
        }
        return doc


def _rate_text(rate: Rate) -> str:
    low, high = rate.interval(0.95)
    return f"{rate.estimate:.1%} [{low:.1%}, {high:.1%}] of {rate.trials:,}"


def _bound_text(result: LinkingResult) -> str:
    if result.kind == "dalenius":
        return "no released row is a person's"
    if result.bound is None:
        return ""
    return f"1/k = 1/{result.k}"


def _name(columns: Sequence[str]) -> str:
    return "(" + ", ".join(columns) + ")"


def uniqueness(
    population: pa.Table, sets: Sequence[Sequence[str]] = UNIQUENESS_SETS
) -> dict[str, float]:
    """The share of ``population`` unique on each set of columns (``birth_year`` is derived).

    Example:
        >>> from dalenius.datasets import generate_people
        >>> u = uniqueness(generate_people(2_000, seed=7), [("zip", "date_of_birth", "sex")])
        >>> 0.9 < u["(zip, date_of_birth, sex)"] <= 1
        True
    """
    table = population
    if any("birth_year" in s for s in sets) and "birth_year" not in table.column_names:
        years = [d.year for d in table.column("date_of_birth").to_pylist()]
        table = table.append_column("birth_year", pa.array(years, type=pa.int64()))
    out = {}
    for columns in sets:
        counts = table.group_by(list(columns)).aggregate([([], "count_all")])
        sizes = counts.column("count_all").to_numpy()
        out[_name(columns)] = float((sizes == 1).sum()) / max(table.num_rows, 1)
    return out


def attack(issued: Issued, world: Scenario) -> LinkingResult:
    """Run the linking attack on one release of ``world``'s released file and score it.

    The attack itself sees ``issued.published`` and the voter roll only; the truth about who is
    who is read afterwards, to score it.
    """
    published = issued.published
    found = match(published, world.voters)
    return _score(issued, world, found)


def _score(issued: Issued, world: Scenario, found: Matches) -> LinkingResult:
    published = issued.published
    sizes = found.candidates()
    matched = found.matched
    voter_ids = world.truth.voter_ids
    in_file = (
        np.isin(voter_ids, issued.ids)
        if published.records_are_people
        else np.isin(voter_ids, world.truth.release_ids)
    )
    # The voter's own record's class, if it was released.
    own_class = np.full(len(voter_ids), -2, dtype=np.int64)
    if published.records_are_people and len(issued.ids):
        position = {int(pid): i for i, pid in enumerate(issued.ids)}
        for v, pid in enumerate(voter_ids):
            row = position.get(int(pid))
            if row is not None:
                own_class[v] = found.classes.of_record[row]
    own = matched & (found.of_known == own_class)
    expected = float(np.sum(1.0 / sizes[own])) if own.any() else 0.0
    picks = _pick(sizes[own])
    claims = matched & (sizes == 1)
    guess_in, guess_out = _guesses(published.sensitive, found, world, in_file)
    smallest = int(sizes[matched].min()) if matched.any() else 0
    # A k-anonymous file puts every voter in a class of at least k records: 1/k at most.
    bound = 1.0 / published.k if published.k > 1 else 0.0 if published.k == 0 else None
    return LinkingResult(
        label=published.label,
        kind=published.kind,
        population=world.population.num_rows,
        uniqueness=uniqueness(world.population),
        rows_in=issued.rows_in,
        released=published.table.num_rows,
        voters=world.voters.num_rows,
        overlap=int(in_file.sum()),
        matched=int(matched.sum()),
        claims=int(claims.sum()),
        claims_right=int((claims & own).sum()),
        picks_right=picks,
        expected_right=expected,
        smallest_class=smallest,
        guess_in=guess_in,
        guess_out=guess_out,
        records_are_people=published.records_are_people,
        notes=published.notes,
        bound=bound,
        k=published.k,
        epsilon=published.epsilon,
    )


def _pick(sizes: np.ndarray) -> int:
    """How many of these voters the attacker's random pick (one record of the class) gets right.

    The pick is the attacker's coin, drawn from the OS generator: the voter's own record is one
    of ``size`` equally likely records.
    """
    if len(sizes) == 0:
        return 0
    draws = system_random().uint64(len(sizes))
    return int(np.count_nonzero(draws % sizes.astype(np.uint64) == 0))


def _guesses(
    sensitive: str, found: Matches, world: Scenario, in_file: np.ndarray
) -> tuple[Rate, Rate]:
    """The sensitive-value guess (the class's most frequent value), scored in and out of the file."""
    truth_by_id = dict(
        zip(
            world.population.column("person_id").to_pylist(),
            world.population.column(sensitive).to_pylist(),
            strict=True,
        )
    )
    modes = [c.most_common(1)[0][0] for c in found.classes.values]
    right_in = tried_in = right_out = tried_out = 0
    for v, pid in enumerate(world.truth.voter_ids):
        c = found.of_known[v]
        if c < 0:
            continue
        right = modes[c] == truth_by_id[int(pid)]
        if in_file[v]:
            tried_in += 1
            right_in += right
        else:
            tried_out += 1
            right_out += right
    return Rate(right_in, tried_in), Rate(right_out, tried_out)


def run(
    against: str = "raw",
    *,
    n: int = 50_000,
    k: int = 5,
    l: int = 3,  # noqa: E741
    t: float = 0.2,
    epsilon: float = 1.0,
    delta: float = 1e-6,
    release_share: float = 0.5,
    registered: float = 0.7,
    moved: float = 0.05,
    seed: int = 1994,
    sensitive: str = SENSITIVE,
    world: Scenario | None = None,
) -> LinkingResult:
    """Replay Sweeney's attack on the demo census against one kind of release.

    Example:
        >>> result = run("raw", n=2_000, seed=7)
        >>> result.rate.estimate > 0.8
        True
    """
    check_against(against, k=k, l=l, t=t)
    world = world or scenario(
        n, release_share=release_share, registered=registered, moved=moved, seed=seed
    )
    issued = publish(
        world, against, k=k, l=l, t=t, epsilon=epsilon, delta=delta, sensitive=sensitive
    )
    return attack(issued, world)


def sweep(
    ks: Sequence[int],
    *,
    world: Scenario,
    sensitive: str = SENSITIVE,
    progress: Callable[[int, int], None] | None = None,
) -> list[LinkingResult]:
    """The attack against the raw file (k = 1) and k-anonymous releases for each k in ``ks``."""
    out = []
    for i, k in enumerate(ks):
        if progress is not None:
            progress(i, len(ks))
        against = "raw" if k == 1 else "k-anonymous"
        out.append(attack(publish(world, against, k=k, sensitive=sensitive), world))
    if progress is not None:
        progress(len(ks), len(ks))
    return out


def plot(results: Sequence[LinkingResult], path: Any) -> Any:
    """Draw the share of voters linked to their own record against k, beside the 1/k bound."""
    plt = pyplot()
    ks = [max(r.k, 1) for r in results]
    rates = [r.rate.estimate for r in results]
    lows = [r.rate.estimate - r.rate.interval(0.95)[0] for r in results]
    highs = [r.rate.interval(0.95)[1] - r.rate.estimate for r in results]
    expected = [r.expected_rate for r in results]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    grid = np.geomspace(1, max(ks), 200)
    ax.plot(grid, 1 / grid, color="0.6", linestyle="--", label="bound 1/k")
    ax.errorbar(
        ks,
        rates,
        yerr=[lows, highs],
        fmt="o",
        color="C3",
        capsize=3,
        label="measured (95% interval)",
    )
    ax.plot(ks, expected, color="C3", alpha=0.5, label="expected (Σ 1/class size)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("k (1 = names dropped only)")
    ax.set_ylabel("voters in the file linked to their own record")
    ax.set_ylim(min([*rates, *expected, 1 / max(ks)]) / 2 or 1e-4, 1.5)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.yaxis.set_major_formatter(
        lambda y, _: f"{y:.3g}".replace("0.", ".") if y < 0.01 else f"{y:.0%}"
    )
    ax.set_title("Linking a voter roll to the census: re-identification vs k")
    ax.legend(loc="upper right")
    ax.grid(alpha=0.3)
    return save(fig, Path(path))
