"""Test-only hook: answer a query with the noise switched off.

It drives the same steps as :meth:`dalenius.engine.session.Session.query` — validation, the DP
plan, the exact SQL in the engine, post-processing — but skips the noise, the private selections
and the ledger: every observed group is kept and each quantile takes its exact bin. It lives in
the test tree, not in the package, so no configuration can switch it on.
"""

from __future__ import annotations

from typing import Any

from dalenius.engine.noise import Exact, Noisy, selection_utilities
from dalenius.engine.postprocess import Answer, exact_values, post_process
from dalenius.engine.session import Session


def exact_data(
    session: Session, sql: str, epsilon: Any = 1, delta: Any = None, *, salt: int | None = None
) -> tuple[Any, Exact]:
    """The plan and the exact per-group measurements of ``sql`` (``salt``: the bounding hash key)."""
    prepared = session.prepare(sql, epsilon, delta, salt=salt)
    for table in prepared.tables:
        session.executor.prepare(table)
    main = session.executor.fetch(prepared.exact.main)
    histograms = {name: session.executor.fetch(q) for name, q in prepared.exact.histograms}
    return prepared.plan, exact_values(prepared.plan, main, histograms)


def exact_answer(session: Session, sql: str, epsilon: Any = 1, delta: Any = None) -> Answer:
    """The noise-free answer to ``sql`` (exact clipped, bounded aggregates, post-processed)."""
    plan, exact = exact_data(session, sql, epsilon, delta)
    values = {name: [int(v) for v in arr] for name, arr in exact.scalars.items()}
    bins = {}
    for i, stat in enumerate(plan.statistics):
        if stat.kind == "quantile":
            m = plan.measurement(stat.inputs[0])
            chosen = []
            for row in exact.histograms[m.name]:
                utilities = selection_utilities(stat, m, [int(c) for c in row])
                chosen.append(max(range(len(utilities)), key=lambda b, u=utilities: (u[b], -b)))
            bins[f"s{i}"] = chosen
    noisy = Noisy(groups=list(exact.groups), values=values, bins=bins)
    return post_process(plan, noisy, session.confidence)


def exact_units_for(
    session: Session, sql: str, epsilon: Any = 1, delta: Any = None, *, salt: int | None = None
) -> dict[str, list[int]]:
    """The exact measurements (grid units) of ``sql``, per group."""
    _, exact = exact_data(session, sql, epsilon, delta, salt=salt)
    out = {k: [int(x) for x in v] for k, v in exact.scalars.items()}
    for name, counts in exact.histograms.items():
        out[name] = [int(x) for x in counts.reshape(-1)]
    return out


def neighbour_moves(with_unit: Session, without: Session, sql: str, salt: int | None = None) -> int:
    """The most a measurement of ``sql`` moves (L1, grid units) between two neighbouring
    datasets, for one hash key (``None``: a fresh one); asserts it is within the sensitivity
    the plan charges.
    """
    plan = with_unit.prepare(sql, 1).plan
    a, b = exact_units_for(with_unit, sql, salt=salt), exact_units_for(without, sql, salt=salt)
    moved = 0
    for m in plan.measurements:
        l1 = int(sum(abs(x - y) for x, y in zip(a[m.name], b[m.name], strict=True)))
        assert l1 <= m.sensitivity_units, (sql, m.name, l1, m.sensitivity_units)
        moved = max(moved, l1)
    return moved


SALTS = (17, 1_000_020)
"""The hash keys the cross-engine checks use: two, so a rule right for one key by chance fails."""


def same_exact_units(
    reference: Session, other: Session, sql: str, delta: Any = None, salts: Any = SALTS
) -> None:
    """Asserts that ``other`` (another engine) gives ``reference``'s exact measurements of
    ``sql``, bit for bit, for each hash key in ``salts``: the same rows kept, the same sums.
    """
    for salt in salts:
        want = exact_units_for(reference, sql, 1, delta, salt=salt)
        got = exact_units_for(other, sql, 1, delta, salt=salt)
        assert got == want, (other.executor.dialect.name, sql, salt)
