"""How many explain and query requests each principal may have running at once in one process.

A slow query holds an engine and a worker thread; without a bound, one analyst sending many of them
fills every worker and everyone else waits. Each principal gets at most ``limit`` running at once;
one more is refused at once (status 429), before anything is planned or read, so it costs nothing.

Example:
    >>> slots = Slots(1)
    >>> with slots.hold("alice"):
    ...     try:
    ...         with slots.hold("alice"):
    ...             pass
    ...     except BusyError as error:
    ...         print(error.what)
    You already have 1 query running (the most one analyst may run at once).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from dalenius.core.errors import UserError


class BusyError(UserError):
    """The principal already has as many queries running as allowed."""

    code = "too_many_running"


class Slots:
    """A running-query count per principal, at most ``limit`` each.

    Args:
        limit: how many requests one principal may have running at once.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self._running: dict[str, int] = {}
        self._lock = threading.Lock()

    @contextmanager
    def hold(self, principal: str) -> Iterator[None]:
        """Hold one of ``principal``'s slots for the duration of the block.

        Raises:
            BusyError: all of the principal's slots are held.
        """
        release = self.take(principal)
        try:
            yield
        finally:
            release()

    def take(self, principal: str) -> Callable[[], None]:
        """Take one of ``principal``'s slots; return the function that gives it back (once).

        Raises:
            BusyError: all of the principal's slots are held.
        """
        with self._lock:
            running = self._running.get(principal, 0)
            if running >= self.limit:
                plural = "query" if self.limit == 1 else "queries"
                raise BusyError(
                    f"You already have {running} {plural} running (the most one analyst may "
                    "run at once).",
                    why="a per-analyst limit keeps one analyst's slow queries from holding every "
                    "worker of the gateway.",
                    fix="wait for an answer before sending the next query; nothing was spent.",
                )
            self._running[principal] = running + 1
        given_back = threading.Event()

        def release() -> None:
            with self._lock:
                if given_back.is_set():
                    return
                given_back.set()
                left = self._running[principal] - 1
                if left:
                    self._running[principal] = left
                else:
                    del self._running[principal]

        return release

    def running(self, principal: str) -> int:
        """How many of ``principal``'s requests are running now."""
        with self._lock:
            return self._running.get(principal, 0)
