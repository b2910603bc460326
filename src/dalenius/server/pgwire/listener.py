"""The PostgreSQL protocol listener: psql, JDBC, psycopg, SQLAlchemy and BI tools ask the gateway.

A thin front end over :class:`~dalenius.server.gateway.Gateway` — the calls the HTTP routes make
— so a query asked over the wire is checked, charged, recorded and audited exactly as over HTTP.
The user name is the analyst's, the password their API token, the database the dataset.

Sign-in: SCRAM-SHA-256 against the token's stored verifier (the token never crosses the
network), or, inside TLS, the token itself checked by :meth:`Gateway.authenticate`. Failed
sign-ins share the HTTP gateway's per-address throttle.

Hostile clients: every message length is bounded before it is read (:mod:`.codec`); the
startup and each idle wait have deadlines, so a slow-loris connection is closed; a connection
limit bounds the sockets held; a protocol violation ends only its own connection. Blocking work
(sign-in, planning, queries) runs on the gateway's thread pools, never on the event loop, so one
connection's query never blocks another's messages.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dalenius.core.errors import DaleniusError, QueryError
from dalenius.server.errors import AuthenticationError, RateLimitedError
from dalenius.server.gateway import Gateway
from dalenius.server.pgwire import codec
from dalenius.server.pgwire.catalog import ShadowCatalog
from dalenius.server.pgwire.errors import (
    CANCELED,
    PROTOCOL_VIOLATION,
    Fields,
    error_fields,
)
from dalenius.server.pgwire.scram import MECHANISM, ScramExchange, ScramFailure
from dalenius.server.pgwire.statements import Outcome, WireSession
from dalenius.server.store import Caller
from dalenius.sql.wire import MAX_PARAMETERS, bind_parameters, parameter_count, split_statements

_log = logging.getLogger("dalenius.server.pgwire")


@dataclass(frozen=True)
class WireSettings:
    """The listener's limits.

    Attributes:
        ssl_context: TLS with the custodian's certificate (``None``: no TLS offered).
        max_connections: sockets held at once; more are refused at once.
        startup_seconds: time a client has to finish the startup and sign-in.
        idle_seconds: time a signed-in connection may wait between messages.
        statement_seconds: the longest wait for one statement's answer; after it the client is
            told the statement was cancelled (a release already past the data gate stays
            charged and recorded: asked again, it is answered free).
    """

    ssl_context: ssl.SSLContext | None = None
    max_connections: int = 256
    startup_seconds: float = 10.0
    idle_seconds: float = 3600.0
    statement_seconds: float = 600.0


@dataclass
class _Prepared:
    sql: str
    types: list[int]
    kind: str = ""


@dataclass
class _Portal:
    prepared: _Prepared
    sql: str
    formats: list[int]
    outcome: Outcome | None = None
    sent: int = 0
    described: list[codec.Field] | None = None


@dataclass
class _Connection:
    pid: int
    secret: int
    task: asyncio.Task[Any] | None = None
    running: asyncio.Future[Any] | None = None
    cancelled: bool = False
    statements: dict[str, _Prepared] = field(default_factory=dict)
    portals: dict[str, _Portal] = field(default_factory=dict)


class PgListener:
    """The listener for one gateway process.

    Args:
        gateway: the gateway whose calls answer every statement.
        settings: the listener's limits and TLS.
    """

    def __init__(self, gateway: Gateway, settings: WireSettings | None = None) -> None:
        self.gateway = gateway
        self.settings = settings or WireSettings()
        self._connections: dict[int, _Connection] = {}
        self._shadows: dict[tuple[str, int], ShadowCatalog] = {}
        self._server: asyncio.AbstractServer | None = None

    async def start(self, host: str, port: int, *, reuse_port: bool = False) -> int:
        """Listen on ``host:port`` (``0``: any free port); returns the port."""
        self._server = await asyncio.start_server(
            self._serve, host, port, reuse_port=reuse_port or None, limit=codec.MAX_MESSAGE + 64
        )
        sockets = self._server.sockets or ()
        port_found: int = sockets[0].getsockname()[1] if sockets else port
        return port_found

    async def stop(self) -> None:
        """Stop listening and end every connection."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for connection in list(self._connections.values()):
            if connection.task is not None:
                connection.task.cancel()

    @property
    def connections(self) -> int:
        """How many client connections are open now."""
        return len(self._connections)

    # -- one connection ------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) and peer else "unix"
        if len(self._connections) >= self.settings.max_connections:
            await _fatal(writer, "53300", "too many connections to the gateway; try again soon.")
            return
        connection = _Connection(pid=secrets.randbelow(2**31 - 1) + 1, secret=secrets.randbits(32))
        connection.task = asyncio.current_task()
        self._connections[connection.pid] = connection
        try:
            await self._run(reader, writer, connection, client)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        except codec.ProtocolViolation as violation:
            await _fatal(writer, PROTOCOL_VIOLATION, f"protocol violation: {violation}")
        except TimeoutError:
            await _fatal(writer, "08006", "the connection was idle too long and is closed.")
        except Exception:
            _log.exception("the PostgreSQL listener failed on a connection")
            await _fatal(writer, "XX000", "the gateway failed on this connection; see its log.")
        finally:
            self._connections.pop(connection.pid, None)
            writer.close()

    async def _run(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        connection: _Connection,
        client: str,
    ) -> None:
        startup = await asyncio.wait_for(
            self._startup(reader, writer), timeout=self.settings.startup_seconds
        )
        if startup is None:
            return
        reader, writer, parameters = startup
        user = parameters.get("user", "")
        dataset = parameters.get("database") or user
        if not user:
            await _fatal(writer, "28000", "no user name was given; the user is the analyst.")
            return
        tls = writer.get_extra_info("ssl_object") is not None
        caller = await asyncio.wait_for(
            self._sign_in(reader, writer, user, client, tls),
            timeout=self.settings.startup_seconds,
        )
        if caller is None:
            return
        try:
            session = await self._blocking(lambda: self._session(caller, dataset, parameters))
        except Exception as error:
            await _send(writer, codec.error_response(error_fields(error, severity="FATAL")))
            return
        out = [codec.authentication(0)]
        out += [codec.parameter_status(k, v) for k, v in session.reported()]
        out += [codec.backend_key(connection.pid, connection.secret), codec.ready(b"I")]
        await _send(writer, b"".join(out))
        await self._messages(reader, writer, connection, session)

    async def _startup(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, dict[str, str]] | None:
        """The startup packet, after an optional TLS negotiation (or a cancel request)."""
        negotiated = False
        while True:
            code, body = await codec.read_startup(reader)
            if code == codec.SSL_REQUEST and not negotiated:
                negotiated = True
                context = self.settings.ssl_context
                if context is None:
                    await _send(writer, b"N")
                    continue
                await _send(writer, b"S")
                await writer.start_tls(context)
                continue
            if code == codec.GSSENC_REQUEST and not negotiated:
                await _send(writer, b"N")
                continue
            if code == codec.CANCEL_REQUEST:
                pid, secret = body.int32(), body.uint32()
                self._cancel(pid, secret)
                return None
            if code != codec.PROTOCOL_3:
                await _fatal(
                    writer,
                    "0A000",
                    f"protocol version {code >> 16}.{code & 0xFFFF} is not supported; 3.0 is.",
                )
                return None
            return reader, writer, codec.startup_parameters(body)

    def _cancel(self, pid: int, secret: int) -> None:
        connection = self._connections.get(pid)
        if connection is None or not secrets.compare_digest(
            struct.pack("!I", connection.secret), struct.pack("!I", secret)
        ):
            return
        connection.cancelled = True
        if connection.running is not None and not connection.running.done():
            connection.running.cancel()

    async def _sign_in(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        user: str,
        client: str,
        tls: bool,
    ) -> Caller | None:
        """The signed-in caller, or ``None`` after a FATAL error was sent."""
        gateway = self.gateway
        refused = AuthenticationError(
            f'password authentication failed for user "{user}"',
            fix="the user is the analyst's name and the password their API token; "
            "a curator issues tokens.",
        )
        if tls:
            await _send(writer, codec.authentication(3))
            kind, body = await codec.read_message(reader, codec.MAX_STARTUP)
            if kind != b"p":
                raise codec.ProtocolViolation("expected a password message")
            token = body.cstring()
            try:
                caller: Caller = await self._blocking(lambda: gateway.authenticate(token, client))
            except Exception as error:
                await _send(writer, codec.error_response(error_fields(error, severity="FATAL")))
                return None
            if caller.name != user:
                await _send(writer, codec.error_response(error_fields(refused, severity="FATAL")))
                return None
            return caller
        mechanisms = codec.cstr(MECHANISM) + b"\x00"
        await _send(writer, codec.authentication(10, mechanisms))
        kind, body = await codec.read_message(reader, codec.MAX_STARTUP)
        if kind != b"p":
            raise codec.ProtocolViolation("expected a SASL initial response")
        mechanism = body.cstring()
        length = body.int32()
        first = body.raw(length).decode("utf-8", "replace") if length > 0 else ""
        if mechanism != MECHANISM:
            raise codec.ProtocolViolation(f"the SASL mechanism {mechanism!r} is not offered")
        verifiers = await self._blocking(lambda: gateway.store.scram_verifiers(user))
        exchange = ScramExchange(user, verifiers)
        try:
            server_first = exchange.first(first)
        except ScramFailure:
            await _send(writer, codec.error_response(error_fields(refused, severity="FATAL")))
            return None
        await _send(writer, codec.authentication(11, server_first.encode()))
        kind, body = await codec.read_message(reader, codec.MAX_STARTUP)
        if kind != b"p":
            raise codec.ProtocolViolation("expected a SASL response")
        final = body.rest().decode("utf-8", "replace")
        signed: Caller | None
        try:
            signed, server_final = exchange.final(final)
        except ScramFailure:
            signed, server_final = None, ""
        key = f"token:{signed.token_id}" if signed else f"address:{client}"
        wait = await self._blocking(lambda: gateway.limiter.acquire(key))
        if wait > 0:
            limited = RateLimitedError(wait, gateway.config.limits.requests_per_minute)
            await _send(writer, codec.error_response(error_fields(limited, severity="FATAL")))
            return None
        if signed is None:
            await _send(writer, codec.error_response(error_fields(refused, severity="FATAL")))
            return None
        await _send(writer, codec.authentication(12, server_final.encode()))
        return signed

    def _session(self, caller: Caller, dataset: str, parameters: dict[str, str]) -> WireSession:
        opened = self.gateway.open(caller, dataset)
        key = (dataset, id(opened.catalog))
        shadow = self._shadows.get(key)
        if shadow is None:
            detail = self.gateway.describe_dataset(caller, dataset)
            shadow = ShadowCatalog(dataset, opened.catalog, _descriptions(detail))
            self._shadows[key] = shadow
        return WireSession(self.gateway, caller, dataset, shadow, parameters)

    async def _blocking(self, work: Callable[[], Any]) -> Any:
        """Run blocking work on the gateway's sign-in pool (never on the event loop)."""
        return await asyncio.wrap_future(self.gateway.sign_in_pool.submit(work))

    # -- the message loop -----------------------------------------------------------------------

    async def _messages(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        connection: _Connection,
        session: WireSession,
    ) -> None:
        failed = False  # in the extended protocol, an error skips messages until Sync
        while True:
            kind, body = await asyncio.wait_for(
                codec.read_message(reader), timeout=self.settings.idle_seconds
            )
            if kind == b"X":
                return
            if kind == b"S":
                failed = False
                await _send(writer, codec.ready(_status(session)))
                continue
            if kind == b"H":
                await writer.drain()
                continue
            if failed and kind in b"PBDEC":
                continue
            try:
                await self._dispatch(kind, body, writer, connection, session)
            except codec.ProtocolViolation:
                raise
            except Exception as error:
                if not isinstance(error, DaleniusError | _Cancelled):
                    _log.exception("a statement failed over the PostgreSQL listener")
                sql = getattr(error, "wire_sql", None)
                fields = (
                    _cancel_fields()
                    if isinstance(error, _Cancelled)
                    else error_fields(error, sql, getattr(error, "wire_offset", 0))
                )
                await _send(writer, codec.error_response(fields))
                if kind == b"Q":
                    await _send(writer, codec.ready(_status(session)))
                else:
                    failed = True

    async def _dispatch(
        self,
        kind: bytes,
        body: codec.Body,
        writer: asyncio.StreamWriter,
        connection: _Connection,
        session: WireSession,
    ) -> None:
        """Answer one message other than Sync, Flush and Terminate."""
        if kind == b"Q":
            await self._simple(writer, connection, session, body.cstring())
            await _send(writer, codec.ready(_status(session)))
        elif kind == b"P":
            await _send(writer, self._parse(connection, session, body))
        elif kind == b"B":
            await _send(writer, self._bind(connection, session, body))
        elif kind == b"D":
            await _send(writer, await self._describe(connection, session, body))
        elif kind == b"E":
            await _send(writer, await self._execute(connection, session, body))
        elif kind == b"C":
            what, name = body.raw(1), body.cstring()
            (connection.statements if what == b"S" else connection.portals).pop(name, None)
            await _send(writer, codec.CLOSE_COMPLETE)
        elif kind in (b"d", b"c", b"f"):
            raise QueryError("COPY is not supported by the gateway.", clause="COPY")
        elif kind == b"F":
            raise QueryError("function calls are not supported by the gateway.")
        else:
            raise codec.ProtocolViolation(f"unexpected message type {kind!r}")

    async def _simple(
        self, writer: asyncio.StreamWriter, connection: _Connection, session: WireSession, sql: str
    ) -> None:
        """A simple query: each statement in turn; the first error stops the rest."""
        statements = split_statements(sql)
        if not statements:
            await _send(writer, codec.EMPTY_QUERY)
            return
        offset = 0
        for statement in statements:
            offset = sql.find(statement, offset)
            try:
                if parameter_count(statement):
                    raise QueryError(
                        "a simple query cannot have parameters ($1 …).",
                        clause="parameters",
                        sql=statement,
                        fix="send the values with the extended protocol (a prepared statement).",
                    )
                outcome, changed = await self._statement(connection, session, statement)
            except Exception as error:
                error.wire_sql = sql  # type: ignore[attr-defined]
                error.wire_offset = offset  # type: ignore[attr-defined]
                raise
            out = [codec.notice_response(_notice(n)) for n in outcome.notices]
            out += [codec.parameter_status(k, v) for k, v in changed]
            if outcome.has_rows:
                out.append(codec.row_description(outcome.fields))
                out += [codec.data_row(row, outcome.fields) for row in outcome.rows]
            out.append(codec.command_complete(outcome.tag))
            await _send(writer, b"".join(out))
            offset += len(statement)

    async def _statement(
        self, connection: _Connection, session: WireSession, sql: str
    ) -> tuple[Outcome, list[tuple[str, str]]]:
        kind = session.kind(sql)
        if kind == "session":
            return session.session_statement(sql)
        if kind == "catalog":
            outcome = await self._run_query_work(connection, session, lambda: session.catalog(sql))
            return outcome, []
        if kind == "explain":
            return await self._run_query_work(
                connection, session, lambda: session.explain(sql, _inline)
            ), []
        return await self._run_query_work(
            connection, session, lambda: session.private(sql, _inline)
        ), []

    async def _run_query_work(
        self, connection: _Connection, session: WireSession, work: Callable[[], Outcome]
    ) -> Outcome:
        """Run a statement in one of the caller's query slots, with the statement timeout.

        Each statement takes one request from the caller's token bucket first, as each HTTP
        request does: the wire is not a way around the gateway's rate limit.
        """
        gateway = self.gateway
        wait = await self._blocking(
            lambda: gateway.limiter.acquire(f"token:{session.caller.token_id}")
        )
        if wait > 0:
            raise RateLimitedError(wait, gateway.config.limits.requests_per_minute)
        connection.cancelled = False
        future = asyncio.wrap_future(self.gateway.submit_query_work(session.caller, work))
        connection.running = future
        try:
            return await asyncio.wait_for(
                asyncio.shield(future), timeout=self.settings.statement_seconds
            )
        except (asyncio.CancelledError, TimeoutError):
            if connection.task is not None and connection.task.cancelling():
                raise
            raise _Cancelled() from None
        finally:
            connection.running = None

    # -- the extended protocol ------------------------------------------------------------------

    def _parse(self, connection: _Connection, session: WireSession, body: codec.Body) -> bytes:
        name, sql = body.cstring(), body.cstring()
        count = body.int16()
        if count < 0:
            raise codec.ProtocolViolation("a negative parameter count")
        types = [body.uint32() for _ in range(count)]
        statements = split_statements(sql)
        if len(statements) > 1:
            raise QueryError(
                "a prepared statement must be one statement.",
                sql=sql,
                fix="prepare each statement on its own.",
            )
        text = statements[0] if statements else ""
        needed = parameter_count(text)
        if needed > MAX_PARAMETERS:
            raise QueryError(f"${needed} is beyond the protocol's {MAX_PARAMETERS} parameters.")
        types += [0] * (needed - len(types))
        if name and name in connection.statements:
            raise QueryError(f'prepared statement "{name}" already exists.')
        connection.statements[name] = _Prepared(text, types, session.kind(text) if text else "")
        return codec.PARSE_COMPLETE

    def _bind(self, connection: _Connection, session: WireSession, body: codec.Body) -> bytes:
        portal, statement = body.cstring(), body.cstring()
        prepared = connection.statements.get(statement)
        if prepared is None:
            raise QueryError(f'prepared statement "{statement}" does not exist.')
        formats = [body.int16() for _ in range(max(0, body.int16()))]
        count = body.int16()
        if count != len(prepared.types):
            raise codec.ProtocolViolation(
                f"Bind has {count} parameters; the statement needs {len(prepared.types)}"
            )
        values = []
        for i in range(count):
            length = body.int32()
            raw = None if length == -1 else body.raw(length)
            binary = (formats[0] if len(formats) == 1 else formats[i] if formats else 0) == 1
            try:
                values.append(codec.decode_parameter(raw, prepared.types[i], binary))
            except (ValueError, UnicodeDecodeError) as error:
                raise QueryError(
                    f"the value of parameter ${i + 1} cannot be read: {error}.",
                    clause="parameters",
                    fix="send it as text, or in the binary format of its declared type.",
                ) from None
        result_formats = [body.int16() for _ in range(max(0, body.int16()))]
        for fmt in result_formats:
            if fmt not in (0, 1):
                raise codec.ProtocolViolation(f"unknown format code {fmt}")
        sql = bind_parameters(prepared.sql, values, session.column_types()) if prepared.sql else ""
        connection.portals[portal] = _Portal(prepared, sql, result_formats)
        return codec.BIND_COMPLETE

    async def _describe(
        self, connection: _Connection, session: WireSession, body: codec.Body
    ) -> bytes:
        what, name = body.raw(1), body.cstring()
        if what == b"S":
            prepared = connection.statements.get(name)
            if prepared is None:
                raise QueryError(f'prepared statement "{name}" does not exist.')
            head = codec.parameter_description(prepared.types)
            # Parameters are not bound yet: the columns are described without them, from the
            # plan of the statement with each $n read as NULL.
            sql = bind_parameters(prepared.sql, [None] * len(prepared.types))
            fields = await self._fields(connection, session, prepared.kind, sql, None)
            return head + (codec.row_description(fields) if fields is not None else codec.NO_DATA)
        if what != b"P":
            raise codec.ProtocolViolation("Describe names neither a statement nor a portal")
        portal = connection.portals.get(name)
        if portal is None:
            raise QueryError(f'portal "{name}" does not exist.')
        try:
            fields = await self._fields(
                connection, session, portal.prepared.kind, portal.sql, portal
            )
        except Exception as error:
            error.wire_sql = portal.prepared.sql  # type: ignore[attr-defined]
            raise
        portal.described = fields
        if fields is None:
            return codec.NO_DATA
        return codec.row_description(fields, portal.formats)

    async def _fields(
        self,
        connection: _Connection,
        session: WireSession,
        kind: str,
        sql: str,
        portal: _Portal | None,
    ) -> list[codec.Field] | None:
        """The columns a statement will answer with, found without spending anything."""
        if not sql or (kind == "session" and not sql.lower().lstrip().startswith("show")):
            return None
        if kind == "private":
            described = await self._run_query_work(
                connection, session, lambda: Outcome(session.describe_private(sql))
            )
            return described.fields
        # Catalog reads, SHOW and EXPLAIN are free: run them now, answer Execute from this.
        outcome, _ = await self._statement(connection, session, sql)
        if portal is not None:
            portal.outcome = outcome
        return outcome.fields if outcome.has_rows else None

    async def _execute(
        self, connection: _Connection, session: WireSession, body: codec.Body
    ) -> bytes:
        name, limit = body.cstring(), body.int32()
        portal = connection.portals.get(name)
        if portal is None:
            raise QueryError(f'portal "{name}" does not exist.')
        if not portal.sql:
            return codec.EMPTY_QUERY
        changed: list[tuple[str, str]] = []
        if portal.outcome is None:
            try:
                portal.outcome, changed = await self._statement(connection, session, portal.sql)
            except Exception as error:
                error.wire_sql = portal.prepared.sql  # type: ignore[attr-defined]
                raise
        outcome = portal.outcome
        fields = portal.described if portal.described is not None else outcome.fields
        if portal.described is not None and len(portal.described) != len(outcome.fields):
            fields = outcome.fields  # the plan and the answer disagree: send the answer's shape
        out = []
        if portal.sent == 0:
            out += [codec.notice_response(_notice(n)) for n in outcome.notices]
            out += [codec.parameter_status(k, v) for k, v in changed]
        rows = outcome.rows[portal.sent :]
        if limit > 0 and len(rows) > limit:
            out += [codec.data_row(r, fields, portal.formats) for r in rows[:limit]]
            portal.sent += limit
            out.append(codec.PORTAL_SUSPENDED)
            return b"".join(out)
        out += [codec.data_row(r, fields, portal.formats) for r in rows]
        portal.sent = len(outcome.rows)
        out.append(codec.command_complete(outcome.tag))
        return b"".join(out)


class _Cancelled(Exception):
    """The client cancelled the statement, or its timeout passed."""


def _cancel_fields() -> Fields:
    return [
        (b"S", "ERROR"),
        (b"V", "ERROR"),
        (b"C", CANCELED),
        (b"M", "canceling statement due to user request or statement timeout"),
        (
            b"D",
            "a release that had reached the data was charged and recorded whatever the "
            "outcome; asked again, the same query is answered free from the ledger.",
        ),
    ]


def _inline(work: Callable[[], Any]) -> Any:
    """Statements already run on a query slot's thread: their gateway calls run inline."""
    return work()


def _status(session: WireSession) -> bytes:
    return b"T" if session.in_transaction else b"I"


def _notice(text: str) -> Fields:
    return [(b"S", "NOTICE"), (b"V", "NOTICE"), (b"C", "00000"), (b"M", text)]


def _descriptions(detail: dict[str, Any]) -> dict[str, Any]:
    """Table and column descriptions from the gateway's public description of a dataset."""
    tables: dict[str, Any] = {}
    for table in detail.get("tables", []):
        columns = {c["name"]: c.get("description") or "" for c in table.get("columns", [])}
        tables[table["name"]] = {
            "description": table.get("description") or "",
            "columns": columns,
        }
    return {"tables": tables}


async def _send(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(data)
    await writer.drain()


async def _fatal(writer: asyncio.StreamWriter, state: str, message: str) -> None:
    try:
        fields = [(b"S", "FATAL"), (b"V", "FATAL"), (b"C", state), (b"M", message)]
        await _send(writer, codec.error_response(fields))
    except (ConnectionError, RuntimeError):
        pass
