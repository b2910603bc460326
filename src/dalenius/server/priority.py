"""Query work runs at a lower CPU priority than request handling.

On Linux every thread has its own nice value, and a thread inherits it from the thread that
creates it. The gateway's query threads lower their own priority when they start; the engine's
worker threads, though, are created when a dataset's engine is opened (DuckDB starts its thread
pool at connect), so the engine must be opened from a low-priority thread too, or one analyst's
slow queries run at full priority and delay every other caller's sign-in and trivial requests.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

QUERY_NICENESS = 10
"""How much lower than the gateway's own threads query work runs (a Unix nice increment)."""


def lower_priority() -> None:
    """Lower the calling thread's CPU priority (and that of the threads it starts from now on).

    Not Linux, or not allowed: the thread works the same at normal priority.
    """
    with contextlib.suppress(AttributeError, OSError):
        current = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), max(current, QUERY_NICENESS))


def at_low_priority(work: Callable[[], T]) -> T:
    """Run ``work`` in a fresh low-priority thread and return its result (or raise its error).

    Threads that ``work`` starts (an engine's pool) keep the low priority after it returns; the
    caller's own priority is never changed, since an unprivileged process cannot raise it back.
    """
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        lower_priority()
        try:
            result.append(work())
        except BaseException as error:  # handed back to the caller's thread below
            failure.append(error)

    thread = threading.Thread(target=run, name="dalenius-open", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]
