"""Per-client rate limits in bounded memory: a token bucket per client, least recently seen forgotten.

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
