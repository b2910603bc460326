"""Python's cyclic garbage collector, kept out of the timing of constant-time releases.

CPython runs its cyclic collector when enough container objects were allocated; a full collection
walks every tracked object of the process (about 90,000 once DuckDB, pyarrow and scipy are
imported; tens of milliseconds). Where it lands is decided by allocation counts, so in
constant-time mode it would fall, now and then, inside a release window and make that release
miss its deadline: on a quiet machine 1–2 of 4,000 releases per data pair missed a deadline
three times the worst calibrated time, and none did with the collector switched off.

Switching it off for good is not the fix: garbage then piles up, and the time of what runs later
comes to depend on how much earlier releases left (measured: the Parquet outlier pair became
distinguishable, KS p = 0.0007). So in constant-time mode a release does three things:

* :func:`pause` when the query arrives, before it is planned: no automatic collection starts
  while any query of the process is being planned or released (a count, so concurrent queries
  nest). Planning reads no data, but where a collection lands depends on how much earlier answers
  allocated: with the pause starting only once the plan was ready, the planning time of the
  Parquet outlier pair differed by 1.5 µs at the median (KS p 0.004);
* :func:`sweep` at the end of its work, still inside the window and before the outcome is ready:
  a full collection of what is not frozen, then :func:`gc.freeze` of the survivors, so that the
  next sweep walks only the objects allocated since — a cost that calibration measures, because
  it is part of every release it times;
* :func:`resume` once the outcome has left: automatic collection is on again when no window is
  open.

Frozen objects are still freed by reference counting; only cyclic garbage among them waits for
:func:`thaw`, which runs at interpreter exit (and which a long-running gateway may call when it
is idle).
"""

from __future__ import annotations

import atexit
import gc
import threading


class _Windows:
    """The process's open release windows (one instance: the collector is process-wide)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open = 0
        self.was_enabled = True
        self.thaw_at_exit = False


_windows = _Windows()


def pause() -> None:
    """Open a window (a query arrived): no automatic collection until every open window closed."""
    with _windows.lock:
        if _windows.open == 0:
            _windows.was_enabled = gc.isenabled()
            gc.disable()
        _windows.open += 1


def resume() -> None:
    """Close a release window opened by :func:`pause`."""
    with _windows.lock:
        if _windows.open == 0:
            return
        _windows.open -= 1
        if _windows.open == 0 and _windows.was_enabled:
            gc.enable()


def sweep() -> None:
    """Collect the garbage of the release just computed and freeze what survives.

    Runs inside the release window, so its time is part of every calibrated release.
    """
    gc.collect()
    gc.freeze()
    if not _windows.thaw_at_exit:
        _windows.thaw_at_exit = True
        atexit.register(thaw)


def thaw() -> None:
    """Return the frozen objects to the collector (at exit, or when the process is idle)."""
    gc.unfreeze()


def windows_open() -> int:
    """How many release windows are open now (for tests and the audit)."""
    with _windows.lock:
        return _windows.open
