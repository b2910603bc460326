"""Homogeneity and background-knowledge attacks: learn a sensitive value without re-identifying.

**The story** (the course's database class; Machanavajjhala et al. 2006). A hospital publishes a
4-anonymous table of ZIP code, age, nationality and disease: every combination of generalised
quasi-identifiers is shared by at least four patients, so nobody can be singled out. Yet:

* *homogeneity* — Bob is 35 and lives in 13053; every patient of the class ``130**, 30-40`` has
  cancer, so Bob has cancer. No record was re-identified; the value was;
* *background knowledge* — Umeko (13068, 24, Japanese) falls in ``130**, <30``, whose diseases
  are heart disease and flu; the attacker knows that Japanese people rarely have heart disease,
  and concludes that Umeko has the flu.

ℓ-diversity answers with classes of at least ℓ distinct sensitive values: homogeneity can no
longer give certainty, and an attacker who can rule out at most ℓ − 2 values for a person still
faces two. It does not stop an attacker who rules out ℓ − 1, nor one content with a *probable*
value: a class of 98 flu and 2 other diseases is 3-diverse and tells that its members have the
flu with 98% confidence. t-closeness bounds that confidence by keeping each class's distribution
within t of the whole table's.

**The experiment** (:func:`run`, :func:`run_course`). The attacker knows each target's
quasi-identifiers (the worst case the models are stated against) and, optionally, negative facts:
values the target does not have. The attack (:func:`infer`) looks up the target's class in the
published file, drops the excluded values and reads what is left: a single value is learned *with
certainty*; a value holding at least ``confidence`` of what is left is learned *with that
confidence*. Scoring reads the truth afterwards: a learned value counts when it is the target's.

With ``negatives=m`` the experiment hands the attacker, for each target, the m values of the
target's class it does not have that are most frequent there — the most damaging m true facts,
which is what ℓ-diversity's guarantee must survive for m ≤ ℓ − 2.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dalenius.anonymity import Hierarchy
from dalenius.attacks.matching import Matches, match
from dalenius.attacks.plots import pyplot, save
from dalenius.attacks.published import Issued, anonymous, check_against, deidentified, publish
from dalenius.attacks.report import AttackReport, Rate
from dalenius.attacks.voters import Scenario, scenario
from dalenius.core.errors import ConfigurationError

CONFIDENCE = 0.9
"""The default confidence at which a probable value counts as learned."""

SENSITIVE = "occupation"
"""The census column the attacker wants to learn by default."""


@dataclass(frozen=True)
class Fact:
    """Background knowledge: targets whose known columns match ``where`` have none of ``excludes``.

    Example:
        >>> Fact({"nationality": "Japanese"}, frozenset({"Heart"}), "Japanese people rarely have heart disease")
        Fact(where={'nationality': 'Japanese'}, excludes=frozenset({'Heart'}), says='Japanese people rarely have heart disease')
    """

    where: Mapping[str, Any]
    excludes: frozenset[Any]
    says: str = ""


@dataclass(frozen=True)
class Inference:
    """What the attacker concludes about one target.

    Attributes:
        left: the sensitive values still possible, with their counts in the target's class
            (empty when the target matches no released record).
    """

    left: Counter[Any] = field(default_factory=Counter)

    @property
    def top(self) -> tuple[Any, float] | None:
        """The most likely value and its share of what is left, if anything is."""
        total = sum(self.left.values())
        if not total:
            return None
        value, count = self.left.most_common(1)[0]
        return value, count / total

    @property
    def certain(self) -> Any:
        """The value learned with certainty (one value left), else ``None``."""
        return next(iter(self.left)) if len(self.left) == 1 else None


def infer(
    published: Any,
    known: pa.Table,
    excluded: Sequence[frozenset[Any]] | None = None,
    found: Matches | None = None,
) -> list[Inference]:
    """The attack: each known target's class in the file, minus the values ruled out for them.

    Args:
        published: the :class:`~dalenius.attacks.published.Published` file.
        known: the targets' quasi-identifiers, as the attacker knows them.
        excluded: per target, values the attacker knows the target does not have.
        found: the targets' classes, when already matched.
    """
    found = found or match(published, known)
    out = []
    for i, c in enumerate(found.of_known):
        if c < 0:
            out.append(Inference())
            continue
        counts = Counter(found.classes.values[c])
        if excluded is not None:
            for value in excluded[i]:
                counts.pop(value, None)
        out.append(Inference(counts))
    return out


def apply_facts(known: pa.Table, facts: Sequence[Fact]) -> list[frozenset[Any]]:
    """The values each target is known not to have, from general facts about people like them."""
    rows = known.to_pylist()
    out = []
    for row in rows:
        ruled: set[Any] = set()
        for fact in facts:
            if all(row.get(c) == v for c, v in fact.where.items()):
                ruled |= fact.excludes
        out.append(frozenset(ruled))
    return out


@dataclass(frozen=True)
class HomogeneityResult:
    """What the attacker learned about the targets' sensitive values from one release.

    Attributes:
        label, kind: the release.
        targets: how many people the attacker tried.
        certain: targets whose value was learned with certainty; ``certain_right`` of them rightly.
        confident: targets whose most likely value reached ``confidence``; ``confident_right`` of
            them rightly.
        gain: the mean, over targets, of the belief in their true value after the attack minus
            before it (the value's share in the whole release).
        negatives: background facts handed per target (``facts`` names general facts instead).
        stories: what the attacker concludes about named targets, in words.
        epsilon: the ε the release spent, if it is differentially private.
        ruled_out: the most values ruled out for any one target by background knowledge.
        outside: the same reasoning applied to people *not* in the file: their value "learned
            with certainty", and rightly — what the release teaches about everybody alike.
    """

    label: str
    kind: str
    sensitive: str
    targets: int
    certain: int
    certain_right: int
    confident: int
    confident_right: int
    confidence: float
    gain: float
    negatives: int
    facts: tuple[str, ...]
    notes: tuple[str, ...]
    smallest_diversity: int
    stories: tuple[str, ...] = ()
    outside: Rate | None = None
    ruled_out: int = 0
    epsilon: Fraction | None = None

    @property
    def rate(self) -> Rate:
        """Targets whose sensitive value was learned with certainty, and rightly."""
        return Rate(self.certain_right, self.targets)

    @property
    def confident_rate(self) -> Rate:
        """Targets whose value was learned rightly with at least the stated confidence."""
        return Rate(self.confident_right, self.targets)

    def report(self) -> AttackReport:
        """The attack report (certainty as the success; the rest in ``details``)."""
        low, high = self.confident_rate.interval(0.95)
        knowledge = (
            "; ".join(self.facts)
            if self.facts
            else f"{self.negatives} value(s) each target does not have"
            if self.negatives
            else "the targets' quasi-identifiers only"
        )
        details: dict[str, Any] = {
            "background knowledge": knowledge,
            f"learned rightly with ≥ {self.confidence:.0%} confidence": (
                f"{self.confident_rate.estimate:.1%} [{low:.1%}, {high:.1%}] "
                f"({self.confident_right:,}/{self.targets:,}; {self.confident:,} claimed)"
            ),
            "learned with certainty, claimed / right": f"{self.certain:,} / {self.certain_right:,}",
            **(
                {
                    "certain and right for people not in the file (no background)": _rate_text(
                        self.outside
                    )
                }
                if self.outside is not None
                else {}
            ),
            "mean gain in belief of the true value": f"{self.gain:+.1%}",
            "fewest distinct values in a class": str(self.smallest_diversity),
        }
        for story in self.stories:
            name, _, text = story.partition(": ")
            details[name] = text
        if self.notes:
            details["release"] = "; ".join(n for n in self.notes if n)
        return AttackReport(
            attack="homogeneity",
            target=self.label,
            metric=(
                "whether a target is married is learned with certainty, and rightly"
                if self.sensitive == "married"
                else f"a target's {self.sensitive} is learned with certainty, and rightly"
            ),
            rate=self.rate,
            bound=0.0 if self._guaranteed() else None,
            bound_text="ℓ-diversity: ≥ 2 values left" if self._guaranteed() else "",
            epsilon_spent=self.epsilon,
            budget=self.epsilon,
            details=details,
        )

    def _guaranteed(self) -> bool:
        """Distinct ℓ-diversity rules certainty out when at most ℓ − 2 values are ruled out."""
        return self.kind == "l-diverse" and self.ruled_out <= self.smallest_diversity - 2

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        doc = self.report().to_dict()
        doc["measures"] = {
            "targets": self.targets,
            "certain": self.certain,
            "certain_right": self.certain_right,
            "confident": self.confident,
            "confident_right": self.confident_right,
            "confidence": self.confidence,
            "gain": self.gain,
            "negatives": self.negatives,
            "smallest_diversity": self.smallest_diversity,
        }
        return doc


def score(
    issued: Issued,
    known: pa.Table,
    truth: Sequence[Any],
    *,
    negatives: int = 0,
    facts: Sequence[Fact] = (),
    confidence: float = CONFIDENCE,
    names: Sequence[str] | None = None,
) -> HomogeneityResult:
    """Run the attack on ``known`` targets and score it against their true sensitive values.

    ``truth`` is read here to score and, with ``negatives``, to hand the attacker the most
    damaging true negative facts; the attack itself sees the file, the targets' quasi-identifiers
    and the excluded values only.
    """
    _check(negatives, confidence)
    published = issued.published
    found = match(published, known)
    excluded: list[frozenset[Any]] = (
        apply_facts(known, facts) if facts else [frozenset()] * len(truth)
    )
    if negatives:
        excluded = [
            ex | _worst_negatives(found, i, truth[i], negatives) for i, ex in enumerate(excluded)
        ]
    inferences = infer(published, known, excluded, found)
    prior = Counter(published.table.column(published.sensitive).to_pylist())
    total = sum(prior.values()) or 1
    certain = certain_right = confident = confident_right = 0
    gain = 0.0
    for inference, value in zip(inferences, truth, strict=True):
        left = sum(inference.left.values())
        after = inference.left.get(value, 0) / left if left else prior[value] / total
        gain += after - prior[value] / total
        if inference.certain is not None:
            certain += 1
            certain_right += inference.certain == value
        top = inference.top
        if top is not None and top[1] >= confidence:
            confident += 1
            confident_right += top[0] == value
    stories: tuple[str, ...] = ()
    if names is not None:
        stories = tuple(
            _story(name, inf) for name, inf in zip(names, inferences, strict=True) if name
        )
    diversity = [len(v) for v in found.classes.values]
    return HomogeneityResult(
        label=published.label,
        kind=published.kind,
        sensitive=published.sensitive,
        targets=len(truth),
        certain=certain,
        certain_right=certain_right,
        confident=confident,
        confident_right=confident_right,
        confidence=confidence,
        gain=gain / max(len(truth), 1),
        negatives=negatives,
        facts=tuple(f.says for f in facts),
        notes=published.notes,
        smallest_diversity=min(diversity) if diversity else 0,
        stories=stories,
        ruled_out=max((len(e) for e in excluded), default=0),
        epsilon=published.epsilon,
    )


def _rate_text(rate: Rate) -> str:
    low, high = rate.interval(0.95)
    return f"{rate.estimate:.1%} [{low:.1%}, {high:.1%}] ({rate.successes:,}/{rate.trials:,})"


def _certain_right(published: Any, known: pa.Table, truth: Sequence[Any]) -> Rate:
    """People whose value the attack states with certainty, rightly (no background knowledge)."""
    right = sum(
        inference.certain is not None and inference.certain == value
        for inference, value in zip(infer(published, known), truth, strict=True)
    )
    return Rate(int(right), len(truth))


def _worst_negatives(found: Matches, i: int, value: Any, m: int) -> frozenset[Any]:
    c = found.of_known[i]
    if c < 0:
        return frozenset()
    others = [v for v, _ in found.classes.values[c].most_common() if v != value]
    return frozenset(others[:m])


def _story(name: str, inference: Inference) -> str:
    if not inference.left:
        return f"{name}: no released record matches"
    if inference.certain is not None:
        return f"{name}: {inference.certain} (certain)"
    shares = sum(inference.left.values())
    parts = ", ".join(f"{v} {c / shares:.0%}" for v, c in inference.left.most_common())
    return f"{name}: one of {parts}"


def _check(negatives: int, confidence: float) -> None:
    if isinstance(negatives, bool) or not isinstance(negatives, int) or negatives < 0:
        raise ConfigurationError(
            f"negatives must be a whole number >= 0; got {negatives!r}.",
            fix="pass negatives=1 for an attacker who can rule out one value per target.",
        )
    if not 0 < confidence <= 1:
        raise ConfigurationError(
            f"confidence must be in (0, 1]; got {confidence!r}.", fix="pass confidence=0.9."
        )


# -- the course's table ------------------------------------------------------------------------

_COURSE_ROWS = (
    # name, ZIP code, age, nationality, disease — the slide's rows, in its order
    ("Anya", "13053", 28, "Russian", "Heart"),
    ("Brian", "13068", 29, "American", "Heart"),
    ("Umeko", "13068", 21, "Japanese", "Flu"),
    ("Carol", "13053", 23, "American", "Flu"),
    ("Deepa", "14853", 50, "Indian", "Cancer"),
    ("Ivan", "14853", 55, "Russian", "Heart"),
    ("Ellen", "14850", 47, "American", "Flu"),
    ("Frank", "14850", 59, "American", "Flu"),
    ("Bob", "13053", 31, "American", "Cancer"),
    ("Rahul", "13053", 37, "Indian", "Cancer"),
    ("Hiro", "13068", 36, "Japanese", "Cancer"),
    ("Grace", "13068", 32, "American", "Cancer"),
)
COURSE_TABLE = pa.Table.from_pylist(
    [
        dict(zip(("name", "zip", "age", "nationality", "disease"), row, strict=True))
        for row in _COURSE_ROWS
    ]
)
"""The course's twelve patients (ZIP code, age, nationality, disease), as its slides list them;
the names are added so that the attacker's targets can be told apart (the course names Umeko and
Bob; the others are invented)."""

COURSE_QUASI_IDENTIFIERS = ("zip", "age", "nationality")

COURSE_HIERARCHIES: Mapping[str, Hierarchy] = {
    "zip": Hierarchy.mask([1, 2]),
    "age": Hierarchy.tree(
        {str(a): ["<30" if a < 30 else ("30-40" if a <= 40 else ">40")] for a in range(121)}
    ),
    "nationality": Hierarchy.identity(),
}
"""The course's generalisation: ZIP codes masked (``1305*``, ``130**``), ages in three bands,
nationality withheld."""

COURSE_FACTS = (
    Fact(
        {"nationality": "Japanese"},
        frozenset({"Heart"}),
        "Japanese people rarely have heart disease",
    ),
)
"""The course's background knowledge."""

COURSE_STORIES = pa.table(
    {
        "name": ["Bob", "Umeko"],
        "zip": ["13053", "13068"],
        "age": [35, 24],
        "nationality": [None, "Japanese"],
    }
)
"""What the course's attacker knows about Bob (35, ZIP 13053) and Umeko (24, ZIP 13068, Japanese)."""


def course_release(against: str, *, k: int = 4, l: int = 3, t: float = 0.2) -> Issued:  # noqa: E741
    """A release of :data:`COURSE_TABLE`: ``raw`` (names dropped), ``k-anonymous``, ``l-diverse``
    or ``t-close`` with the course's hierarchies (``dalenius`` has no course counterpart: refused).

    Example:
        >>> course_release("k-anonymous").published.notes[0]
        'levels zip=2, age=1, nationality=1'
    """
    if against == "dalenius":
        raise ConfigurationError(
            "the lab has no Dalenius release of the course's twelve patients: a differentially "
            "private table of twelve people is mostly noise, by design, so there is nothing to "
            "compare.",
            fix="run the homogeneity attack on the census (--data census) against dalenius.",
        )
    models = check_against(against, k=k, l=l, t=t)
    records = COURSE_TABLE.append_column("row", pa.array(range(1, COURSE_TABLE.num_rows + 1)))
    if against == "raw":
        return deidentified(
            records,
            quasi_identifiers=COURSE_QUASI_IDENTIFIERS,
            sensitive="disease",
            id_column="row",
        )
    return anonymous(
        records,
        models=models,
        sensitive="disease",
        quasi_identifiers=COURSE_QUASI_IDENTIFIERS,
        hierarchies=COURSE_HIERARCHIES,
        suppression_limit=0.0,
        id_column="row",
        kind=against,
    )


def run_course(
    against: str = "k-anonymous",
    *,
    k: int = 4,
    l: int = 3,  # noqa: E741
    t: float = 0.2,
    background: bool = True,
    negatives: int = 0,
    confidence: float = CONFIDENCE,
) -> HomogeneityResult:
    """The course's attack on its twelve patients: every patient is a target, Bob and Umeko are
    told as the course tells them.

    Example:
        >>> r = run_course("k-anonymous", background=False)
        >>> r.certain_right, r.targets   # the four patients of 130**, 30-40 all have cancer
        (4, 12)
    """
    _check(negatives, confidence)
    issued = course_release(against, k=k, l=l, t=t)
    facts = COURSE_FACTS if background else ()
    known = COURSE_TABLE.select(list(COURSE_QUASI_IDENTIFIERS))
    result = score(
        issued,
        known,
        COURSE_TABLE.column("disease").to_pylist(),
        negatives=negatives,
        facts=facts,
        confidence=confidence,
    )
    stories_known = COURSE_STORIES.select(list(COURSE_QUASI_IDENTIFIERS))
    excluded = apply_facts(stories_known, facts)
    told = infer(issued.published, stories_known, excluded)
    stories = tuple(
        _story(str(name), inf)
        for name, inf in zip(COURSE_STORIES.column("name").to_pylist(), told, strict=True)
    )
    return _with_stories(result, stories, "the course's twelve patients")


def _with_stories(
    result: HomogeneityResult, stories: tuple[str, ...], where: str
) -> HomogeneityResult:
    return replace(result, stories=stories, notes=(*result.notes, where))


def run(
    against: str = "k-anonymous",
    *,
    n: int = 50_000,
    k: int = 5,
    l: int = 3,  # noqa: E741
    t: float = 0.2,
    epsilon: float = 1.0,
    delta: float = 1e-6,
    negatives: int = 0,
    confidence: float = CONFIDENCE,
    sensitive: str = SENSITIVE,
    release_share: float = 0.5,
    seed: int = 1994,
    world: Scenario | None = None,
) -> HomogeneityResult:
    """The attack on the demo census's released file: every released person is a target whose
    ZIP code, date of birth and sex the attacker knows.

    Example:
        >>> r = run("raw", n=2_000, seed=7)
        >>> r.rate.estimate == 1.0   # names dropped: every class is one person
        True
    """
    _check(negatives, confidence)
    check_against(against, k=k, l=l, t=t)
    world = world or scenario(n, release_share=release_share, seed=seed)
    issued = publish(
        world, against, k=k, l=l, t=t, epsilon=epsilon, delta=delta, sensitive=sensitive
    )
    columns = ["zip", "date_of_birth", "sex"]
    known = world.released.select(columns)
    truth = world.released.column(sensitive).to_pylist()
    result = score(issued, known, truth, negatives=negatives, confidence=confidence)
    released = pa.array(world.truth.release_ids)
    others = world.population.filter(
        pc.invert(pc.is_in(world.population.column("person_id"), value_set=released))
    )
    outside = _certain_right(
        issued.published, others.select(columns), others.column(sensitive).to_pylist()
    )
    return replace(result, outside=outside)


def plot(results: Sequence[HomogeneityResult], path: Any, *, title: str = "") -> Any:
    """Bars per release: the share of targets whose value was learned with certainty, with the
    stated confidence, and (census) the same certainty for people not in the file.
    """
    plt = pyplot()
    labels = [_short(r) for r in results]
    y = np.arange(len(results))
    series = [
        ("learned with certainty", [r.rate for r in results], "C3"),
        (
            f"learned with ≥ {results[0].confidence:.0%} confidence" if results else "",
            [r.confident_rate for r in results],
            "C1",
        ),
    ]
    if any(r.outside is not None for r in results):
        series.append(
            (
                "certainty for people not in the file",
                [r.outside if r.outside is not None else Rate(0, 0) for r in results],
                "C0",
            )
        )
    height = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(7.5, 1.1 + 0.75 * len(results)), dpi=120)
    for i, (name, rates, colour) in enumerate(series):
        values = [r.estimate for r in rates]
        low = [r.estimate - r.interval(0.95)[0] for r in rates]
        high = [r.interval(0.95)[1] - r.estimate for r in rates]
        pos = y - 0.4 + height * (i + 0.5)
        ax.barh(
            pos,
            values,
            height=height,
            color=colour,
            label=name,
            xerr=[low, high],
            capsize=2,
            error_kw={"elinewidth": 0.8, "ecolor": "0.35"},
        )
        for p, v, h in zip(pos, values, high, strict=True):
            ax.text(v + h + 0.01, p, f"{v:.0%}", va="center", fontsize=8)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.15)
    ax.set_xlabel(
        f"share of targets whose {results[0].sensitive if results else 'value'} is learned rightly"
    )
    ax.set_title(title or "Homogeneity attack: what each release discloses")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return save(fig, Path(path))


def _short(result: HomogeneityResult) -> str:
    if result.kind == "raw":
        return "names dropped"
    if result.kind == "dalenius":
        return result.label.replace("dalenius (synthetic, ", "Dalenius\n(").replace("δ=", "\nδ=")
    return (
        result.label.replace("k-anonymity (k=", "k=")
        .replace("distinct ℓ-diversity (ℓ=", "ℓ=")
        .replace("t-closeness (t=", "t=")
        .replace(")", "")
        .replace(" + ", ", ")
    )
