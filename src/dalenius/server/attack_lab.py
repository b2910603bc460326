"""The attack lab through the gateway: the course's attacks, run on their own synthetic worlds.

Every experiment here writes its own seeded population with the demo generators
(:mod:`dalenius.attacks.population`, :mod:`dalenius.attacks.voters`) and attacks targets built on
it: the raw database, a naive system adding fresh noise, a k-anonymous (ℓ-diverse, t-close)
release and Dalenius. No registered dataset, budget or ledger of the gateway is read or touched,
so any signed-in caller may run it: what it shows is what ``dalenius attack`` prints to anyone
with the package. What a run costs is the gateway's time, so the sizes are capped (a class needs
seconds, not minutes; the command line has no caps) and one run at a time is allowed per gateway
— a second caller is told to wait rather than queued behind it.

Each report's bound is labelled by what guarantees it: a differential-privacy bound (``e^ε/(1+e^ε)``
for a naive or Dalenius target), k-anonymity's 1/k and ℓ-diversity's "at least ℓ values left" —
syntactic properties of one release, not DP bounds — or a synthetic release's "no released row
is a person's".
"""

from __future__ import annotations

import base64
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dalenius.attacks import homogeneity, lab, linking
from dalenius.attacks.published import AGAINST, check_against, publish
from dalenius.attacks.targets import KINDS
from dalenius.attacks.voters import scenario
from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import as_fraction
from dalenius.server.store import ConflictError


@dataclass(frozen=True)
class Size:
    """An option's default in the console and the largest value the gateway runs."""

    default: int
    cap: int


QUERY_SIZES: dict[str, dict[str, Size]] = {
    "differencing": {"people": Size(50, 500), "trials": Size(40, 300)},
    "averaging": {"people": Size(50, 500), "trials": Size(10, 100), "asks": Size(20, 200)},
    "reconstruction": {"people": Size(40, 200), "queries": Size(0, 2_000)},
    "membership": {"people": Size(200, 2_000), "trials": Size(40, 400)},
    "auxiliary": {"people": Size(200, 2_000), "trials": Size(40, 200)},
}
"""Sizes of the query attacks (``queries`` 0: the attack's own n·ln n)."""

MICRODATA_SIZES = {"people": Size(3_000, 20_000)}
"""Sizes of the microdata attacks (linking, homogeneity) on the demo census."""

MICRODATA = ("linking", "homogeneity")
ATTACKS = (*lab.ATTACKS, *MICRODATA)
"""Every attack the lab runs, query attacks first."""

LINKING_KS = (1, 2, 5, 10, 25)
"""The k values of the linking plot (1: the file with names dropped)."""

_RUNNING = threading.Lock()


def catalogue() -> dict[str, Any]:
    """What the console needs to draw the lab's form: attacks, targets, defaults and caps."""
    attacks = []
    for name in ATTACKS:
        query = name in lab.ATTACKS
        sizes = QUERY_SIZES[name] if query else MICRODATA_SIZES
        attacks.append(
            {
                "name": name,
                "kind": "query" if query else "microdata",
                "targets": list(KINDS) if query else list(AGAINST),
                "default_targets": list(KINDS) if query else ["raw", "k-anonymous", "l-diverse"],
                "sizes": {k: {"default": s.default, "cap": s.cap} for k, s in sizes.items()},
                "plot": (lab.ATTACKS[name].plot if query else _MICRO_PLOTS[name]),
            }
        )
    return {"attacks": attacks}


_MICRO_PLOTS = {"linking": "links vs k", "homogeneity": "rates by release"}


def run(name: str, request: Any) -> dict[str, Any]:
    """Run attack ``name`` as ``request`` says (checked and capped first); one run at a time."""
    if name not in ATTACKS:
        raise ConfigurationError(
            f"unknown attack {name!r}.", fix=f"use one of {', '.join(ATTACKS)}."
        )
    query = name in lab.ATTACKS
    sizes = _sizes(name, request, QUERY_SIZES[name] if query else MICRODATA_SIZES)
    against = list(request.against or (KINDS if query else ("raw", "k-anonymous", "l-diverse")))
    allowed = KINDS if query else AGAINST
    for kind in against:
        if kind not in allowed:
            raise ConfigurationError(
                f"the {name} attack has no target {kind!r}.", fix=f"use {', '.join(allowed)}."
            )
    if not _RUNNING.acquire(blocking=False):
        raise ConflictError(
            "Another attack is running on this gateway.",
            why="the lab runs one experiment at a time, so a class cannot starve the gateway.",
            fix="try again in a few seconds.",
        )
    try:
        with tempfile.TemporaryDirectory(prefix="dalenius-lab-") as folder:
            plot = Path(folder) / f"{name}.png"
            if query:
                reports = _query(name, request, against, sizes, plot if request.plot else None)
            else:
                reports = _microdata(name, request, against, sizes, plot if request.plot else None)
            image = plot.read_bytes() if plot.exists() else None
    finally:
        _RUNNING.release()
    return {
        "attack": name,
        "sizes": sizes,
        "reports": reports,
        "plot": None
        if image is None
        else "data:image/png;base64," + base64.b64encode(image).decode(),
    }


def _sizes(name: str, request: Any, sizes: Mapping[str, Size]) -> dict[str, int]:
    chosen: dict[str, int] = {}
    for option, size in sizes.items():
        value = getattr(request, option, None)
        value = size.default if value is None else value
        if not 0 <= value <= size.cap:
            raise ConfigurationError(
                f"{option} must be between 0 and {size.cap:,} in the lab; got {value:,}.",
                fix=f"lower {option}, or run `dalenius attack {name}` on your machine for more.",
            )
        chosen[option] = value
    return chosen


def _query(
    name: str, request: Any, against: list[str], sizes: dict[str, int], plot: Path | None
) -> list[dict[str, Any]]:
    options: dict[str, Any] = {k: v for k, v in sizes.items() if not (k == "queries" and v == 0)}
    if request.seed is not None:
        options["seed"] = request.seed
    if lab.ATTACKS[name].plot is None:
        plot = None
    found = lab.compare(
        name,
        against=against,
        epsilon=request.epsilon,
        budget=request.budget,
        plot=plot,
        **options,
    )
    return [_labelled(r.to_dict()) for r in found]


def _microdata(
    name: str, request: Any, against: list[str], sizes: dict[str, int], plot: Path | None
) -> list[dict[str, Any]]:
    k, l, t = request.k, request.l, request.t  # noqa: E741 - the literature's names
    for kind in against:
        check_against(kind, k=k, l=l, t=t)
    seed = 1994 if request.seed is None else request.seed
    world = scenario(sizes["people"], release_share=0.5, seed=seed)
    epsilon = float(as_fraction(request.epsilon, "epsilon")) if request.epsilon is not None else 1.0
    common = {"k": k, "l": l, "t": t, "epsilon": epsilon, "delta": 1e-6}
    if name == "linking":
        results = [linking.attack(publish(world, kind, **common), world) for kind in against]
        if plot is not None:
            swept = [
                linking.attack(
                    publish(world, "raw" if kk == 1 else "k-anonymous", **{**common, "k": kk}),
                    world,
                )
                for kk in LINKING_KS
            ]
            linking.plot(swept, plot)
        return [_labelled(r.to_dict(), kind) for r, kind in zip(results, against, strict=True)]
    found = [
        homogeneity.run(kind, **common, negatives=0, confidence=homogeneity.CONFIDENCE, world=world)
        for kind in against
    ]
    if plot is not None:
        homogeneity.plot(
            found, plot, title=f"Homogeneity attack on the demo census ({sizes['people']:,})"
        )
    return [_labelled(r.to_dict(), kind) for r, kind in zip(found, against, strict=True)]


def _labelled(doc: dict[str, Any], kind: str | None = None) -> dict[str, Any]:
    """The report with ``target_kind`` and, beside its bound, ``guarantee``: what the bound is."""
    doc["target_kind"] = kind or str(doc["target"]).split(" ", 1)[0].rstrip(",")
    if "bound" in doc:
        doc["bound"]["guarantee"] = guarantee(str(doc["bound"]["formula"]))
    return doc


def guarantee(formula: str) -> str:
    """What a bound rests on, from its formula: DP, a syntactic model, or synthetic rows.

    Example:
        >>> guarantee("e^ε/(1+e^ε)"), guarantee("1/k = 1/5")
        ('differential privacy', 'k-anonymity (a syntactic property, not DP)')
    """
    if "e^ε" in formula:
        return "differential privacy"
    if formula.startswith("1/k"):
        return "k-anonymity (a syntactic property, not DP)"
    if formula.startswith("ℓ-diversity"):
        return "ℓ-diversity (a syntactic property, not DP)"
    if "no released row" in formula:
        return "synthetic rows (no record is a person's; not a DP bound)"
    return formula
