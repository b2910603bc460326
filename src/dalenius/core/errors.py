"""One exception root for Dalenius, with user errors kept apart from internal bugs.

Every user-facing error says *what* went wrong, *why*, and *how to fix it*, with the numbers
involved; SQL errors also point at a line and column. Refusals are raised before any data is read,
so an error never depends on the data and never costs privacy budget.
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any


class DaleniusError(Exception):
    """Root of every exception Dalenius raises on purpose."""


class UserError(DaleniusError):
    """Bad input from a user (analyst or custodian): fixable by them, costs no budget.

    Args:
        what: one sentence saying what is wrong.
        why: why Dalenius refuses it (privacy or correctness reason), if not obvious.
        fix: a concrete change that would be accepted.
    """

    code = "user_error"

    def __init__(self, what: str, *, why: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.why = why
        self.fix = fix
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.what]
        if self.why:
            parts.append(f"Why: {self.why}")
        if self.fix:
            parts.append(f"Fix: {self.fix}")
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The error as a JSON-ready object (used by the CLI's ``--json`` and the HTTP API)."""
        return {"code": self.code, "message": self.what, "why": self.why, "fix": self.fix}


class ConfigurationError(UserError):
    """A bad argument or setting (an ε that is not a positive finite number, an unknown option)."""

    code = "configuration_error"


class InvalidLossError(ConfigurationError, ValueError):
    """A privacy loss that is negative, not finite, or has δ outside [0, 1)."""

    code = "invalid_loss"


class CatalogError(UserError):
    """The custodian's catalog file is malformed; names the file, table and column."""

    code = "catalog_error"

    def __init__(
        self,
        what: str,
        *,
        file: str | None = None,
        table: str | None = None,
        column: str | None = None,
        why: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.file = file
        self.table = table
        self.column = column
        where = []
        if file:
            where.append(f"file {file}")
        if table:
            where.append(f"table {table!r}")
        if column:
            where.append(f"column {column!r}")
        prefix = f"Catalog error in {', '.join(where)}: " if where else "Catalog error: "
        super().__init__(prefix + what, why=why, fix=fix)

    def to_dict(self) -> dict[str, Any]:
        """The error as a JSON-ready object."""
        out = super().to_dict()
        out.update(file=self.file, table=self.table, column=self.column)
        return out


@dataclass(frozen=True)
class SourceSpan:
    """Where in the SQL text an error is: 1-based line and column, and the offending text."""

    line: int
    column: int
    text: str


class QueryError(UserError):
    """An SQL query Dalenius cannot answer: syntax, unknown names, unsupported or unsafe constructs.

    Args:
        clause: the SQL clause at fault (``SELECT``, ``WHERE``, ``GROUP BY``, ``FROM`` …).
        sql: the full query text, so the message can show the offending span.
        span: where in ``sql`` the problem is.
    """

    code = "query_error"

    def __init__(
        self,
        what: str,
        *,
        clause: str | None = None,
        sql: str | None = None,
        span: SourceSpan | None = None,
        why: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.clause = clause
        self.sql = sql
        self.span = span
        self.bare = what
        head = what
        if clause:
            head = f"{clause}: {what}"
        if span:
            head = f"{head} (line {span.line}, column {span.column})"
        super().__init__(head, why=why, fix=fix)

    def relocated(self, sql: str, span: SourceSpan) -> QueryError:
        """The same error (same class) pointing at ``span`` of ``sql``."""
        out = type(self).__new__(type(self))
        QueryError.__init__(
            out, self.bare, clause=self.clause, sql=sql, span=span, why=self.why, fix=self.fix
        )
        return out

    def _render(self) -> str:
        text = super()._render()
        pointer = self.pointer()
        return f"{text}\n{pointer}" if pointer else text

    def pointer(self) -> str:
        """The offending line of SQL with the span underlined, or ``''`` without a span."""
        if not (self.sql and self.span):
            return ""
        lines = self.sql.splitlines() or [""]
        if not 1 <= self.span.line <= len(lines):
            return ""
        line = lines[self.span.line - 1]
        start = max(self.span.column - 1, 0)
        width = max(len(self.span.text), 1)
        return f"  {line}\n  {' ' * start}{'^' * width}"

    def to_dict(self) -> dict[str, Any]:
        """The error as a JSON-ready object."""
        out = super().to_dict()
        out["clause"] = self.clause
        if self.span:
            out["line"] = self.span.line
            out["column"] = self.span.column
            out["span"] = self.span.text
        return out


class PrivacyRefusal(QueryError):
    """A well-formed query refused because its privacy cost could not be bounded."""

    code = "privacy_refusal"


class PublicAnswer(QueryError):
    """A query whose answer is public, read off the catalog: ``SELECT state FROM people GROUP BY
    state`` on a column with a public key list asks only for those keys.

    :meth:`dalenius.engine.session.Session.query` answers it exactly, reading no data and spending
    nothing (audited as answered); explaining it says so, free.

    Attributes:
        columns: the output columns.
        types: their catalog types.
        rows: the answer's rows.
    """

    code = "public_answer"

    def __init__(
        self,
        what: str,
        *,
        columns: tuple[str, ...],
        types: tuple[str, ...],
        rows: tuple[tuple[Any, ...], ...],
        **kwargs: Any,
    ) -> None:
        super().__init__(what, **kwargs)
        self.columns = columns
        self.types = types
        self.rows = rows
        self.kinds: tuple[str, ...] = ("key",) * len(columns)


class PublicQuery(PublicAnswer):
    """A query that reads public tables alone: it has passed the allow-list of
    :mod:`dalenius.sql.public_sql` (one SELECT over public catalog tables, known columns, listed
    functions) and is answered exactly by running it on those tables.

    Public tables belong to no privacy unit (the custodian declared them public), so the exact
    answer reveals nothing protected: :meth:`dalenius.engine.session.Session.query` runs
    :attr:`statement` under the engine's time limit, spends nothing, writes no ledger entry and
    one audit line; explaining it says so, free.

    Attributes:
        kinds: per column, ``key`` (a value as read) or ``count``/``exact`` (an aggregate, whose
            interval is the value itself).
        tables: the public tables it reads.
        statement: the checked statement written in an engine's dialect (given the dialect).
        max_rows: the most rows an answer may have (one more is read, to know it has more).
    """

    def __init__(
        self,
        what: str,
        *,
        columns: tuple[str, ...],
        types: tuple[str, ...],
        kinds: tuple[str, ...],
        tables: tuple[Any, ...],
        statement: Any,
        max_rows: int,
        **kwargs: Any,
    ) -> None:
        super().__init__(what, columns=columns, types=types, rows=(), **kwargs)
        self.kinds = kinds
        self.tables = tables
        self.statement = statement
        self.max_rows = max_rows


class BoundsNotChosen(PrivacyRefusal):
    """A query needs the bounds of a column whose bounds are chosen privately, and they are not
    chosen yet (``bounds = "private"`` in the catalog).

    :meth:`dalenius.engine.session.Session.query` catches it, chooses the bounds (a release of
    its own, charged once per data version) and plans again; :meth:`~dalenius.engine.session.
    Session.explain` raises it, free, because explaining never spends.

    Attributes:
        columns: the ``(table, column)`` pairs whose bounds are missing.
    """

    code = "bounds_not_chosen"

    def __init__(self, what: str, *, columns: tuple[tuple[str, str], ...], **kwargs: Any) -> None:
        super().__init__(what, **kwargs)
        self.columns = columns


class BudgetExceededError(UserError):
    """A request whose loss would exceed what remains of a budget; shows the three numbers."""

    code = "budget_exceeded"

    def __init__(
        self,
        *,
        requested: Fraction,
        remaining: Fraction,
        measure: str = "epsilon",
        scope: str = "this session",
        fix: str | None = None,
    ) -> None:
        self.requested = requested
        self.remaining = remaining
        self.difference = requested - remaining
        self.measure = measure
        super().__init__(
            f"Budget exceeded for {scope}: requested {measure} = {_fmt(requested)}, "
            f"remaining {_fmt(remaining, down=True)}, short by {_fmt(self.difference)}.",
            why="answering would spend more privacy loss than the budget allows; nothing was spent.",
            fix=fix
            or f"ask with {measure} <= {_fmt(remaining, down=True)}, or ask the custodian for more budget.",
        )

    def to_dict(self) -> dict[str, Any]:
        """The error as a JSON-ready object."""
        out = super().to_dict()
        out.update(
            measure=self.measure,
            requested=float(self.requested),
            remaining=float(self.remaining),
            difference=float(self.difference),
        )
        return out


class MissingExtraError(UserError, ImportError):
    """An optional dependency is not installed; names the pip command that installs it."""

    code = "missing_extra"

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the Python package {package!r}, which is not installed.",
            fix=f"pip install 'dalenius[{extra}]'",
        )


class ExecutionError(DaleniusError):
    """The database engine failed while computing an exact aggregate; nothing was released."""

    code = "execution_error"


@dataclass(frozen=True)
class _Fixed:
    code: str
    message: str
    why: str
    fix: str
    status: int


class PostGateOutcome(enum.Enum):
    """The closed set of outcomes after the data gate other than an answer.

    Each has one constant text, code and HTTP status, used on every surface (Python, the command
    line, the HTTP API, the console): after the engine has read the data, nothing about *how* it
    failed — counts, values, row numbers, engine text — may reach the analyst. The engine's
    message goes to the custodian's audit trail only.
    """

    FAILED = _Fixed(
        code="evaluation_failed",
        message="the engine failed after reading the data; the reserved loss was charged",
        why="once the engine has read the data, every outcome is charged and says nothing "
        "about the data, so that a failure is never a free or informative query.",
        fix="the custodian was alerted; a retry with the same idempotency key returns this "
        "outcome at no new cost, a new request is charged again.",
        status=502,
    )
    DEADLINE = _Fixed(
        code="deadline",
        message="the release deadline passed before the answer was ready; "
        "the reserved loss was charged",
        why="in constant-time mode every outcome leaves at a deadline fixed in advance from "
        "public facts; a miss is charged and says nothing about the data.",
        fix="the custodian was alerted; a retry with the same idempotency key returns this "
        "outcome at no new cost, a new request is charged again.",
        status=502,
    )

    @property
    def code(self) -> str:
        """The outcome's machine-readable code."""
        return self.value.code

    @property
    def message(self) -> str:
        """The outcome's one constant sentence."""
        return self.value.message

    @property
    def status(self) -> int:
        """The HTTP status of the outcome (the same for every post-gate outcome)."""
        return self.value.status

    @classmethod
    def from_code(cls, code: str) -> PostGateOutcome:
        """The outcome a code names; an unknown code (an older record) reads as ``FAILED``."""
        return next((o for o in cls if o.code == code), cls.FAILED)


class EvaluationFailed(DaleniusError):
    """A request failed after the data gate: its loss was charged; the text is always the same.

    Example:
        >>> str(EvaluationFailed())
        'the engine failed after reading the data; the reserved loss was charged'
        >>> EvaluationFailed().body()
        b'{"error":{"code":"evaluation_failed","message":"the engine failed after reading the data; the reserved loss was charged","why":"once the engine has read the data, every outcome is charged and says nothing about the data, so that a failure is never a free or informative query.","fix":"the custodian was alerted; a retry with the same idempotency key returns this outcome at no new cost, a new request is charged again."}}'
    """

    code = "evaluation_failed"

    def __init__(self, outcome: PostGateOutcome = PostGateOutcome.FAILED) -> None:
        self.outcome = outcome
        self.code = outcome.code
        super().__init__(outcome.message)

    def to_dict(self) -> dict[str, Any]:
        """The outcome as a JSON-ready object: constant for each outcome."""
        fixed = self.outcome.value
        return {"code": fixed.code, "message": fixed.message, "why": fixed.why, "fix": fixed.fix}

    def body(self) -> bytes:
        """The canonical bytes of the outcome, as the HTTP API and ``--json`` send them."""
        return json.dumps({"error": self.to_dict()}, separators=(",", ":")).encode()


class DeadlineError(EvaluationFailed):
    """Constant-time mode: the release deadline passed before the outcome was ready.

    The text is constant (it says nothing about the data); the loss was charged. It is the
    ``DEADLINE`` member of the closed set of post-gate outcomes.
    """

    message = PostGateOutcome.DEADLINE.message

    def __init__(self) -> None:
        super().__init__(PostGateOutcome.DEADLINE)


class InternalError(DaleniusError):
    """A bug in Dalenius, not in the user's input. Please report it."""

    code = "internal_error"


def _fmt(x: Fraction, *, down: bool = False) -> str:
    """Format an exact loss for people with six significant digits.

    With ``down`` the last digit is rounded toward zero, so a remaining budget is never shown
    larger than it is (2/3 reads 0.666666, not 0.666667).
    """
    if x.denominator == 1:
        return str(x.numerator)
    text = f"{float(x):.6g}"
    if down and Fraction(text) > x:
        digits = 6
        while digits < 20 and Fraction(text) > x:
            exponent = math.floor(math.log10(abs(float(x)))) if x else 0
            quantum = Fraction(10) ** (exponent - digits + 1)
            text = f"{float(math.floor(x / quantum) * quantum):.{digits}g}"
            digits += 1
    return text


def post_gate_error(outcome: PostGateOutcome) -> EvaluationFailed:
    """The exception of a post-gate outcome: :class:`DeadlineError` or :class:`EvaluationFailed`.

    Example:
        >>> type(post_gate_error(PostGateOutcome.DEADLINE)).__name__
        'DeadlineError'
    """
    return DeadlineError() if outcome is PostGateOutcome.DEADLINE else EvaluationFailed(outcome)
