"""A synthetic release streamed with its rounds: ``POST /datasets/{name}/synthesize/progress``.

MST and AIM measure their marginals a round at a time, and AIM's rounds can take minutes. This
runs the same release as ``/synthesize`` (in one of the caller's query slots, on the query pool)
and streams NDJSON as the anonymisation's progress stream does: a line per round, then the
answer. Each round line carries only what the release itself publishes — the round, the most
rounds there can be, the ρ drawn so far and the columns of the marginal just measured (the
exponential mechanism's choice, recorded with the noisy measurements) — never an exact count.

Nothing is streamed until the first round has run, so every refusal decided before the data is
read (bad input, budget, a busy caller) is still a plain error answer at no cost; a failure after
the first round is the stream's last line, ``{"error": {...}}``, in the gateway's error shape.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from concurrent.futures import Future
from typing import Any

from fastapi.encoders import jsonable_encoder

from dalenius.core.errors import UserError
from dalenius.releases.synth_table import SynthesisRound
from dalenius.server.errors import error_body
from dalenius.server.gateway import Gateway
from dalenius.server.store import Caller

LOG = logging.getLogger(__name__)


def round_doc(done: SynthesisRound) -> dict[str, Any]:
    """A round as a stream line; ρ as a float for people and an exact fraction for machines,
    as the gateway gives losses.
    """
    return {
        "progress": {
            "method": done.method,
            "round": done.round,
            "rounds": done.rounds,
            "rho_spent": float(done.spent),
            "rho_spent_exact": str(done.spent),
            "rho": float(done.rho),
            "rho_exact": str(done.rho),
            "marginal": list(done.marginal),
        }
    }


async def synthesize_stream(
    gateway: Gateway, caller: Caller, name: str, request: Any, request_id: str
) -> AsyncIterator[bytes]:
    """Start the release and wait for its first event; the lines of the stream from there.

    Raises:
        Whatever ``/synthesize`` would answer with, when the release ends before its first round
        (a refusal, or an answer repeated from the ledger, which is then the only line).
    """
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def progress(done: SynthesisRound) -> None:
        loop.call_soon_threadsafe(events.put_nowait, ("round", done))

    def work() -> dict[str, Any]:
        return gateway.synthesize(caller, name, request, progress=progress)

    running: Future[dict[str, Any]] = gateway.submit_query_work(caller, work)
    # Done after every round line: both reach the loop through call_soon_threadsafe, in order.
    asyncio.wrap_future(running).add_done_callback(lambda f: events.put_nowait(("end", f)))
    kind, first = await events.get()
    if kind == "end":
        answer = first.result()  # a refusal raises here: the gateway's plain error answer

        async def once() -> AsyncIterator[bytes]:
            yield _line(jsonable_encoder(answer))

        return once()
    return _lines(first, events, request_id)


async def _lines(
    first: SynthesisRound, events: asyncio.Queue[tuple[str, Any]], request_id: str
) -> AsyncIterator[bytes]:
    yield _line(round_doc(first))
    while True:
        kind, value = await events.get()
        if kind == "round":
            yield _line(round_doc(value))
            continue
        error = value.exception()
        if error is None:
            yield _line(jsonable_encoder(value.result()))
        else:
            if not isinstance(error, UserError):
                LOG.error("synthesis failed (request %s)", request_id, exc_info=error)
            yield _line(error_body(error, request_id))
        return


def _line(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode() + b"\n"
