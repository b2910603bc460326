"""The ledger's budget rules as pure functions: budget periods and the refusals a reserve can give.

Kept apart from storage so the rules read in one place and are tested without a database.

Budget periods: a budget set at ``anchor`` with ``refresh_days = d`` has periods
``[anchor + k·d days, anchor + (k+1)·d days)``; only charges reserved inside the current period
count against it. The dataset's total cap never refreshes: what analysts spent together is spent
for good.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction

from dalenius.accounting import Shortfall, components
from dalenius.core.errors import BudgetExceededError, ConfigurationError
from dalenius.core.loss import ApproxDP, Loss
from dalenius.ledger.base import BudgetInfo


def format_down(value: Fraction) -> str:
    """Six significant digits, rounded *down*, so a suggested request always fits.

    Example:
        >>> format_down(Fraction(2, 3))
        '0.666666'
    """
    if value.denominator == 1:
        return str(value.numerator)
    with localcontext() as context:
        context.prec = 6
        context.rounding = ROUND_FLOOR
        shown = Decimal(value.numerator) / Decimal(value.denominator)
    return format(shown, "g")


def period_start(budget: BudgetInfo, now: datetime) -> datetime | None:
    """When the budget's current period began, or ``None`` for a budget that never refreshes.

    Example:
        >>> from datetime import UTC
        >>> from fractions import Fraction
        >>> from dalenius.core.loss import PureDP
        >>> set_at = datetime(2024, 1, 1, tzinfo=UTC)
        >>> b = BudgetInfo("alice", "adult", PureDP(Fraction(1)), 30, set_at)
        >>> period_start(b, datetime(2024, 3, 5, tzinfo=UTC))
        datetime.datetime(2024, 3, 1, 0, 0, tzinfo=datetime.timezone.utc)
    """
    if budget.refresh_days is None:
        return None
    if now <= budget.anchor:
        return budget.anchor
    length = timedelta(days=budget.refresh_days)
    return budget.anchor + ((now - budget.anchor) // length) * length


def period_end(budget: BudgetInfo, now: datetime) -> datetime | None:
    """When the budget next refreshes, or ``None`` for a budget that never refreshes."""
    start = period_start(budget, now)
    if start is None or budget.refresh_days is None:
        return None
    return start + timedelta(days=budget.refresh_days)


def no_budget(principal: str, dataset: str, request: Loss) -> BudgetExceededError:
    """The refusal for an analyst who has no budget on the dataset: nothing may be spent."""
    measure, requested = components(request)[0]
    return BudgetExceededError(
        requested=requested,
        remaining=requested - requested,
        measure=measure,
        scope=f"analyst {principal!r} on dataset {dataset!r}, who has no budget there",
        fix=(
            "ask the custodian to set one, e.g. "
            f"`dalenius budget set --analyst {principal} --dataset {dataset} --epsilon 1`."
        ),
    )


def over_budget(
    principal: str, dataset: str, short: Shortfall, refresh_at: datetime | None
) -> BudgetExceededError:
    """The refusal for a request that does not fit the analyst's budget."""
    scope = f"analyst {principal!r} on dataset {dataset!r}"
    wait = ""
    if refresh_at is not None:
        scope += " in the current budget period"
        wait = f", wait until the budget refreshes at {refresh_at.isoformat(timespec='seconds')}"
    return BudgetExceededError(
        requested=short.requested,
        remaining=short.remaining,
        measure=short.measure,
        scope=scope,
        fix=(
            f"ask with {short.measure} <= {format_down(short.remaining)}{wait}, "
            "or ask the custodian for more budget."
        ),
    )


def over_total(dataset: str, short: Shortfall) -> BudgetExceededError:
    """The refusal for a request that does not fit what remains of the dataset's total cap."""
    return BudgetExceededError(
        requested=short.requested,
        remaining=short.remaining,
        measure=short.measure,
        scope=f"dataset {dataset!r} (its total cap, shared by every analyst)",
        fix=(
            f"ask with {short.measure} <= {format_down(short.remaining)}, "
            "or ask the custodian to raise the dataset's total cap."
        ),
    )


def _number(value: Fraction) -> str:
    """A rational as the command line reads it back exactly enough (rounded down)."""
    return format_down(value)


def check_no_part_dropped(principal: str, dataset: str, cap: Loss, definition: str) -> None:
    """Refuse a cap whose conversion to the dataset's definition would drop a part of it.

    An (ε, δ) cap with δ > 0 on a dataset accounted as pure ε would keep ε and silently drop δ,
    so a later request that needs δ would be refused although the custodian allowed it.

    Raises:
        ConfigurationError: naming the command that switches the dataset (safely) or drops δ.
    """
    if definition == "pure" and isinstance(cap, ApproxDP) and cap.delta > 0:
        eps, delta = _number(cap.epsilon), _number(cap.delta)
        raise ConfigurationError(
            f"Dataset {dataset!r} is accounted as pure ε; a budget of {cap} would keep ε and "
            "drop δ.",
            why="a pure-ε dataset adds up ε only, so δ could never be spent.",
            fix=(
                "switch the dataset to (ε, δ) accounting (pure charges carry over as (ε, 0)): "
                f"`dalenius budget set --dataset {dataset} --analyst {principal} "
                f"--epsilon {eps} --delta {delta} --definition approx`, "
                "or give --epsilon alone for a pure budget."
            ),
        )


def approx_needed(principal: str, dataset: str, cap: Loss | None) -> str:
    """The fix for a request that spends δ on a dataset accounted as pure ε: the exact command."""
    epsilon = getattr(cap, "epsilon", None)
    eps = "1" if epsilon is None else _number(epsilon)
    return (
        f"ask the custodian to account dataset {dataset!r} as (ε, δ) and give a δ: "
        f"`dalenius budget set --dataset {dataset} --analyst {principal} --epsilon {eps} "
        "--delta 1e-5 --definition approx` (charges so far carry over as (ε, 0)); "
        "or ask without δ (group by columns with public keys; join private tables on their "
        "unit or on keys that declare join_rows_per_key)."
    )


def exhausted(
    principal: str, dataset: str, request: Loss, budget: BudgetInfo
) -> BudgetExceededError:
    """The refusal for an analyst whose budget a fail-closed failure exhausted."""
    measure, requested = components(request)[0]
    when = budget.exhausted_at.isoformat(timespec="seconds") if budget.exhausted_at else "?"
    return BudgetExceededError(
        requested=requested,
        remaining=requested - requested,
        measure=measure,
        scope=(
            f"analyst {principal!r} on dataset {dataset!r}, whose budget was exhausted at {when} "
            "by a request that failed after the data gate (the dataset fails closed)"
        ),
        fix=(
            "ask the custodian to set the budget again "
            f"(`dalenius budget set --analyst {principal} --dataset {dataset} ...`)."
        ),
    )
