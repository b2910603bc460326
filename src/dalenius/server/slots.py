"""How many explain and query requests each principal may have running at once.

A slow query holds an engine and a worker thread; without a bound, one analyst sending many of them
fills every worker and everyone else waits. Each principal gets at most ``limit`` running at once;
one more is refused at once (status 429), before anything is planned or read, so it costs nothing.

In one process the count is kept in memory. The worker processes of one ``dalenius serve
--workers N`` share it through a lock file: slot ``i`` of a principal is one byte of that file,
held with a POSIX record lock (``fcntl``) for as long as the request runs. The operating system
releases a process's record locks when it ends, however it ends, so a worker that crashes never
leaves a principal's slots taken.

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

import hashlib
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from dalenius.core.errors import UserError

_OFFSETS = 1 << 62
"""Byte offsets of the lock file in use (it stays empty: a record lock needs no data)."""


class BusyError(UserError):
    """The principal already has as many queries running as allowed."""

    code = "too_many_running"


class Slots:
    """A running-query count per principal, at most ``limit`` each.

    Args:
        limit: how many requests one principal may have running at once.
        shared: a lock file that the worker processes of one gateway share; ``None``: the count
            holds for this process only.
    """

    def __init__(self, limit: int, shared: str | None = None) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self._running: dict[str, set[int]] = {}
        self._lock = threading.Lock()
        self._fd: int | None = None
        if shared is not None:
            self._fd = os.open(shared, os.O_RDWR | os.O_CREAT, 0o600)

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
            BusyError: all of the principal's slots are held (in any worker of this gateway).
        """
        with self._lock:
            held = self._running.setdefault(principal, set())
            slot = self._free_slot(principal, held)
            if slot is None:
                if not held:
                    del self._running[principal]
                plural = "query" if self.limit == 1 else "queries"
                raise BusyError(
                    f"You already have {self.limit if self._fd is not None else len(held)} "
                    f"{plural} running (the most one analyst may run at once).",
                    why="a per-analyst limit keeps one analyst's slow queries from holding every "
                    "worker of the gateway.",
                    fix="wait for an answer before sending the next query; nothing was spent.",
                )
            held.add(slot)
        given_back = False

        def release() -> None:
            nonlocal given_back
            with self._lock:
                if given_back:
                    return
                given_back = True
                self._unlock(principal, slot)
                held = self._running[principal]
                held.discard(slot)
                if not held:
                    del self._running[principal]

        return release

    def _free_slot(self, principal: str, held: set[int]) -> int | None:
        """A slot of ``principal`` that nobody holds, now locked; ``None`` if all are held."""
        for slot in range(self.limit):
            if slot in held:
                continue  # held by this process (a process's own record locks never conflict)
            if self._fd is None:
                return slot
            try:
                _lockf(self._fd, True, self._offset(principal, slot))
            except OSError:
                continue  # held by another worker
            return slot
        return None

    def _unlock(self, principal: str, slot: int) -> None:
        if self._fd is not None:
            _lockf(self._fd, False, self._offset(principal, slot))

    def _offset(self, principal: str, slot: int) -> int:
        # One group of ``limit`` bytes per principal, by a hash of the name: with the groups of a
        # limit of 1000, n principals share one with probability about n² / 2⁵³.
        group = int.from_bytes(hashlib.sha256(principal.encode()).digest()[:8], "big")
        return (group % (_OFFSETS // self.limit)) * self.limit + slot

    def running(self, principal: str) -> int:
        """How many of ``principal``'s requests this process is running now."""
        with self._lock:
            return len(self._running.get(principal, ()))

    def close(self) -> None:
        """Close the lock file (every slot this process held is given back)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _lockf(fd: int, lock: bool, offset: int) -> None:
    """Lock (without waiting: ``OSError`` if another process holds it) or unlock one byte."""
    import fcntl

    fcntl.lockf(fd, (fcntl.LOCK_EX | fcntl.LOCK_NB) if lock else fcntl.LOCK_UN, 1, offset)
