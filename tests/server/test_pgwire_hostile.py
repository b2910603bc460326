"""Hostile clients of the PostgreSQL listener: malformed and oversized messages, garbage, slow
sign-ins, guessed tokens, and 200 connections racing on one budget.

Whatever a client sends, the listener ends only that client's connection, spends nothing, and
keeps serving the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.server.pgwire_helpers import Wire, running_wire

from dalenius.core.loss import PureDP
from dalenius.server.pgwire import codec
from dalenius.server.pgwire.listener import PgListener, WireSettings, _Connection
from dalenius.server.pgwire.statements import WireSession
from dalenius.server.store import Caller


@pytest.fixture(scope="module")
def wire(demo_catalog: Path) -> Iterator[Wire]:
    settings = WireSettings(startup_seconds=1.0, max_connections=300)
    with running_wire(demo_catalog, settings) as made:
        yield made


def _still_serves(wire: Wire) -> None:
    with psycopg.connect(**wire.dsn()) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def _raw(wire: Wire, data: bytes) -> bytes:
    """Send ``data`` on a fresh socket; what the listener answered before it closed."""
    with socket.create_connection(("127.0.0.1", wire.port), timeout=30) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def _startup(user: str = "alice", database: str = "census") -> bytes:
    body = struct.pack("!i", codec.PROTOCOL_3) + b"user\x00" + user.encode() + b"\x00"
    body += b"database\x00" + database.encode() + b"\x00\x00"
    return struct.pack("!i", len(body) + 4) + body


def test_an_oversized_startup_length_is_refused_without_reading_it(wire: Wire) -> None:
    answer = _raw(wire, struct.pack("!ii", 2**31 - 1, codec.PROTOCOL_3))
    assert b"08P01" in answer and b"outside 8" in answer
    _still_serves(wire)


def test_an_unknown_protocol_version_is_refused(wire: Wire) -> None:
    answer = _raw(wire, struct.pack("!ii", 8, 2 << 16))
    assert b"0A000" in answer
    _still_serves(wire)


def test_a_slow_sign_in_is_cut_at_the_startup_deadline(wire: Wire) -> None:
    with socket.create_connection(("127.0.0.1", wire.port), timeout=30) as sock:
        sock.sendall(_startup()[:6])  # then nothing: a slow-loris client
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    # The listener closed the connection by itself (recv returned b"" before our timeout).
    assert b"idle too long" in received or received == b""
    _still_serves(wire)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=300))
def test_garbage_before_sign_in_never_crashes_the_listener(wire: Wire, data: bytes) -> None:
    _raw(wire, data)
    assert wire.remaining() == PureDP(Fraction(1))


class _Sink:
    """A stream writer that keeps what it is given."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        return None

    def get_extra_info(self, name: str) -> Any:
        return None


_MESSAGE = st.builds(
    lambda kind, body: kind + struct.pack("!i", len(body) + 4) + body,
    st.sampled_from([b"Q", b"P", b"B", b"D", b"E", b"S", b"C", b"H", b"F", b"d", b"Z", b"p"]),
    st.one_of(
        st.binary(max_size=80),
        st.sampled_from(
            [
                b"SELECT 1\x00",
                b"SET dalenius.epsilon = 0.5\x00",
                b"\x00SELECT COUNT(*) FROM people WHERE age > $1\x00\x00\x01\x00\x00\x00\x17",
                b"\x00\x00\x00\x00\x00\x01\x00\x00\x00\x02\x33\x30\x00\x00",
                b"P\x00",
                b"\x00\x00\x00\x00\x00",
            ]
        ),
    ),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_MESSAGE, max_size=8), st.binary(max_size=20))
def test_the_message_layer_survives_any_sequence_of_messages(
    wire: Wire, messages: list[bytes], tail: bytes
) -> None:
    """Fuzzing the signed-in message loop: it ends by a clean close or a protocol violation,
    never another exception, and a query can be charged only with ε set by the client."""
    gateway = wire.site.gateway
    listener = PgListener(gateway)
    caller = Caller(name="alice", role="analyst", token_id="")
    session: WireSession = listener._session(caller, "census", {})

    async def run() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(b"".join(messages) + tail)
        reader.feed_eof()
        connection = _Connection(pid=1, secret=1)
        with contextlib.suppress(asyncio.IncompleteReadError, codec.ProtocolViolation):
            await listener._messages(reader, _Sink(), connection, session)  # type: ignore[arg-type]

    before = gateway.ledger.remaining("alice", "census")
    future = asyncio.run_coroutine_threadsafe(run(), wire.loop)
    future.result(timeout=60)
    after = gateway.ledger.remaining("alice", "census")
    # The fuzzer cannot write a valid ε setting and a valid query in one frame often, but if it
    # does, the charge is one it asked for: at most ε = 0.5 per query.
    assert after.epsilon <= before.epsilon


def test_guessed_tokens_are_throttled_like_http_sign_in(demo_catalog: Path) -> None:
    with running_wire(demo_catalog, requests_per_minute=60, burst=3) as wire:
        messages = []
        for _ in range(5):
            with pytest.raises(psycopg.OperationalError) as caught:
                psycopg.connect(**wire.dsn(password="not-a-token"))
            messages.append(str(caught.value))
        assert "password authentication failed" in messages[0]
        assert any("Too many requests" in m for m in messages[3:])
        assert wire.remaining() == PureDP(Fraction(1))


def test_200_connections_racing_on_one_budget_spend_exactly_it(demo_catalog: Path) -> None:
    with running_wire(demo_catalog, WireSettings(max_connections=300)) as wire:
        answered: list[int] = []
        refused: list[str] = []
        lock = threading.Lock()
        start = threading.Barrier(200)

        def analyst(index: int) -> None:
            with psycopg.connect(**wire.dsn(), autocommit=True) as conn:
                conn.execute("SET dalenius.epsilon = 0.02")
                start.wait(timeout=120)
                attempt = 0
                while True:
                    attempt += 1
                    sql = f"SELECT COUNT(*) FROM people WHERE age > {index * 1000 + attempt}"
                    try:
                        conn.execute(sql).fetchall()
                    except psycopg.Error as error:
                        state = error.diag.sqlstate or ""
                        if state == "53300":  # too many of alice's queries running: retry
                            continue
                        with lock:
                            refused.append(state)
                        return
                    with lock:
                        answered.append(index)

        threads = [threading.Thread(target=analyst, args=(i,)) for i in range(200)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        assert len(answered) == 50
        assert set(refused) == {"53400"} and len(refused) == 200
        assert wire.remaining() == PureDP(Fraction(0))
