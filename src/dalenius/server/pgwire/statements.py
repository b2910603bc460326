"""What one statement from a PostgreSQL client does: the listener's session, without the protocol.

Every statement is sorted, before any data is read, into one of four kinds:

- a **session statement** — ``SET``/``RESET``/``SHOW``, ``BEGIN``/``COMMIT``/``ROLLBACK``,
  ``DISCARD``, ``DEALLOCATE`` — answered from the session's own settings;
- a **catalog read** — ``SELECT version()``, ``pg_catalog``, ``information_schema`` — answered
  by the shadow catalog (:mod:`.catalog`) from public metadata alone;
- ``EXPLAIN <query>`` — the gateway's explain: the plan, its loss and the expected errors, free;
- a **private query** — everything else goes to :meth:`Gateway.query`, the same call the HTTP
  API makes: the same policy, ledger, audit lines and constant-time mode.

Nothing here decides what is private: it only chooses which of the gateway's calls answers.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dalenius.core.errors import ConfigurationError, QueryError
from dalenius.server.gateway import Gateway
from dalenius.server.pgwire import codec
from dalenius.server.pgwire.catalog import SERVER_SETTINGS, ShadowCatalog
from dalenius.server.store import Caller
from dalenius.sql.wire import reads_catalog_only

TYPE_OIDS = {
    "int": codec.INT8,
    "float": codec.FLOAT8,
    "str": codec.TEXT,
    "bool": codec.BOOL,
    "date": codec.DATE,
}

_DUCK_TYPES = {
    "BIGINT": codec.INT8,
    "INTEGER": codec.INT4,
    "SMALLINT": codec.INT2,
    "TINYINT": codec.INT2,
    "HUGEINT": codec.NUMERIC,
    "UBIGINT": codec.NUMERIC,
    "UINTEGER": codec.INT8,
    "DOUBLE": codec.FLOAT8,
    "FLOAT": codec.FLOAT4,
    "BOOLEAN": codec.BOOL,
    "DATE": codec.DATE,
    "VARCHAR": codec.TEXT,
    "TIMESTAMP": codec.TIMESTAMP,
    "TIMESTAMP WITH TIME ZONE": codec.TIMESTAMPTZ,
}

DEFAULTS = {
    **SERVER_SETTINGS,
    "client_encoding": "UTF8",
    "datestyle": "ISO, MDY",
    "timezone": "UTC",
    "intervalstyle": "postgres",
    "standard_conforming_strings": "on",
    "is_superuser": "off",
    "transaction_isolation": "read committed",
    "transaction_read_only": "on",
    "default_transaction_read_only": "on",
    "search_path": '"$user", public',
    "extra_float_digits": "1",
    "dalenius.intervals": "on",
    "dalenius.confidence": "",
    "dalenius.epsilon": "",
    "dalenius.delta": "",
    "dalenius.target_error": "",
    "dalenius.target_relative": "",
}
"""Settings a client may read; ``dalenius.*`` ones choose the loss and the answer's shape."""

REPORTED = (
    "server_version",
    "server_encoding",
    "client_encoding",
    "datestyle",
    "timezone",
    "intervalstyle",
    "integer_datetimes",
    "standard_conforming_strings",
    "is_superuser",
    "application_name",
    "default_transaction_read_only",
)
"""Settings reported to the client at start-up (ParameterStatus), as PostgreSQL does."""

_DISPLAY = {"datestyle": "DateStyle", "timezone": "TimeZone", "intervalstyle": "IntervalStyle"}

_SET = re.compile(
    r"^SET\s+(?:SESSION\s+|LOCAL\s+)?([A-Za-z_][\w.]*)\s*(?:=|\s+TO\s+|\s+)\s*(.+?)\s*$",
    re.IGNORECASE | re.DOTALL,
)
_SET_TIME_ZONE = re.compile(r"^SET\s+(?:SESSION\s+|LOCAL\s+)?TIME\s+ZONE\s+(.+?)\s*$", re.I)
_SHOW = re.compile(
    r"^SHOW\s+(TRANSACTION\s+ISOLATION\s+LEVEL|TIME\s+ZONE|[A-Za-z_][\w.]*|ALL)\s*;?\s*$",
    re.IGNORECASE,
)
_RESET = re.compile(r"^RESET\s+([A-Za-z_][\w.]*|ALL)\s*$", re.IGNORECASE)
_EXPLAIN = re.compile(r"^EXPLAIN\s+(?:\((?:[^()]*)\)\s*)?(?:ANALYZE\s+|VERBOSE\s+)*", re.I)
_WORD = re.compile(r"^\s*([A-Za-z_]+)")

ENCODINGS = {"utf8", "utf-8", "unicode", "sql_ascii"}


@dataclass
class Outcome:
    """What one statement answered: columns, rows, the command tag and notices to send first."""

    fields: list[codec.Field] = field(default_factory=list)
    rows: list[Sequence[Any]] = field(default_factory=list)
    tag: str = "SELECT 0"
    notices: list[str] = field(default_factory=list)
    has_rows: bool = False


class WireSession:
    """One connection's settings and statements, for a signed-in caller on one dataset."""

    def __init__(
        self,
        gateway: Gateway,
        caller: Caller,
        dataset: str,
        shadow: ShadowCatalog,
        startup: dict[str, str],
    ) -> None:
        self.gateway = gateway
        self.caller = caller
        self.dataset = dataset
        self.shadow = shadow
        self.settings = dict(DEFAULTS)
        self.settings["application_name"] = startup.get("application_name", "")
        self.settings["session_authorization"] = caller.name
        for name, value in _startup_options(startup.get("options", "")).items():
            self.set(name, value)
        self.in_transaction = False

    # -- settings ----------------------------------------------------------------------------

    def reported(self) -> list[tuple[str, str]]:
        """The ParameterStatus pairs sent at start-up."""
        return [(_DISPLAY.get(n, n), self.settings.get(n, "")) for n in REPORTED]

    def set(self, name: str, value: str) -> tuple[str, str] | None:
        """Set a setting; returns a ParameterStatus pair when clients must be told."""
        key = name.lower()
        text = _unquote(value)
        if key == "client_encoding" and text.lower() not in ENCODINGS:
            raise ConfigurationError(
                f"client_encoding {text!r} is not supported.",
                fix="use UTF8 (the gateway's only encoding).",
            )
        if key.startswith("dalenius."):
            self._check_dalenius(key, text)
        self.settings[key] = "UTF8" if key == "client_encoding" else text
        return (_DISPLAY.get(key, key), self.settings[key]) if key in REPORTED else None

    def _check_dalenius(self, key: str, text: str) -> None:
        if key not in DEFAULTS:
            known = ", ".join(sorted(k for k in DEFAULTS if k.startswith("dalenius.")))
            raise ConfigurationError(
                f"unknown setting {key!r}.",
                fix=f"the gateway's settings are {known}.",
            )
        if key == "dalenius.intervals":
            if text.lower() not in ("on", "off", "true", "false", "1", "0"):
                raise ConfigurationError(
                    f"dalenius.intervals must be on or off, got {text!r}.",
                    fix="SET dalenius.intervals = off drops the _low and _high columns.",
                )
        elif text and key != "dalenius.target_error":
            try:
                float(text)
            except ValueError:
                raise ConfigurationError(
                    f"{key} must be a number, got {text!r}.",
                    fix=f"write for example SET {key} = 0.1, or RESET {key}.",
                ) from None

    def intervals(self) -> bool:
        """Whether answers carry ``<col>_low`` and ``<col>_high`` (``dalenius.intervals``)."""
        return self.settings["dalenius.intervals"].lower() in ("on", "true", "1")

    def loss_arguments(self) -> tuple[Any, Any, float | None, dict[str, Any]]:
        """ε, δ, the confidence and the error targets the session's settings give a query."""
        s = self.settings
        targets: dict[str, Any] = {}
        if s["dalenius.target_error"]:
            targets["target_error"] = float(s["dalenius.target_error"])
        if s["dalenius.target_relative"]:
            targets["target_relative"] = float(s["dalenius.target_relative"])
        confidence = float(s["dalenius.confidence"]) if s["dalenius.confidence"] else None
        return (s["dalenius.epsilon"] or None, s["dalenius.delta"] or None, confidence, targets)

    # -- statements ----------------------------------------------------------------------------

    def kind(self, sql: str) -> str:
        """``session``, ``catalog``, ``explain`` or ``private``: decided from the text alone."""
        word = _first_word(sql)
        if word in _SESSION_WORDS:
            return "session"
        if word == "explain":
            return "explain"
        if reads_catalog_only(sql, self.shadow.table_names):
            return "catalog"
        return "private"

    def session_statement(self, sql: str) -> tuple[Outcome, list[tuple[str, str]]]:
        """Answer a session statement; also returns the settings changed that clients track."""
        word = _first_word(sql)
        changed: list[tuple[str, str]] = []
        if word == "set":
            zone = _SET_TIME_ZONE.match(sql)
            found = _SET.match(sql)
            if zone:
                pair = self.set("timezone", zone.group(1))
            elif found and found.group(1).lower() not in ("transaction", "session"):
                pair = self.set(found.group(1), found.group(2))
            else:
                return Outcome(tag="SET"), changed  # SET TRANSACTION …: every query is read-only
            if pair:
                changed.append(pair)
            return Outcome(tag="SET"), changed
        if word == "reset":
            found = _RESET.match(sql)
            names = (
                list(DEFAULTS)
                if found is None or found.group(1).lower() == "all"
                else [found.group(1).lower()]
            )
            for name in names:
                if name in DEFAULTS:
                    self.settings[name] = DEFAULTS[name]
            return Outcome(tag="RESET"), changed
        if word == "show":
            return self._show(sql), changed
        if word in ("begin", "start"):
            self.in_transaction = True
            return Outcome(tag="BEGIN"), changed
        if word in ("commit", "end"):
            self.in_transaction = False
            return Outcome(tag="COMMIT"), changed
        if word in ("savepoint", "release"):
            return Outcome(tag=word.upper()), changed
        if word in ("rollback", "abort"):
            self.in_transaction = self.in_transaction and " to " in f" {sql.lower()} "
            notice = (
                "a release cannot be rolled back: every answer given in the transaction was "
                "charged when it was released (a repeat of it is answered free)."
            )
            return Outcome(tag="ROLLBACK", notices=[notice]), changed
        if word == "discard":
            return Outcome(tag="DISCARD ALL"), changed
        if word == "deallocate":
            return Outcome(tag="DEALLOCATE"), changed
        if word in {"listen", "unlisten"}:
            return Outcome(tag=word.upper()), changed
        raise QueryError(f"the statement {word.upper()} is not supported.", sql=sql)

    def _show(self, sql: str) -> Outcome:
        found = _SHOW.match(sql)
        if found is None:
            raise QueryError(
                "SHOW needs one setting name.", sql=sql, fix="write e.g. SHOW dalenius.remaining."
            )
        name = re.sub(r"\s+", " ", found.group(1).lower())
        name = {
            "transaction isolation level": "transaction_isolation",
            "time zone": "timezone",
        }.get(name, name)
        if name == "all":
            rows = [(k, v, "") for k, v in sorted(self.settings.items())]
            fields = [codec.Field(n, codec.TEXT) for n in ("name", "setting", "description")]
            return Outcome(fields, list(rows), f"SHOW {len(rows)}", has_rows=True)
        if name in {"dalenius.remaining", "dalenius.budget"}:
            value = self._budget_text(name.split(".")[1])
        elif name in self.settings:
            value = self.settings[name]
        else:
            raise ConfigurationError(
                f"unrecognized configuration parameter {found.group(1)!r}.",
                fix="SHOW ALL lists the settings; the gateway's own are dalenius.*.",
            )
        return Outcome([codec.Field(name, codec.TEXT)], [(value,)], "SHOW", has_rows=True)

    def _budget_text(self, part: str) -> str:
        budget = self.gateway.caller_budget(self.caller, self.dataset)
        found = budget.get("remaining" if part == "remaining" else "budget") or {}
        return (
            ", ".join(
                f"{'ε' if k == 'epsilon' else 'δ' if k == 'delta' else 'ρ'} = {v:g}"
                for k, v in found.items()
                if k in ("epsilon", "delta", "rho") and v is not None
            )
            or "none"
        )

    def catalog(self, sql: str) -> Outcome:
        """A catalog read, from the shadow catalog."""
        answer = self.shadow.answer(sql, self.caller.name, self.settings)
        fields = [
            codec.Field(name, _DUCK_TYPES.get(kind.upper(), codec.TEXT))
            for name, kind in zip(answer.columns, answer.types, strict=True)
        ]
        return Outcome(fields, list(answer.rows), f"SELECT {len(answer.rows)}", has_rows=True)

    def explain(self, sql: str, run: Callable[[Callable[[], Any]], Any]) -> Outcome:
        """``EXPLAIN <query>``: the gateway's explain as lines of text; free."""
        inner = _EXPLAIN.sub("", sql, count=1)
        epsilon, delta, confidence, targets = self.loss_arguments()
        doc = run(
            lambda: self.gateway.explain(
                self.caller, self.dataset, inner, epsilon, delta, confidence, **targets
            )
        )
        lines = explain_lines(doc)
        return Outcome(
            [codec.Field("QUERY PLAN", codec.TEXT)],
            [(line,) for line in lines],
            "EXPLAIN",
            has_rows=True,
        )

    def describe_private(self, sql: str) -> list[codec.Field]:
        """The columns a private query's answer will have, read from its plan (free)."""
        epsilon, delta, confidence, targets = self.loss_arguments()
        outputs = self.gateway.outputs(
            self.caller, self.dataset, sql, epsilon, delta, confidence, **targets
        )
        return self.fields_of(outputs)

    def fields_of(self, outputs: Sequence[tuple[str, str, str | None]]) -> list[codec.Field]:
        """The RowDescription columns of outputs ``(name, kind, key type)``: a key has its
        catalog type; each released number is followed by its interval's ends, unless
        switched off.
        """
        fields = []
        for given, kind, key_type in outputs:
            name = pg_name(given)
            if kind == "key":
                fields.append(codec.Field(name, TYPE_OIDS.get(key_type or "str", codec.TEXT)))
                continue
            number = codec.INT8 if kind == "count" else codec.FLOAT8
            fields.append(codec.Field(name, number))
            if self.intervals() and kind != "quantile":
                fields.append(codec.Field(f"{name}_low", number))
                fields.append(codec.Field(f"{name}_high", number))
        return fields

    def column_types(self) -> dict[str, str]:
        """Each column name of the dataset's tables and its catalog type (public metadata)."""
        return dict(self.shadow.column_types)

    def private(self, sql: str, run: Callable[[Callable[[], Any]], Any]) -> Outcome:
        """A private query through :meth:`Gateway.query`: charged, recorded, audited."""
        epsilon, delta, confidence, targets = self.loss_arguments()
        doc = run(
            lambda: self.gateway.query(
                self.caller, self.dataset, sql, epsilon, delta, confidence, None, **targets
            )
        )
        columns = list(zip(doc["columns"], doc["kinds"], strict=True))
        outputs = [
            (name, kind, _released_type([row[i]["value"] for row in doc["rows"]]))
            for i, (name, kind) in enumerate(columns)
        ]
        fields = self.fields_of(outputs)
        rows: list[Sequence[Any]] = []
        for row in doc["rows"]:
            out: list[Any] = []
            for (_, kind), cell in zip(columns, row, strict=True):
                out.append(_number(cell["value"], kind))
                if kind not in ("key", "quantile") and self.intervals():
                    out.append(_number(cell["low"], kind))
                    out.append(_number(cell["high"], kind))
            rows.append(out)
        return Outcome(fields, rows, f"SELECT {len(rows)}", [spending_notice(doc)], has_rows=True)


_SESSION_WORDS = {
    "set", "reset", "show", "begin", "start", "commit", "end", "rollback", "abort", "discard",
    "deallocate", "listen", "unlisten", "savepoint", "release",
}  # fmt: skip


_CALL = re.compile(r"^([A-Za-z_][A-Za-z_0-9]*)\s*\(.*\)$", re.DOTALL)


def pg_name(name: str) -> str:
    """An output's name as PostgreSQL gives an unnamed one: ``COUNT(*)`` is ``count``.

    Example:
        >>> pg_name("COUNT(*)"), pg_name("AVG(age)"), pg_name("n")
        ('count', 'avg', 'n')
    """
    found = _CALL.match(name)
    return found.group(1).lower() if found else name


def _released_type(values: Sequence[Any]) -> str:
    """The catalog type of a released key column, read off its released values."""
    present = [v for v in values if v is not None]
    if not present:
        return "str"
    if all(isinstance(v, bool) for v in present):
        return "bool"
    if any(isinstance(v, bool) for v in present):
        return "str"
    if all(isinstance(v, int) for v in present):
        return "int"
    if all(isinstance(v, int | float) for v in present):
        return "float"
    if all(isinstance(v, datetime.date) for v in present):
        return "date"
    return "str"


def _number(value: Any, kind: str) -> Any:
    """A released number as its declared column type sends it (a count is a whole number)."""
    if kind == "count" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def spending_notice(doc: dict[str, Any]) -> str:
    """The NOTICE sent with every private answer: the loss spent, the budget left and the
    answer's notes (hints from the catalog, bounds chosen privately for it).
    """

    def loss(d: dict[str, Any] | None) -> str:
        if not d:
            return "none"
        parts = [
            f"{'ε' if k == 'epsilon' else 'δ' if k == 'delta' else 'ρ'} = {v:g}"
            for k, v in d.items()
            if k in ("epsilon", "delta", "rho") and v is not None
        ]
        return ", ".join(parts) or "0"

    if doc.get("cached"):
        head = "answered from the ledger's record of the same query: nothing new spent"
    else:
        head = f"spent {loss(doc.get('loss'))}"
    confidence = doc.get("confidence")
    bars = f"; intervals at {round(confidence * 100)}% confidence" if confidence else ""
    extra = "".join(f" {note}" for note in doc.get("notes", []))
    return f"dalenius: {head}; remaining {loss(doc.get('remaining'))}{bars}.{extra}"


def explain_lines(doc: dict[str, Any]) -> list[str]:
    """The explain document as the lines psql shows under ``QUERY PLAN``."""
    lines = [f"Private query on {doc.get('table', '?')} ({doc.get('privacy_unit', '')})"]
    loss = doc.get("loss") or {}
    spend = ", ".join(
        f"{'ε' if k == 'epsilon' else 'δ' if k == 'delta' else 'ρ'} = {v:g}"
        for k, v in loss.items()
        if k in ("epsilon", "delta", "rho") and v is not None
    )
    lines.append(f"  Loss if run: {spend or 'none'} (explain itself is free)")
    confidence = doc.get("confidence")
    for m in doc.get("measurements", []):
        error = m.get("error")
        bar = f" ±{error:g}" if isinstance(error, int | float) else ""
        lines.append(
            f"  {m.get('name')}: {m.get('aggregate')} — {m.get('mechanism')}, sensitivity "
            f"{m.get('sensitivity'):g}, ε = {m.get('epsilon', 0):g}{bar}"
            + (f" at {round(confidence * 100)}%" if confidence and bar else "")
        )
    for out in doc.get("outputs", []):
        lines.append(f"  output {out.get('name')}: {out.get('computed_as')}")
    for group in doc.get("groups", []):
        source = "public keys" if group.get("public") else "selected privately"
        lines.append(f"  group by {group.get('column')}: {source}")
    for note in doc.get("notes", []):
        lines.append(f"  note: {note}")
    return lines


def _first_word(sql: str) -> str:
    found = _WORD.match(_strip_comments(sql))
    return found.group(1).lower() if found else ""


def _strip_comments(sql: str) -> str:
    text = sql.lstrip()
    while text.startswith(("--", "/*")):
        if text.startswith("--"):
            end = text.find("\n")
            text = "" if end < 0 else text[end + 1 :].lstrip()
        else:
            end = text.find("*/")
            text = "" if end < 0 else text[end + 2 :].lstrip()
    return text


def _unquote(value: str) -> str:
    text = value.strip().rstrip(";").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1].replace(text[0] * 2, text[0])
    return text


def _startup_options(options: str) -> dict[str, str]:
    """``-c name=value`` pairs of the startup packet's ``options`` (PGOPTIONS)."""
    out: dict[str, str] = {}
    for found in re.finditer(r"(?:-c\s*|--)([\w.]+)=(\S+)", options):
        out[found.group(1)] = found.group(2)
    return out
