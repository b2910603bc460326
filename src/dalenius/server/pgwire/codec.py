"""PostgreSQL's frontend/backend protocol, version 3: reading client messages, writing replies.

Only framing and value encoding live here — no decision about what a message may do. Every read
is bounded before it is made: a length field above :data:`MAX_MESSAGE` (or, before sign-in,
:data:`MAX_STARTUP`) is a protocol violation and ends the connection, so a client can never
make the listener allocate what it announces.

Reference: https://www.postgresql.org/docs/current/protocol-message-formats.html
"""

from __future__ import annotations

import asyncio
import datetime
import math
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from dalenius.sql.wire import Literal, Untyped

PROTOCOL_3 = 196608
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102

MAX_STARTUP = 10_000
"""The most bytes a startup packet may have (PostgreSQL's own limit)."""
MAX_MESSAGE = 1 << 20
"""The most bytes any later message may have: a query text, a Bind with its values."""

# Type OIDs the listener sends and reads.
BOOL, BYTEA, NAME, INT8, INT2, INT4, TEXT, OID = 16, 17, 19, 20, 21, 23, 25, 26
FLOAT4, FLOAT8, UNKNOWN, BPCHAR, VARCHAR, DATE, NUMERIC = 700, 701, 705, 1042, 1043, 1082, 1700
TIMESTAMP, TIMESTAMPTZ = 1114, 1184

INTEGER_TYPES = frozenset({INT2, INT4, INT8, OID})
FLOAT_TYPES = frozenset({FLOAT4, FLOAT8})
TYPE_SIZES = {BOOL: 1, INT2: 2, INT4: 4, INT8: 8, OID: 4, FLOAT4: 4, FLOAT8: 8, DATE: 4}

_PG_EPOCH = datetime.date(2000, 1, 1)


class ProtocolViolation(Exception):
    """The client broke the protocol: the connection gets one error (SQLSTATE 08P01) and ends."""


@dataclass(frozen=True)
class Field:
    """One column of a RowDescription: its name and type OID (values sent as text)."""

    name: str
    type_oid: int
    size: int = -1


class Body:
    """A message body being read: every read checks it stays inside the body."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise ProtocolViolation("a message is shorter than its contents say")
        piece = self.data[self.at : self.at + n]
        self.at += n
        return piece

    def int16(self) -> int:
        """A signed 16-bit integer."""
        value: int = struct.unpack("!h", self._take(2))[0]
        return value

    def int32(self) -> int:
        """A signed 32-bit integer."""
        value: int = struct.unpack("!i", self._take(4))[0]
        return value

    def uint32(self) -> int:
        """An unsigned 32-bit integer (an OID, a cancel secret)."""
        value: int = struct.unpack("!I", self._take(4))[0]
        return value

    def cstring(self) -> str:
        """A zero-terminated UTF-8 string."""
        end = self.data.find(b"\x00", self.at)
        if end < 0:
            raise ProtocolViolation("a string in a message has no terminating zero byte")
        raw = self.data[self.at : end]
        self.at = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolViolation("a string in a message is not valid UTF-8") from None

    def raw(self, n: int) -> bytes:
        """The next ``n`` bytes."""
        return self._take(n)

    def rest(self) -> bytes:
        """Every byte left in the body."""
        return self._take(len(self.data) - self.at)


async def read_startup(reader: asyncio.StreamReader) -> tuple[int, Body]:
    """The first packet: its code (protocol version, SSL, GSS or cancel request) and body."""
    head = await reader.readexactly(4)
    length = struct.unpack("!i", head)[0]
    if not 8 <= length <= MAX_STARTUP:
        raise ProtocolViolation(f"a startup packet of {length} bytes is outside 8 … {MAX_STARTUP}")
    body = Body(await reader.readexactly(length - 4))
    return body.int32(), body


async def read_message(
    reader: asyncio.StreamReader, limit: int = MAX_MESSAGE
) -> tuple[bytes, Body]:
    """One typed message: its one-byte type and its body."""
    head = await reader.readexactly(5)
    kind, length = head[:1], struct.unpack("!i", head[1:])[0]
    if not 4 <= length <= limit:
        raise ProtocolViolation(f"a message of {length} bytes is outside 4 … {limit}")
    return kind, Body(await reader.readexactly(length - 4))


def startup_parameters(body: Body) -> dict[str, str]:
    """A startup packet's ``name value`` pairs (user, database, application_name …)."""
    out: dict[str, str] = {}
    while True:
        name = body.cstring()
        if not name:
            return out
        if len(out) >= 64:
            raise ProtocolViolation("a startup packet has more than 64 parameters")
        out[name] = body.cstring()


def message(kind: bytes, payload: bytes = b"") -> bytes:
    """A backend message: type, length, payload."""
    return kind + struct.pack("!i", len(payload) + 4) + payload


def cstr(text: str) -> bytes:
    """A zero-terminated string (a zero byte inside ``text`` is dropped)."""
    return text.encode("utf-8").replace(b"\x00", b"") + b"\x00"


def authentication(code: int, extra: bytes = b"") -> bytes:
    """AuthenticationOk (0), CleartextPassword (3), SASL (10), SASLContinue (11), SASLFinal (12)."""
    return message(b"R", struct.pack("!i", code) + extra)


def parameter_status(name: str, value: str) -> bytes:
    """ParameterStatus: a setting the client tracks (``client_encoding``, ``DateStyle`` …)."""
    return message(b"S", cstr(name) + cstr(value))


def backend_key(pid: int, secret: int) -> bytes:
    """BackendKeyData: what a CancelRequest for this connection must carry."""
    return message(b"K", struct.pack("!iI", pid, secret))


def ready(status: bytes) -> bytes:
    """ReadyForQuery: ``I`` idle, ``T`` in a transaction block."""
    return message(b"Z", status)


def command_complete(tag: str) -> bytes:
    """CommandComplete with its tag (``SELECT 2``, ``SET`` …)."""
    return message(b"C", cstr(tag))


PARSE_COMPLETE = message(b"1")
BIND_COMPLETE = message(b"2")
CLOSE_COMPLETE = message(b"3")
NO_DATA = message(b"n")
EMPTY_QUERY = message(b"I")
PORTAL_SUSPENDED = message(b"s")


def parameter_description(oids: Sequence[int]) -> bytes:
    """ParameterDescription: the type OID of each ``$n``."""
    return message(
        b"t", struct.pack("!h", len(oids)) + b"".join(struct.pack("!I", o) for o in oids)
    )


def row_description(fields: Sequence[Field], formats: Sequence[int] = ()) -> bytes:
    """RowDescription: each column's name, type and format (0 text, 1 binary)."""
    parts = [struct.pack("!h", len(fields))]
    for i, field in enumerate(fields):
        size = TYPE_SIZES.get(field.type_oid, field.size)
        fmt = _format_of(formats, i)
        parts.append(cstr(field.name) + struct.pack("!IhIhih", 0, 0, field.type_oid, size, -1, fmt))
    return message(b"T", b"".join(parts))


def _format_of(formats: Sequence[int], i: int) -> int:
    if not formats:
        return 0
    return formats[0] if len(formats) == 1 else formats[i]


def data_row(values: Sequence[Any], fields: Sequence[Field], formats: Sequence[int] = ()) -> bytes:
    """DataRow: one row, each value in its column's format (``None`` is NULL)."""
    parts = [struct.pack("!h", len(values))]
    for i, value in enumerate(values):
        if value is None:
            parts.append(struct.pack("!i", -1))
            continue
        if _format_of(formats, i) == 1:
            raw = encode_binary(value, fields[i].type_oid)
        else:
            raw = encode_text(value).encode("utf-8")
        parts.append(struct.pack("!i", len(raw)) + raw)
    return message(b"D", b"".join(parts))


def encode_text(value: Any) -> str:
    """A value in PostgreSQL's text format."""
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return "{" + ",".join(_array_item(v) for v in value) + "}"
    return str(value)


def _array_item(value: Any) -> str:
    if value is None:
        return "NULL"
    text = encode_text(value)
    if isinstance(value, str):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def encode_binary(value: Any, type_oid: int) -> bytes:
    """A value in PostgreSQL's binary format, for the types the listener describes."""
    if type_oid == BOOL:
        return b"\x01" if value else b"\x00"
    if type_oid == INT8:
        return struct.pack("!q", int(value))
    if type_oid == INT4:
        return struct.pack("!i", int(value))
    if type_oid == INT2:
        return struct.pack("!h", int(value))
    if type_oid == OID:
        return struct.pack("!I", int(value))
    if type_oid == FLOAT8:
        return struct.pack("!d", float(value))
    if type_oid == FLOAT4:
        return struct.pack("!f", float(value))
    if type_oid == DATE and isinstance(value, datetime.date):
        return struct.pack("!i", (value - _PG_EPOCH).days)
    return encode_text(value).encode("utf-8")


BINARY_RESULT_TYPES = frozenset(
    {BOOL, INT2, INT4, INT8, OID, FLOAT4, FLOAT8, DATE, TEXT, VARCHAR, NAME}
)
"""Result types the listener can send in binary format; text is text in both formats."""


def decode_parameter(raw: bytes | None, type_oid: int, binary: bool) -> Literal:
    """One Bind parameter as a literal of its declared type (``0``: unknown, read as text).

    Raises:
        ValueError: the bytes are not a value of that type (the caller names the parameter).
    """
    if raw is None:
        return None
    if binary:
        return _decode_binary(raw, type_oid)
    text = raw.decode("utf-8")
    if type_oid in INTEGER_TYPES:
        return int(text)
    if type_oid in FLOAT_TYPES:
        number = float(text)
        if not math.isfinite(number):
            raise ValueError("not a finite number")
        return number
    if type_oid == NUMERIC:
        try:
            return Decimal(text)
        except InvalidOperation:
            raise ValueError("not a number") from None
    if type_oid == BOOL:
        lowered = text.strip().lower()
        if lowered in ("t", "true", "yes", "on", "1"):
            return True
        if lowered in ("f", "false", "no", "off", "0"):
            return False
        raise ValueError("not a boolean")
    if type_oid == DATE:
        return datetime.date.fromisoformat(text.strip())
    if type_oid in (0, UNKNOWN):
        return Untyped(text)
    return text


def _decode_binary(raw: bytes, type_oid: int) -> Literal:
    sizes = {INT2: "!h", INT4: "!i", INT8: "!q", OID: "!I", FLOAT4: "!f", FLOAT8: "!d"}
    if type_oid in sizes:
        fmt = sizes[type_oid]
        if len(raw) != struct.calcsize(fmt):
            raise ValueError(f"{len(raw)} bytes for a {struct.calcsize(fmt)}-byte number")
        value = struct.unpack(fmt, raw)[0]
        if type_oid in FLOAT_TYPES and not math.isfinite(value):
            raise ValueError("not a finite number")
        result: Literal = value
        return result
    if type_oid == BOOL:
        if len(raw) != 1:
            raise ValueError("a boolean is one byte")
        return raw != b"\x00"
    if type_oid == DATE:
        if len(raw) != 4:
            raise ValueError("a date is four bytes")
        return _PG_EPOCH + datetime.timedelta(days=struct.unpack("!i", raw)[0])
    if type_oid in (TEXT, VARCHAR, BPCHAR, NAME, UNKNOWN, 0):
        return raw.decode("utf-8")
    if type_oid == NUMERIC:
        return _decode_numeric(raw)
    raise ValueError(f"the binary format of type {type_oid} is not accepted; send it as text")


def _decode_numeric(raw: bytes) -> Decimal:
    """PostgreSQL's binary ``numeric``: base-10000 digits with a weight and a sign."""
    if len(raw) < 8:
        raise ValueError("a numeric is at least eight bytes")
    ndigits, weight, sign, _scale = struct.unpack("!hhHh", raw[:8])
    if ndigits < 0 or len(raw) != 8 + 2 * ndigits or sign not in (0, 0x4000):
        raise ValueError("a malformed numeric")
    digits = struct.unpack(f"!{ndigits}h", raw[8:])
    value = Decimal(0)
    for i, digit in enumerate(digits):
        value += Decimal(digit).scaleb(4 * (weight - i))
    return -value if sign == 0x4000 else value


def error_fields(fields: Iterable[tuple[bytes, str]]) -> bytes:
    """The fields of an ErrorResponse or NoticeResponse (empty texts left out)."""
    return b"".join(code + cstr(text) for code, text in fields if text) + b"\x00"


def error_response(fields: Iterable[tuple[bytes, str]]) -> bytes:
    """ErrorResponse."""
    return message(b"E", error_fields(fields))


def notice_response(fields: Iterable[tuple[bytes, str]]) -> bytes:
    """NoticeResponse."""
    return message(b"N", error_fields(fields))
