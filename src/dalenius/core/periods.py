"""The calendar of a series over time: periods of a day, a week or a calendar month from a first
day, how many have closed by a given day, and which period a day falls in.

Shared by the continual release of a dataset (:mod:`dalenius.releases.continual`) and the series
of a local-DP collection (:mod:`dalenius.ldp.series`), so that both cut time the same way: a
period closes when its last day is over, a week is seven days from the first day, a month is a
calendar month (a monthly series starts on the 1st). Every check here is on public parameters
and fails with a :class:`~dalenius.core.errors.QueryError` naming the parameter.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

from dalenius.core.errors import QueryError

PERIODS = ("day", "week", "month")
MAX_HORIZON = 1024
"""At most this many periods in one series."""


def period_starts(period: str, start: date, horizon: int) -> list[date]:
    """The first day of each period and the day after the last: ``horizon + 1`` dates.

    Example:
        >>> [d.isoformat() for d in period_starts("month", date(2023, 11, 1), 3)]
        ['2023-11-01', '2023-12-01', '2024-01-01', '2024-02-01']
    """
    if period == "day":
        return [start + timedelta(days=p) for p in range(horizon + 1)]
    if period == "week":
        return [start + timedelta(days=7 * p) for p in range(horizon + 1)]
    out = []
    for p in range(horizon + 1):
        year, month = divmod(start.month - 1 + p, 12)
        out.append(date(start.year + year, month + 1, 1))
    return out


def closed_by(bounds: Sequence[date], as_of: date) -> int:
    """How many periods have closed by ``as_of`` (a period closes when its last day is over)."""
    return sum(1 for end in bounds[1:] if end <= as_of)


def period_of(bounds: Sequence[date], day: date) -> int | None:
    """The index of the period ``day`` lies in, or ``None`` before the first or after the last.

    Example:
        >>> bounds = period_starts("week", date(2024, 1, 1), 2)
        >>> [period_of(bounds, date(2024, 1, d)) for d in (1, 7, 8, 15)]
        [0, 0, 1, None]
    """
    index = bisect.bisect_right(bounds, day) - 1
    return index if 0 <= index < len(bounds) - 1 else None


def calendar(period: str, start: str, horizon: int) -> list[date]:
    """The bounds of a declared series (:func:`period_starts`), its parameters checked."""
    if period not in PERIODS:
        raise QueryError(
            f"period {period!r} is not one of {', '.join(PERIODS)}.",
            clause="period",
            fix="pass period='day', 'week' or 'month'.",
        )
    if isinstance(horizon, bool) or not isinstance(horizon, int) or not 1 <= horizon <= MAX_HORIZON:
        raise QueryError(
            f"horizon {horizon!r} is not a number of periods from 1 to {MAX_HORIZON}.",
            clause="horizon",
            fix="pass how many periods the series will ever publish, e.g. horizon=365.",
        )
    try:
        first = date.fromisoformat(start)
    except (TypeError, ValueError):
        raise QueryError(
            f"start {start!r} is not a date.",
            clause="start",
            fix="pass the first day as YYYY-MM-DD, e.g. start='2024-01-01'.",
        ) from None
    if period == "month" and first.day != 1:
        raise QueryError(
            f"a monthly series starts on the 1st of a month, not on {first.isoformat()}.",
            clause="start",
            fix=f"pass start='{first.replace(day=1).isoformat()}'.",
        )
    try:
        return period_starts(period, first, horizon)
    except (OverflowError, ValueError):
        raise QueryError(
            f"a series of {horizon} {period}s from {first.isoformat()} ends after the year 9999.",
            clause="start",
            fix="start earlier, or use a shorter horizon.",
        ) from None


def today() -> date:
    """Today's date in UTC: the periods closed by now."""
    return datetime.now(UTC).date()


def publication_day(as_of: str | date | None, why: str) -> date:
    """The day a series is published on: ``as_of`` or today (UTC), never a later day (``why``
    says what publishing early would do).
    """
    now = today()
    if as_of is None:
        return now
    try:
        day = as_of if isinstance(as_of, date) else date.fromisoformat(str(as_of))
    except ValueError:
        raise QueryError(
            f"as_of {as_of!r} is not a date.", clause="as_of", fix="pass YYYY-MM-DD."
        ) from None
    if day > now:
        raise QueryError(
            f"as_of {day.isoformat()} is after today ({now.isoformat()}, UTC).",
            clause="as_of",
            why=why,
            fix="leave as_of out (today), or pass an earlier day.",
        )
    return day
