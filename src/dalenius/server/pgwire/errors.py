"""Refusals and failures as PostgreSQL errors: SQLSTATE, message, DETAIL (why), HINT (fix), position.

The texts are the library's own (the same as over HTTP, in the gateway's words), so a refusal
reads the same in psql as in the console. A refusal of SQL carries the cursor position of its
clause, which psql shows under the statement with a caret. A failure after the data gate is the
one fixed outcome, whose bytes never depend on the data.
"""

from __future__ import annotations

import re
from typing import Any

from dalenius.core.errors import (
    BudgetExceededError,
    CatalogError,
    ConfigurationError,
    EvaluationFailed,
    ExecutionError,
    InvalidLossError,
    PrivacyRefusal,
    QueryError,
    UserError,
)
from dalenius.ledger import RequestInProgressError
from dalenius.server.errors import (
    AuthenticationError,
    DatasetUnavailableError,
    ForbiddenError,
    RateLimitedError,
    _in_gateway_words,
)
from dalenius.server.slots import BusyError
from dalenius.server.store import ConflictError, NotFoundError

Fields = list[tuple[bytes, str]]

_STATES: tuple[tuple[type[BaseException], str], ...] = (
    (PrivacyRefusal, "42501"),  # insufficient_privilege: the query would reveal too much
    (QueryError, "42601"),  # syntax_error (and every other refusal of the SQL)
    (BudgetExceededError, "53400"),  # configuration_limit_exceeded
    (InvalidLossError, "22023"),  # invalid_parameter_value
    (CatalogError, "58P01"),
    (AuthenticationError, "28P01"),  # invalid_password
    (ForbiddenError, "42501"),
    (RateLimitedError, "53300"),  # too_many_connections
    (BusyError, "53300"),
    (NotFoundError, "3D000"),  # invalid_catalog_name (a dataset is a database)
    (DatasetUnavailableError, "58P01"),
    (RequestInProgressError, "55006"),  # object_in_use
    (ConflictError, "55006"),
    (ConfigurationError, "22023"),
)

_LOCATED = re.compile(r"\s*\(line \d+, column \d+\)")

CANCELED = "57014"
PROTOCOL_VIOLATION = "08P01"

# Spellings of the library's fixes that a PostgreSQL client writes otherwise.
_FIX_WORDS = (
    (re.compile(r"\bpass epsilon=([\d.e-]+)"), r"SET dalenius.epsilon = \1"),
    (re.compile(r"\bpass delta=([\d.e-]+)"), r"SET dalenius.delta = \1"),
    (re.compile(r"\bepsilon=([\d.e-]+)"), r"dalenius.epsilon = \1"),
    (re.compile(r"\bdelta=([\d.e-]+)"), r"dalenius.delta = \1"),
    (re.compile(r"\bconfidence=([\d.e-]+)"), r"dalenius.confidence = \1"),
    (re.compile(r"\btarget_error=([\d.e-]+)"), r"dalenius.target_error = \1"),
)


def in_wire_words(text: str) -> str:
    """A fix in the words a PostgreSQL client uses: settings, not Python arguments.

    Example:
        >>> in_wire_words("pass epsilon=0.1 (for example)")
        'SET dalenius.epsilon = 0.1 (for example)'
    """
    for pattern, replacement in _FIX_WORDS:
        text = pattern.sub(replacement, text)
    return text


def sqlstate(error: BaseException) -> str:
    """The SQLSTATE of a refusal or failure."""
    if isinstance(error, EvaluationFailed):
        return "XX000"
    if isinstance(error, ExecutionError):
        return "58030"
    for kind, state in _STATES:
        if isinstance(error, kind):
            return state
    return "XX000" if not isinstance(error, UserError) else "22023"


def error_fields(
    error: BaseException, sql: str | None = None, offset: int = 0, severity: str = "ERROR"
) -> Fields:
    """The ErrorResponse fields for ``error`` raised by a statement at ``offset`` of the query
    string ``sql`` (the position counts characters of the whole string, from 1).
    """
    state = sqlstate(error)
    head: Fields = [(b"S", severity), (b"V", severity), (b"C", state)]
    if isinstance(error, EvaluationFailed):
        fixed = error.to_dict()
        return [*head, (b"M", fixed["message"]), (b"D", fixed["why"]), (b"H", fixed["fix"])]
    if isinstance(error, UserError):
        detail: dict[str, Any] = _in_gateway_words(error.to_dict())
        message = str(detail.get("message") or error)
        fields = [*head, (b"M", message)]
        if detail.get("why"):
            fields.append((b"D", str(detail["why"])))
        if detail.get("fix"):
            fields.append((b"H", in_wire_words(str(detail["fix"]))))
        position = _position(error, sql, offset)
        if position:
            # The client shows the position itself (psql: a caret under the clause).
            fields[len(head)] = (b"M", _LOCATED.sub("", message))
            fields.append((b"P", str(position)))
        if isinstance(error, RateLimitedError):
            fields.append((b"D", f"retry after {error.retry_after:.1f} s"))
        return fields
    if isinstance(error, ExecutionError):
        return [
            *head,
            (
                b"M",
                "the database engine failed on a public table, before anything was reserved; "
                "nothing was released and nothing was spent.",
            ),
            (b"H", "try again; if it persists, tell the curator."),
        ]
    return [
        *head,
        (b"M", "the gateway failed to answer because of a bug; nothing was released."),
        (b"H", "tell the curator the time of the request; the gateway's log has the details."),
    ]


def _position(error: UserError, sql: str | None, offset: int) -> int | None:
    """1-based character position of a SQL error's span within the whole query string."""
    span = getattr(error, "span", None)
    text = getattr(error, "sql", None)
    if span is None or not text or sql is None:
        return None
    lines = text.split("\n")
    if not 1 <= span.line <= len(lines):
        return None
    local: int = sum(len(line) + 1 for line in lines[: span.line - 1]) + span.column - 1
    start = sql.find(str(text), offset)
    if start < 0:
        return None  # the text was rewritten (bound parameters): no position to point at
    return start + local + 1
