"""Synthetic microdata with AIM: workload-adaptive selection of the marginals to measure.

AIM (McKenna, Mullins, Sheldon & Miklau, VLDB 2022) spends its budget where the model is worst
at the marginals the user cares about — the **workload**, here every ``degree``-way marginal of the
chosen columns (2 by default, or 3):

1. **measure** every column's counts (1-way marginals) with discrete Gaussian noise;
2. each **round**, select a marginal ``r`` among the workload's marginals and their subsets with
   the exponential mechanism, on the quality ``w_r·(‖M_r(D) − M_r(p̂)‖₁ − √(2/π)·σ·n_r)``: how far
   the current model ``p̂`` is from the data on ``r``, less the error the measurement's own noise
   would leave (``n_r`` cells of noise σ), weighted by how many workload columns ``r`` covers;
3. **measure** ``r`` with discrete Gaussian noise and re-estimate the model;
4. **anneal**: when the model's marginal on ``r`` moved less than ``√(2/π)·σ·n_r`` — the
   measurement was too noisy to teach it anything — halve σ and double the selection's ε for the
   rounds that follow (each round then costs four times as much);
5. stop when the ρ left cannot pay two more rounds: the last round spends all of it.

ρ is spent as AIM spends it: ``T = 16·d`` rounds are planned, each of ``ρ/T`` (nine tenths for
the Gaussian, one tenth for the selection), and the 1-way marginals get the Gaussian's share of
a round each. Every mechanism is charged, before it draws, to an odometer that refuses anything
past ρ; the schedule never asks it to.

**Estimation without Private-PGM.** AIM re-estimates the maximum-entropy model consistent with the
noisy marginals by Private-PGM (``mbi``), which needs JAX. Dalenius keeps AIM's selection and
budget adaptation and restricts the model to a decomposable graph instead: a marginal is eligible
only if the graph joining the columns of the marginals measured so far stays chordal with
cliques of at most three columns, or if it falls inside a clique; and, as AIM bounds the model's
size, only if the model's tables then hold at most ``MODEL_CELLS × (ρ spent / ρ)`` cells. On
such a graph the model is the junction-tree factorisation, in closed form
(:mod:`dalenius.releases.junction`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from dalenius.core.catalog import Catalog
from dalenius.core.errors import InternalError, QueryError
from dalenius.core.loss import Loss
from dalenius.core.rng import RandomSource
from dalenius.mechanisms.exponential import ExponentialMechanism
from dalenius.mechanisms.gaussian import IntegerGaussian
from dalenius.plan.protocol import (
    as_declared,
    loss_parts,
    register_product,
    request_doc,
    rho_of,
    scaled_epsilon,
    scaled_rho,
)
from dalenius.releases.junction import (
    Attrs,
    JunctionModel,
    NoisyMarginal,
    chordal_cliques,
    estimate,
    model_cells,
)
from dalenius.releases.synth_table import (
    MAX_CELLS,
    Contingency,
    SynthesisSteps,
    SyntheticRelease,
    em_epsilon,
    marginal,
    plan_columns,
    recorded_columns,
    rows_from,
    synth_loss,
    vector_gaussian,
)

AIM_FORMAT = "synthetic-aim-1"
"""The ledger record's format: the request, every noisy marginal with its ρ, each selection's ε,
and the sampling seed."""

ROUNDS_PER_COLUMN = 16
"""AIM's planned rounds per column: ``T = 16·d``, each round ``ρ/T`` until annealing."""

GAUSSIAN_SHARE = Fraction(9, 10)
"""The share of a round's ρ its Gaussian measurement gets; the selection gets the rest."""

MODEL_CELLS = 1_000_000
"""The model's tables may hold at most this many cells (times the share of ρ spent so far)."""

DEGREES = (2, 3)
"""The workloads offered: every 2-way or every 3-way marginal of the chosen columns."""


@dataclass(frozen=True)
class AimRequest:
    """The table and columns to synthesise with AIM, its workload's ``degree``, numeric columns
    in ``bins`` bins, ``rows`` rows.
    """

    table: str
    columns: tuple[str, ...] | None = None
    bins: int = 10
    rows: int | None = None
    where: str | None = None
    degree: int = 2


def cost_of(mechanism: IntegerGaussian | ExponentialMechanism) -> Fraction:
    """A mechanism's ρ as calibrated: a Gaussian's ρ, an exponential mechanism's ε²/8."""
    if isinstance(mechanism, ExponentialMechanism):
        return mechanism.epsilon * mechanism.epsilon / 8
    return rho_of(mechanism.loss)


class Odometer:
    """The run's ρ, charged mechanism by mechanism before each draws; past the cap it refuses.

    Gaussian mechanisms cost their ρ, exponential mechanisms ε²/8 (Cesar & Rogers 2021), each
    as calibrated (the privacy map scales them to the sensitivity the catalog requires).
    """

    def __init__(self, cap: Fraction) -> None:
        self.cap = cap
        self.spent = Fraction(0)

    @property
    def remaining(self) -> Fraction:
        """What may still be spent."""
        return self.cap - self.spent

    def charge(self, mechanism: IntegerGaussian | ExponentialMechanism) -> None:
        """Charge one mechanism, or refuse it (a defect: the schedule never overspends)."""
        cost = cost_of(mechanism)
        if self.spent + cost > self.cap:
            raise InternalError(
                f"AIM asked for a mechanism costing ρ = {cost} with {self.remaining} left."
            )
        self.spent += cost


@dataclass
class Schedule:
    """AIM's ρ per round: ``round_rho`` until annealing multiplies it by four (σ halved, ε
    doubled); a round that would leave less than one more round spends everything left.
    """

    round_rho: Fraction

    def next(self, remaining: Fraction) -> tuple[Fraction, Fraction, bool]:
        """The Gaussian's ρ, the selection's ρ and whether this is the last round."""
        last = remaining < 2 * self.round_rho
        total = remaining if last else self.round_rho
        gaussian = GAUSSIAN_SHARE * total
        return gaussian, total - gaussian, last

    def anneal(self) -> None:
        """σ halved and ε doubled for the rounds to come."""
        self.round_rho *= 4


@dataclass
class AimRecord:
    """The noisy measurements (what the ledger records): each marginal with its Gaussian's ρ,
    and the ε of each round's selection.
    """

    marginals: list[NoisyMarginal] = field(default_factory=list)
    rhos: list[Fraction] = field(default_factory=list)
    selections: list[Fraction] = field(default_factory=list)

    def add(self, measured: NoisyMarginal, rho: Fraction) -> None:
        """One noisy marginal, measured at ``rho``."""
        self.marginals.append(measured)
        self.rhos.append(rho)

    def spent(self) -> Fraction:
        """The ρ of every mechanism drawn, as calibrated: Gaussians' ρ plus selections' ε²/8."""
        return sum(self.rhos, Fraction(0)) + sum((e * e / 8 for e in self.selections), Fraction(0))

    def cliques(self, columns: int) -> list[Attrs]:
        """The model's cliques: the chordal graph of the measured marginals."""
        found = chordal_cliques(columns, [m.attrs for m in self.marginals])
        if found is None:
            raise InternalError("the measured marginals of an AIM record are not decomposable")
        return found

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {
            "marginals": [
                {
                    "attrs": list(m.attrs),
                    "values": m.values.tolist(),
                    "variance": m.variance,
                    "rho": str(rho),
                }
                for m, rho in zip(self.marginals, self.rhos, strict=True)
            ],
            "selections": [str(e) for e in self.selections],
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> AimRecord:
        """Inverse of :meth:`to_json`."""
        out = AimRecord(selections=[Fraction(e) for e in doc["selections"]])
        for m in doc["marginals"]:
            attrs = tuple(int(a) for a in m["attrs"])
            values = np.asarray(m["values"], dtype=np.float64)
            out.add(NoisyMarginal(attrs, values, float(m["variance"])), Fraction(m["rho"]))
        return out


def workload_candidates(columns: int, degree: int) -> list[Attrs]:
    """The marginals AIM may select: every set of at most ``degree`` columns (the workload's
    marginals and their subsets).
    """
    top = min(degree, columns)
    return [c for k in range(1, top + 1) for c in itertools.combinations(range(columns), k)]


def quality(exact: np.ndarray, counts: np.ndarray, weight: int, sigma: float) -> Fraction:
    """AIM's quality of a candidate: ``w·(‖M_r(D) − round(M_r(p̂))‖₁ − √(2/π)·σ·n_r)``, exact.

    The model's counts are rounded to integers (post-processing of public values), so the data's
    part is an exact integer and two neighbours' qualities differ by at most ``w·R``, with no
    floating-point slack; the bias term depends only on public σ and ``n_r``.
    """
    model = np.rint(counts).astype(np.int64)
    l1 = int(np.abs(exact.astype(np.int64) - model).sum())
    bias = Fraction(math.sqrt(2 / math.pi) * sigma * exact.size)
    return weight * (l1 - bias)


def select(
    candidates: Sequence[Attrs],
    exact: dict[Attrs, np.ndarray],
    model: JunctionModel,
    selector: ExponentialMechanism,
    sigma: float,
    rng: RandomSource | None = None,
) -> int:
    """Step 2: the index of the candidate the exponential mechanism picks on AIM's quality
    (weight ``w_r = |r|``) against the current model.
    """
    scores = [quality(exact[r], model.counts(r), len(r), sigma) for r in candidates]
    return selector.select(scores, rng=rng)


@dataclass(frozen=True)
class AimPlan(SynthesisSteps[AimRecord]):
    """An AIM release ready to run (an :class:`AimRequest`): the exact statement, the domains,
    the workload's degree, ρ.
    """

    # -- the release protocol (dalenius.plan.protocol) ----------------------------------------

    answer_format: ClassVar[str] = AIM_FORMAT
    plan_class: ClassVar[str] = "aim"
    method: ClassVar[str] = "aim"

    @property
    def using(self) -> str:
        """The method in the audit trail's text."""
        return f" WITH AIM({self.request.degree})"

    @property
    def sizes(self) -> tuple[int, ...]:
        """The number of values of each column."""
        return tuple(len(d.labels) for d in self.domains)

    @property
    def degree(self) -> int:
        """The workload's marginals' size (at most the number of columns)."""
        return min(int(self.request.degree), len(self.domains))

    @property
    def rounds(self) -> int:
        """AIM's planned rounds ``T = 16·d``."""
        return ROUNDS_PER_COLUMN * len(self.domains)

    def max_rounds(self) -> int:
        """The most rounds a run can take: the schedule's, were it never to anneal.

        Annealing makes every later round four times dearer and the last round comes when what
        is left cannot pay two, so a run that anneals only ends sooner. Public: ρ, d and R only.
        """
        remaining = self.rho - len(self.domains) * cost_of(self.gaussian(self.first_rho))
        schedule = Schedule(self.rho / self.rounds)
        rounds = 0
        while True:
            gaussian_rho, selection_rho, last = schedule.next(remaining)
            rounds += 1
            if last:
                return rounds
            remaining -= cost_of(self.selector(selection_rho)) + cost_of(
                self.gaussian(gaussian_rho)
            )

    @property
    def first_rho(self) -> Fraction:
        """Each 1-way marginal's ρ: the Gaussian's share of a planned round."""
        return GAUSSIAN_SHARE * self.rho / self.rounds

    def gaussian(self, rho: Fraction) -> IntegerGaussian:
        """A marginal's discrete Gaussian at ``rho``, calibrated for L2 sensitivity R."""
        return vector_gaussian(self.max_rows, rho)

    def selector(self, rho: Fraction) -> ExponentialMechanism:
        """A round's exponential mechanism at ``ε = √(8ρ)`` (rounded down), calibrated for the
        qualities' sensitivity ``max_r w_r·R`` — the weight ``w_r = |r|`` is at most the degree.
        """
        return ExponentialMechanism(self.degree * self.max_rows, em_epsilon(rho, 1))

    def privacy_map(self) -> Loss:
        """The worst case of AIM's adaptive rounds, each mechanism at the unit's row cap.

        d Gaussian 1-way marginals at ``first_rho``; then rounds whose number depends on the
        noisy answers, but whose calibrated ρ the odometer stops at ``ρ − d·first_rho``. A
        mechanism calibrated for sensitivity Δ but facing a unit that moves its input by Δ'
        costs ``(Δ'/Δ)²`` times its calibrated ρ (Gaussian: ``ρ·(Δ'/Δ)²``; exponential:
        ``(ε·Δ'/Δ)²/8``), so the rounds cost at most the larger ratio times what is left.
        """
        required = self.exact.query.unit.max_rows
        d = len(self.domains)
        one = self.gaussian(self.first_rho)
        total = d * scaled_rho(rho_of(one.loss), one.sensitivity, required)
        gaussian = self.gaussian(self.rho / self.rounds)
        selector = self.selector(self.rho / self.rounds)
        ratio_gaussian = scaled_rho(Fraction(1), gaussian.sensitivity, required)
        ratio_selector = scaled_epsilon(Fraction(1), selector.sensitivity, self.degree * required)
        left = self.rho - d * rho_of(one.loss)
        total += left * max(ratio_gaussian, ratio_selector * ratio_selector)
        return as_declared(total, self.loss)

    def measurements_from(self, doc: dict[str, Any]) -> AimRecord:
        """The measurements of a record's JSON."""
        return AimRecord.from_json(doc)

    def fingerprint(self) -> str:
        """A hash naming exactly what is released."""
        payload = {
            "kind": "synthetic-aim",
            "request": request_doc(self.request),
            "domains": [[d.name, [str(v) for v in d.labels]] for d in self.domains],
            "loss": str(self.loss),
            "plan": self.exact.fingerprint(),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    # -- AIM ------------------------------------------------------------------------------------

    def measure(self, table: Contingency, rng: RandomSource | None = None) -> AimRecord:
        """Steps 1–5: the 1-way marginals, then selected, measured, annealed rounds.

        Every mechanism is charged to the odometer before it draws; the record's own sum of
        what was drawn is checked against ρ once more at the end. After each round the progress
        callback, if any, learns the round, the ρ drawn so far and the marginal selected.
        """
        sizes, d = self.sizes, len(self.domains)
        odometer = Odometer(self.rho)
        candidates = workload_candidates(d, self.degree)
        exact = {c: marginal(table, c) for c in candidates}
        record = AimRecord()
        one = self.gaussian(self.first_rho)
        for i in range(d):
            odometer.charge(one)
            counts = one.release(exact[(i,)], rng=rng).astype(np.float64)
            record.add(NoisyMarginal((i,), counts, float(one.sigma2)), self.first_rho)
        cliques: list[Attrs] = [(i,) for i in range(d)]
        model = estimate(record.marginals, sizes, cliques)
        schedule = Schedule(self.rho / self.rounds)
        eligible = Eligibility(candidates, sizes)
        most = self.max_rounds() if self.progress is not None else 0
        while True:
            gaussian_rho, selection_rho, last = schedule.next(odometer.remaining)
            selector, gaussian = self.selector(selection_rho), self.gaussian(gaussian_rho)
            odometer.charge(selector)
            odometer.charge(gaussian)
            options = eligible.options(cliques, MODEL_CELLS * odometer.spent / self.rho)
            sigma = math.sqrt(float(gaussian.sigma2))
            pick = select([r for r, _ in options], exact, model, selector, sigma, rng)
            chosen, cliques = options[pick]
            noisy = gaussian.release(exact[chosen].reshape(-1), rng=rng)
            before = model.counts(chosen)
            measured = noisy.reshape(exact[chosen].shape).astype(np.float64)
            record.add(NoisyMarginal(chosen, measured, float(gaussian.sigma2)), gaussian_rho)
            record.selections.append(selector.epsilon)
            model = estimate(record.marginals, sizes, cliques)
            self.report(len(record.selections), most, odometer.spent, chosen)
            if last:
                break
            moved = float(np.abs(model.counts(chosen) - before).sum())
            if moved <= math.sqrt(2 / math.pi) * sigma * exact[chosen].size:
                schedule.anneal()
        if record.spent() > self.rho:
            raise InternalError(f"AIM drew mechanisms costing ρ = {record.spent()} > {self.rho}")
        return record

    def model(self, record: AimRecord) -> JunctionModel:
        """The decomposable model fitted to a record's measurements (post-processing)."""
        return estimate(record.marginals, self.sizes, record.cliques(len(self.domains)))

    def synthesise(
        self, record: AimRecord, rows: int | None = None, seed: int | None = None
    ) -> SyntheticRelease:
        """The model fitted to the measurements, then rows sampled from it (post-processing)."""
        model = self.model(record)
        n = rows if rows is not None else self.request.rows
        if n is None:
            n = max(0, round(model.total))
        return rows_from(
            self.domains,
            model.sample,
            n,
            seed,
            edges=tuple(tuple(self.domains[a].name for a in c) for c in model.cliques),
            loss=self.loss,
            measurements=record,
            method="aim",
        )


class Eligibility:
    """Which candidates a round may select, given the model's cliques (cached per clique set):
    those inside a clique, and those that keep the graph chordal with small cliques, within the
    model's size limit.
    """

    def __init__(self, candidates: Sequence[Attrs], sizes: Sequence[int]) -> None:
        self.candidates = list(candidates)
        self.sizes = tuple(sizes)
        self._known: dict[tuple[Attrs, ...], list[tuple[Attrs, list[Attrs], int]]] = {}

    def options(self, cliques: list[Attrs], limit: Fraction) -> list[tuple[Attrs, list[Attrs]]]:
        """``(candidate, the cliques once it is measured)`` for every eligible candidate."""
        key = tuple(cliques)
        if key not in self._known:
            found = []
            for r in self.candidates:
                if any(set(r) <= set(c) for c in cliques):
                    found.append((r, cliques, 0))
                    continue
                after = chordal_cliques(len(self.sizes), [*cliques, r])
                if after is not None:
                    found.append((r, after, model_cells(after, self.sizes)))
            self._known[key] = found
        return [(r, after) for r, after, cells in self._known[key] if cells <= limit]


def plan_aim(
    catalog: Catalog,
    request: AimRequest,
    *,
    epsilon: Fraction | None,
    delta: Fraction | None,
    rho: Fraction | None = None,
) -> AimPlan:
    """Validate an AIM request and fix its domains, workload and loss; reads no data."""
    if request.degree not in DEGREES:
        raise QueryError(
            f"degree must be 2 or 3, got {request.degree}.",
            why="AIM's workload is every 2-way or every 3-way marginal of the chosen columns.",
            fix="pass degree=2 (the default) or degree=3.",
        )
    columns = plan_columns(
        catalog, request.table, request.columns, request.bins, request.where, request.rows
    )
    sizes = columns.sizes
    cells = sum(
        math.prod(sizes[a] for a in c) for c in workload_candidates(len(sizes), request.degree)
    )
    if cells > MAX_CELLS:
        raise QueryError(
            f"the workload's marginals hold {cells} cells, more than {MAX_CELLS}.",
            fix="use degree=2, fewer columns or fewer bins.",
        )
    loss, total_rho = synth_loss(epsilon, delta, rho)
    plan = AimPlan(
        request, columns.domains, columns.exact, columns.tables, loss, total_rho, columns.max_rows
    )
    # Decided here, before any data is read: every Gaussian of the run has at least the 1-way
    # marginals' ρ, so its noise fits the integer grid if theirs does.
    plan.gaussian(plan.first_rho)
    return plan


@dataclass(frozen=True)
class AimKind:
    """How an AIM release is planned again from its ledger record (fetch by entry id)."""

    answer_format: ClassVar[str] = AIM_FORMAT

    def plan_again(self, catalog: Catalog, request: Any, loss: Loss) -> AimPlan:
        """The plan of the recorded request under the loss it was charged."""
        epsilon, delta, rho = loss_parts(loss)
        return plan_aim(
            catalog,
            AimRequest(**recorded_columns(request), degree=int(request["degree"])),
            epsilon=epsilon,
            delta=delta,
            rho=rho,
        )


register_product(AimKind())
