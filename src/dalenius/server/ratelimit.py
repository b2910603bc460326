"""Per-client rate limits: a token bucket per client, in memory or shared through the database.

Each client (a token, or the address of a client that failed to sign in) has a bucket holding up to
``burst`` requests that refills at ``rate`` requests per second. Only ``capacity`` buckets are kept;
when a new client arrives the least recently seen one is dropped. A dropped client comes back with
a full bucket, so the limit is never stricter than configured, and memory stays bounded whatever
the number of clients.

Example:
    >>> clock = iter([0.0, 0.0, 0.0, 1.0]).__next__
    >>> limiter = RateLimiter(rate=1.0, burst=2, capacity=10, clock=clock)
    >>> [limiter.acquire("t") for _ in range(4)]
    [0.0, 0.0, 1.0, 0.0]
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol


class RateLimiter:
    """Token buckets keyed by client, at most ``capacity`` of them.

    Args:
        rate: requests per second each client may make in the long run.
        burst: requests a client may make at once.
        capacity: how many clients are remembered.
        clock: seconds from a monotonic clock (tests pass their own).
    """

    def __init__(
        self,
        *,
        rate: float,
        burst: int,
        capacity: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate <= 0 or burst < 1 or capacity < 1:
            raise ValueError("rate, burst and capacity must be positive")
        self.rate = rate
        self.burst = burst
        self.capacity = capacity
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def acquire(self, client: str) -> float:
        """Take one request from ``client``'s bucket.

        Returns:
            0.0 if the request may proceed, else the seconds to wait before the next one will.
        """
        with self._lock:
            now = self._clock()
            tokens, last = self._buckets.pop(client, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            wait = 0.0
            if tokens >= 1.0:
                tokens -= 1.0
            else:
                wait = (1.0 - tokens) / self.rate
            self._buckets[client] = (tokens, now)
            while len(self._buckets) > self.capacity:
                self._buckets.popitem(last=False)
            return wait

    def __len__(self) -> int:
        """How many clients are remembered now (never more than ``capacity``)."""
        return len(self._buckets)


class SharedRateLimiter:
    """The same token buckets, kept in the gateway's database so every process shares them.

    With N gateway processes on one database, a client still gets ``burst`` requests at once and
    ``rate`` per second in all: the buckets are rows of the state store, read and written in one
    transaction per request. Buckets that have refilled are deleted now and then (a missing row
    is a full bucket), and only the ``capacity`` most recently used are kept (a client forgotten
    early comes back with a full bucket: the limit is never stricter than configured).

    Args:
        store: the state store (anything with ``take`` and ``forget_full_buckets``).
        rate: requests per second each client may make in the long run.
        burst: requests a client may make at once.
        capacity: how many clients' buckets are kept.
        clock: wall-clock seconds (every process must agree on it; tests pass their own).
    """

    SWEEP_EVERY = 512
    """Delete refilled buckets after this many requests of this process."""

    def __init__(
        self,
        store: BucketStore,
        *,
        rate: float,
        burst: int,
        capacity: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if rate <= 0 or burst < 1 or capacity < 1:
            raise ValueError("rate, burst and capacity must be positive")
        self.store = store
        self.capacity = capacity
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._count = 0
        self._lock = threading.Lock()

    def acquire(self, client: str) -> float:
        """Take one request from ``client``'s bucket; 0.0, or the seconds to wait."""
        now = self._clock()
        with self._lock:
            self._count += 1
            sweep = self._count % self.SWEEP_EVERY == 0
        if sweep:
            self.store.forget_full_buckets(
                rate=self.rate, burst=self.burst, now=now, keep=self.capacity
            )
        return self.store.take(client, rate=self.rate, burst=self.burst, now=now)


class BucketStore(Protocol):
    """Where shared buckets live (:class:`~dalenius.server.store.StateStore`)."""

    def take(self, client: str, *, rate: float, burst: int, now: float) -> float:
        """Take one request from a bucket."""

    def forget_full_buckets(self, *, rate: float, burst: int, now: float, keep: int) -> None:
        """Delete refilled buckets, and all but the ``keep`` most recently used."""
