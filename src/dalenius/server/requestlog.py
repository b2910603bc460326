"""The request log's writer: every request is recorded, off the request's own path.

Writing one database row per request inside the request would make every answer wait for a disk
write and, with SQLite, for the database's single write lock. Instead each finished request drops
its :class:`~dalenius.server.store.RequestRecord` into a bounded queue, and one thread writes what
has accumulated in a single transaction. The queue is bounded, so memory is too: when it is full
the request that finds it full waits (in a worker thread) until there is room, so under overload
the log slows requests down rather than dropping lines. Queries are recorded durably by the ledger
itself before their answers leave; this log covers every request, queries included.
"""

from __future__ import annotations

import logging
import queue
import threading

from dalenius.server.store import RequestRecord, StateStore

_log = logging.getLogger("dalenius.server")

_BATCH = 500


class RequestLog:
    """A background writer of request-log lines into a :class:`StateStore`.

    Args:
        store: where the lines are written.
        capacity: how many lines may wait to be written.
    """

    def __init__(self, store: StateStore, *, capacity: int = 10_000) -> None:
        self._store = store
        self._queue: queue.Queue[RequestRecord | None] = queue.Queue(maxsize=capacity)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def _ensure_started(self) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(
                    target=self._run, name="dalenius-request-log", daemon=True
                )
                thread.start()
                self._thread = thread

    def offer(self, record: RequestRecord) -> bool:
        """Queue a line without waiting; ``False`` if the queue is full (call :meth:`put`)."""
        self._ensure_started()
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            return False
        return True

    def put(self, record: RequestRecord) -> None:
        """Queue a line, waiting for room if the writer is behind."""
        self._ensure_started()
        self._queue.put(record)

    def flush(self) -> None:
        """Wait until every queued line is written."""
        if self._thread is not None:
            self._queue.join()

    def close(self) -> None:
        """Write what is queued and stop the writer."""
        if self._thread is None:
            return
        self._queue.put(None)
        self._thread.join()
        self._thread = None

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            batch: list[RequestRecord | None] = [first]
            while len(batch) < _BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            records = [r for r in batch if r is not None]
            try:
                self._store.log_requests(records)
            except Exception:
                # The gateway keeps answering; the lost lines are reported where operators look.
                _log.exception("could not write %d request-log lines", len(records))
            finally:
                for _ in batch:
                    self._queue.task_done()
            if any(r is None for r in batch):
                return
