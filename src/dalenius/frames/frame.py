"""Private frames: a lazy, typed DataFrame API that writes the SQL the binder reads.

``session.table("adult")`` is a :class:`PrivateFrame`: a description of rows, never the rows.
``filter``, ``with_columns``, ``select`` and ``join`` describe which rows and columns; ``group_by(…)
.agg(…)`` (or ``.agg(…)``) describes what to release, as an :class:`AggregateFrame`, whose
``explain`` is free and whose ``collect`` (``to_pandas``, ``to_polars``, ``to_arrow``) releases
through the session's one spending path.

There is no second planner: an aggregate frame *is* an SQL query (:meth:`AggregateFrame.to_sql`),
passed to ``Session.query``/``Session.explain`` as text. The refusals, sensitivities, mechanisms,
plan cache and ledger entry are therefore the SQL path's own — a question asked as a frame and
again as the same SQL is one ledger entry, answered free the second time. What the frame adds is
its own check at each method call, before any SQL: unknown columns (with the closest name), type
mismatches and misused aggregations are refused naming the call (``.agg(mean("incme"))``); a
refusal the binder still makes is raised again naming the method its clause came from, with the
binder's reason and fix. Derived columns are inlined where they are used, so the SQL is one
``SELECT`` the binder plans as it would the hand-written query.

The frame talks to the session through :class:`Asker` (a Protocol), so this package needs only the
catalog and the plan's function registry and sits below the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

from dalenius.core.catalog import Catalog, Table
from dalenius.core.errors import ConfigurationError, QueryError
from dalenius.core.loss import as_fraction
from dalenius.frames.agg import Agg
from dalenius.frames.expr import (
    Alias,
    Col,
    Expr,
    Ref,
    Scope,
    did_you_mean,
    operand,
    quote,
    refuse,
    show,
)

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl
    import pyarrow as pa

    from dalenius.engine.result import Result
    from dalenius.plan.explain import Explanation

T = TypeVar("T")

JOIN_HOWS = ("inner", "left")
"""Joins the binder answers: private ⋈ public on one equality, private ⋈ private on the unit."""


class Asker(Protocol):
    """What a frame needs of a session: the catalog, and the SQL path's explain and query."""

    @property
    def catalog(self) -> Catalog:
        """The catalog the frame's columns and types come from."""
        ...

    def explain(
        self,
        sql: str,
        epsilon: Any = None,
        *,
        delta: Any = None,
        confidence: float | None = None,
        target_error: Any = None,
        target_relative: Any = None,
        expected: Any = None,
    ) -> Explanation:
        """The plan and its cost, reading no data."""
        ...

    def query(
        self,
        sql: str,
        epsilon: Any = None,
        *,
        delta: Any = None,
        confidence: float | None = None,
        idempotency_key: str | None = None,
        target_error: Any = None,
        target_relative: Any = None,
        expected: Any = None,
    ) -> Result:
        """The private answer, through the one spending path."""
        ...


@dataclass(frozen=True)
class _Join:
    table: Table
    how: str
    left: Ref
    right: Ref
    call: str


@dataclass(frozen=True)
class _Rows:
    """Everything a row frame describes: the tables, the visible columns and the filters."""

    table: Table
    joins: tuple[_Join, ...]
    columns: tuple[tuple[str, Expr], ...]
    filters: tuple[tuple[Expr, str], ...]
    calls: tuple[str, ...]

    @property
    def qualify(self) -> bool:
        """Columns are written ``table.column`` once another table is joined."""
        return bool(self.joins)

    def scope(self) -> Scope:
        """The visible columns, named for messages by the tables they come from."""
        names = [self.table.name, *(j.table.name for j in self.joins)]
        where = " ⋈ ".join(repr(n) for n in names)
        described = f"table {where}" if len(names) == 1 else f"tables {where}"
        return Scope(self.columns, described, (self.from_sql(), self.qualify))

    def from_sql(self) -> str:
        """``FROM t [JOIN u ON t.k = u.k …] [WHERE …]``."""
        text = f"FROM {quote(self.table.name)}"
        for j in self.joins:
            kind = "LEFT JOIN" if j.how == "left" else "JOIN"
            text += f" {kind} {quote(j.table.name)} ON {j.left.sql(True)} = {j.right.sql(True)}"
        if self.filters:
            conditions = [operand(f, self.qualify, 3) for f, _ in self.filters]
            text += " WHERE " + " AND ".join(conditions)
        return text


def _base_columns(table: Table) -> tuple[tuple[str, Expr], ...]:
    return tuple((c.name, Ref(table.name, c.name, c.type)) for c in table.columns)


def _call(method: str, args: Sequence[Any], named: Mapping[str, Any] | None = None) -> str:
    parts = [show(a) for a in args] + [f"{k}={show(v)}" for k, v in (named or {}).items()]
    return f".{method}({', '.join(parts)})"


def _named(args: Sequence[Any], named: Mapping[str, Any], call: str) -> list[tuple[str, Expr]]:
    """Positional expressions (named by alias or column) and keyword ones, as (name, expr)."""
    out: list[tuple[str, Expr]] = []
    for item in args:
        expr = Col(item) if isinstance(item, str) else item
        if not isinstance(expr, Expr):
            refuse(call, f"{item!r} is not a column name or an expression.", fix='col("age")')
        name = expr.output_name()
        if name is None:
            refuse(call, f"{expr!r} needs a name.", fix=f"{expr!r}.alias('x'), or name=...")
        out.append((name, expr))
    for name, item in named.items():
        expr = Col(item) if isinstance(item, str) else item
        if not isinstance(expr, Expr):
            refuse(call, f"{name}={item!r} is not a column name or an expression.")
        out.append((name, expr))
    seen: set[str] = set()
    for name, _ in out:
        if name in seen:
            refuse(call, f"the column name {name!r} is given twice.", fix="use .alias(...).")
        seen.add(name)
    return out


class PrivateFrame:
    """A lazy description of a private table's rows; releases only aggregates.

    Built by ``session.table(name)``; every method returns a new frame (nothing is read until an
    aggregate frame's ``collect``). The column names and types are known from the catalog:
    :attr:`schema`.
    """

    def __init__(self, session: Asker, rows: _Rows) -> None:
        self._session = session
        self._rows = rows

    @classmethod
    def scan(cls, session: Asker, name: str) -> PrivateFrame:
        """The frame of the catalog's table ``name`` (refused, with the closest name, if none)."""
        call = f"table({show(name)})"
        table = session.catalog.table(name) if isinstance(name, str) else None
        if table is None:
            names = session.catalog.table_names
            refuse(
                call,
                f"no table {name!r} in the catalog{did_you_mean(str(name), names)}",
                fix=f"use one of: {', '.join(names)}.",
            )
        rows = _Rows(table, (), _base_columns(table), (), (call,))
        return cls(session, rows)

    # -- what the frame holds ------------------------------------------------------------------

    @property
    def columns(self) -> list[str]:
        """The visible column names, in order."""
        return [name for name, _ in self._rows.columns]

    @property
    def schema(self) -> dict[str, str]:
        """Column name → catalog type (``int``, ``float``, ``str``, ``bool``, ``date``)."""
        return {name: expr.dtype() for name, expr in self._rows.columns}

    def __repr__(self) -> str:
        return f"session.{''.join(self._rows.calls)}"

    # -- rows ------------------------------------------------------------------------------------

    def filter(self, *predicates: Expr) -> PrivateFrame:
        """Keep the rows where every predicate holds (SQL ``WHERE``)."""
        call = _call("filter", predicates)
        if not predicates:
            refuse(call, "no condition is given.", fix='.filter(col("age") >= 40)')
        scope = self._rows.scope()
        added = []
        for predicate in predicates:
            if not isinstance(predicate, Expr):
                refuse(call, f"{predicate!r} is not a condition.", fix='col("age") >= 40')
            resolved = predicate.resolve(scope, call)
            if resolved.dtype() not in ("bool", "null"):
                refuse(
                    call,
                    f"{predicate!r} is a {resolved.dtype()}, not a condition.",
                    fix="compare it: col(...) > 0, .is_in([...]), .is_null().",
                )
            added.append((resolved, call))
        rows = replace(
            self._rows,
            filters=(*self._rows.filters, *added),
            calls=(*self._rows.calls, call),
        )
        return PrivateFrame(self._session, rows)

    def with_columns(self, *exprs: Expr | str, **named: Expr) -> PrivateFrame:
        """Add (or replace) derived columns; they are computed on each row, inlined where used."""
        call = _call("with_columns", exprs, named)
        scope = self._rows.scope()
        columns = dict(self._rows.columns)
        for name, expr in _named(exprs, named, call):
            columns[name] = _strip(expr.resolve(scope, call))
        rows = replace(self._rows, columns=tuple(columns.items()), calls=(*self._rows.calls, call))
        return PrivateFrame(self._session, rows)

    def select(self, *exprs: Expr | str, **named: Expr) -> PrivateFrame:
        """Keep only these columns (names or named expressions), in this order."""
        call = _call("select", exprs, named)
        scope = self._rows.scope()
        pairs = _named(exprs, named, call)
        if not pairs:
            refuse(call, "no column is selected.", fix='.select("age")')
        columns = tuple((name, _strip(expr.resolve(scope, call))) for name, expr in pairs)
        rows = replace(self._rows, columns=columns, calls=(*self._rows.calls, call))
        return PrivateFrame(self._session, rows)

    def join(
        self,
        other: PrivateFrame,
        on: str | None = None,
        *,
        left_on: str | None = None,
        right_on: str | None = None,
        how: str = "inner",
    ) -> PrivateFrame:
        """Join another table on one equality: a public table on any key, or a private table on
        the privacy unit (the binder refuses others, naming this call).

        ``other`` must be a table as ``session.table(...)`` returns it; its columns are added,
        a name the frame already has getting the suffix ``_right`` (the key of ``on`` once).
        """
        named = {"on": on, "left_on": left_on, "right_on": right_on, "how": how}
        call = _call("join", [other], {k: v for k, v in named.items() if v is not None})
        right = self._right_table(other, call)
        if how not in JOIN_HOWS:
            refuse(
                call, f"how={how!r} is not a join Dalenius answers.", fix="how='inner' or 'left'"
            )
        if on is not None and (left_on is not None or right_on is not None):
            refuse(call, "give on=, or left_on= and right_on=, not both.")
        left_name, right_name = (on, on) if on is not None else (left_on, right_on)
        if left_name is None or right_name is None:
            refuse(call, "the join has no key.", fix="on='education', or left_on=... right_on=...")
        left = self._rows.scope().lookup(left_name, call)
        if not isinstance(left, Ref):
            refuse(call, f"the key {left_name!r} is a derived column.", fix="join on a column.")
        right_scope = Scope(_base_columns(right), f"table {right.name!r}")
        right_ref = right_scope.lookup(right_name, call)
        assert isinstance(right_ref, Ref)
        if left.dtype() != right_ref.dtype():
            refuse(
                call,
                f"the keys have different types: {left.dtype()} and {right_ref.dtype()}.",
                why="converted keys can collide, multiplying one person's rows.",
                fix="join on columns of the same type.",
            )
        columns = dict(self._rows.columns)
        for name, expr in right_scope.columns:
            if on is not None and name == on:
                continue
            columns[f"{name}_right" if name in columns else name] = expr
        join = _Join(right, how, left, right_ref, call)
        rows = replace(
            self._rows,
            joins=(*self._rows.joins, join),
            columns=tuple(columns.items()),
            calls=(*self._rows.calls, call),
        )
        return PrivateFrame(self._session, rows)

    def _right_table(self, other: Any, call: str) -> Table:
        if not isinstance(other, PrivateFrame):
            refuse(call, "a frame joins another frame.", fix='session.table("edu_levels")')
        rows = other._rows
        if len(rows.calls) > 1:  # anything after session.table(...)
            refuse(
                call,
                "the frame joined must be a table as session.table() returns it.",
                fix="join first, then filter and derive columns on the joined frame.",
            )
        if rows.table.name == self._rows.table.name or any(
            j.table.name == rows.table.name for j in self._rows.joins
        ):
            refuse(call, f"the table {rows.table.name!r} is already in the frame.")
        return rows.table

    # -- aggregates ------------------------------------------------------------------------------

    def group_by(self, *keys: Expr | str, **named: Expr) -> GroupBy:
        """Group by columns or named expressions; ``.agg(...)`` then says what to release.

        The groups released are the public keys the catalog declares (or derives for an
        expression over declared domains); keys without a public list are selected privately,
        which needs ``delta`` at ``collect``.
        """
        call = _call("group_by", keys, named)
        scope = self._rows.scope()
        pairs = _named(keys, named, call)
        if not pairs:
            refuse(call, "no key is given.", fix='.group_by("sex"), or .agg(...) for no groups')
        resolved = tuple((name, _strip(expr.resolve(scope, call))) for name, expr in pairs)
        return GroupBy(self._session, self._rows, resolved, call)

    def agg(self, *aggs: Agg, **named: Agg) -> AggregateFrame:
        """Aggregate all rows into one released row (no groups)."""
        return GroupBy(self._session, self._rows, (), "").agg(*aggs, **named)

    def collect(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: a private frame releases aggregates, never its rows."""
        refuse(
            ".collect()",
            "a private frame releases aggregates, not rows.",
            why="rows of a private table would reveal the people in it.",
            fix=".group_by(...).agg(count(), mean('age')) or .agg(count()), then .collect(...).",
        )


def _strip(expr: Expr) -> Expr:
    """The expression without its alias (the frame keeps the name beside it)."""
    return expr.expr if isinstance(expr, Alias) else expr


class GroupBy:
    """A frame grouped by keys, waiting for ``.agg(...)``."""

    def __init__(
        self, session: Asker, rows: _Rows, keys: tuple[tuple[str, Expr], ...], call: str
    ) -> None:
        self._session = session
        self._rows = rows
        self._keys = keys
        self._call = call

    def agg(self, *aggs: Agg, **named: Agg) -> AggregateFrame:
        """What to release for each group: :func:`count`, :func:`mean` and the others, each a
        column (with ``_low``/``_high`` interval columns for counts, sums and moments).
        """
        call = _call("agg", aggs, named)
        items = [*aggs, *(a.alias(n) if isinstance(a, Agg) else a for n, a in named.items())]
        if not items:
            refuse(call, "no aggregation is given.", fix=".agg(count())")
        scope = self._rows.scope()
        resolved = []
        names = {name for name, _ in self._keys}
        for item in items:
            if not isinstance(item, Agg):
                refuse(
                    call,
                    f"{item!r} is not an aggregation.",
                    fix="use count(), mean('age'), col('age').sum() and the like.",
                )
            agg = item.resolve(scope, call)
            name = agg.output()
            if name in names:
                refuse(
                    call,
                    f"two output columns are named {name!r}.",
                    fix=f"name one with .alias(...): {item!r}.alias('other').",
                )
            names.add(name)
            resolved.append(agg)
        calls = (*self._rows.calls, *([self._call] if self._call else []), call)
        return AggregateFrame(self._session, self._rows, self._keys, tuple(resolved), calls)


@dataclass(frozen=True)
class _Order:
    by: tuple[tuple[str, bool], ...] = ()
    limit: int | None = None
    calls: tuple[str, ...] = ()


_CLAUSE_METHOD = {
    "SELECT": ".agg",
    "GROUP BY": ".group_by",
    "WHERE": ".filter",
    "FROM": ".join",
    "JOIN": ".join",
    "ORDER BY": ".sort",
    "LIMIT": ".limit",
}
"""Which method wrote each SQL clause: a binder refusal names that call."""


class AggregateFrame:
    """What to release: the groups and aggregates of a frame, as one SQL query.

    The output columns and their types are known before any data is read (:attr:`schema`).
    :meth:`explain` is free; :meth:`collect` spends, through the session's one path.
    """

    def __init__(
        self,
        session: Asker,
        rows: _Rows,
        keys: tuple[tuple[str, Expr], ...],
        aggs: tuple[Agg, ...],
        calls: tuple[str, ...],
        order: _Order | None = None,
    ) -> None:
        self._session = session
        self._rows = rows
        self._keys = keys
        self._aggs = aggs
        self._calls = calls
        self._order = order or _Order()

    @property
    def columns(self) -> list[str]:
        """The output columns: keys, then each aggregate (followed by its interval columns)."""
        return list(self.schema)

    @property
    def schema(self) -> dict[str, str]:
        """Output column → type, as ``to_pandas`` will hold them (before any data is read)."""
        out = {name: expr.dtype() for name, expr in self._keys}
        for agg in self._aggs:
            name, kind = agg.output(), agg.dtype()
            out[name] = kind
            if agg.has_interval():
                out[f"{name}_low"] = kind
                out[f"{name}_high"] = kind
        return out

    def to_sql(self) -> str:
        """The SQL this frame is: what ``Session.query`` plans, caches and records."""
        q = self._rows.qualify
        items = [f"{e.sql(q)} AS {quote(n)}" for n, e in self._keys]
        items += [a.select(q) for a in self._aggs]
        text = f"SELECT {', '.join(items)} {self._rows.from_sql()}"
        if self._keys:
            text += " GROUP BY " + ", ".join(str(i + 1) for i in range(len(self._keys)))
        if self._order.by:
            order = [f"{quote(n)}{' DESC' if d else ''}" for n, d in self._order.by]
            text += " ORDER BY " + ", ".join(order)
        if self._order.limit is not None:
            text += f" LIMIT {self._order.limit}"
        return text

    def __repr__(self) -> str:
        return f"session.{''.join(self._calls)}"

    # -- post-processing of the noisy answers (free) -----------------------------------------

    def sort(
        self, by: str | Sequence[str], *, descending: bool | Sequence[bool] = False
    ) -> AggregateFrame:
        """Order the released rows by output columns (applied to the noisy answers: free)."""
        names = [by] if isinstance(by, str) else list(by)
        call = _call("sort", [by], {"descending": descending} if descending else {})
        flags = [descending] * len(names) if isinstance(descending, bool) else list(descending)
        if not names or len(flags) != len(names):
            refuse(call, "give one descending flag per column.", fix="descending=True")
        outputs = [n for n, _ in self._keys] + [a.output() for a in self._aggs]
        for name in names:
            if name not in outputs:
                refuse(
                    call,
                    f"no output column {name!r}{did_you_mean(name, outputs)}",
                    fix=f"sort by one of: {', '.join(outputs)}.",
                )
        order = replace(
            self._order,
            by=tuple(zip(names, flags, strict=True)),
            calls=(*self._order.calls, call),
        )
        return self._with(order, call)

    def limit(self, n: int) -> AggregateFrame:
        """Keep the first ``n`` released rows (after :meth:`sort`; free)."""
        call = f".limit({n!r})"
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            refuse(call, f"the limit must be a whole number ≥ 0, got {n!r}.", fix=".limit(10)")
        return self._with(replace(self._order, limit=n), call)

    head = limit

    def _with(self, order: _Order, call: str) -> AggregateFrame:
        calls = (*self._calls, call)
        return AggregateFrame(self._session, self._rows, self._keys, self._aggs, calls, order)

    # -- release -------------------------------------------------------------------------------

    def explain(
        self,
        epsilon: Any = None,
        *,
        delta: Any = None,
        confidence: float | None = None,
        target_error: Any = None,
        target_relative: Any = None,
        expected: Any = None,
    ) -> Explanation:
        """The plan, sensitivities, ε split and expected errors: reads no data, spends nothing.

        Takes :meth:`collect`'s loss arguments.
        """
        return self._send(
            self._session.explain,
            ".explain",
            epsilon,
            target_error,
            target_relative,
            delta=delta,
            confidence=confidence,
            expected=expected,
        )

    def collect(
        self,
        epsilon: Any = None,
        *,
        delta: Any = None,
        confidence: float | None = None,
        target_error: Any = None,
        target_relative: Any = None,
        expected: Any = None,
        idempotency_key: str | None = None,
    ) -> Result:
        """Release the aggregates: spend ``epsilon`` (and ``delta``) — the loss of this call —
        or meet error targets (``target_error`` for every COUNT and SUM, or per aggregation with
        :meth:`Agg.target_error`; ``target_relative`` with ``expected``).

        Returns the SQL path's :class:`~dalenius.engine.result.Result`: values with their
        intervals, the loss spent and the budget left. The same question asked again (as a frame
        or as its SQL) is answered from the ledger at no cost.

        Raises:
            QueryError: the frame cannot be answered (naming the method call; nothing spent).
            BudgetExceededError: the loss exceeds what remains (nothing spent).
        """
        return self._send(
            self._session.query,
            ".collect",
            epsilon,
            target_error,
            target_relative,
            delta=delta,
            confidence=confidence,
            expected=expected,
            idempotency_key=idempotency_key,
        )

    def _send(
        self,
        ask: Callable[..., T],
        method: str,
        epsilon: Any,
        target_error: Any,
        target_relative: Any,
        **rest: Any,
    ) -> T:
        """Ask the session (explain or query) with this frame's SQL; its refusal names the call."""
        targets = self._targets(epsilon, target_error, target_relative, method)
        try:
            return ask(self.to_sql(), epsilon, target_relative=target_relative, **rest, **targets)
        except QueryError as exc:
            raise self._at_call(exc) from None

    def to_pandas(self, epsilon: Any = None, **loss: Any) -> pd.DataFrame:
        """:meth:`collect` (same arguments), as a pandas DataFrame with interval columns."""
        return self.collect(epsilon, **loss).to_pandas()

    def to_polars(self, epsilon: Any = None, **loss: Any) -> pl.DataFrame:
        """:meth:`collect` (same arguments), as a Polars DataFrame with interval columns."""
        return self.collect(epsilon, **loss).to_polars()

    def to_arrow(self, epsilon: Any = None, **loss: Any) -> pa.Table:
        """:meth:`collect` (same arguments), as an Arrow table with interval columns."""
        return self.collect(epsilon, **loss).to_arrow()

    def _targets(
        self, epsilon: Any, target_error: Any, target_relative: Any, method: str
    ) -> dict[str, Any]:
        """The call's target merged with the aggregations' own (``Agg.target_error``)."""
        own = {a.output(): a.target for a in self._aggs if a.target is not None}
        if not own:
            if epsilon is None and target_error is None and target_relative is None:
                raise ConfigurationError(
                    f"{method}() has no privacy loss to spend.",
                    fix=f"pass epsilon ({method}(epsilon=0.1)), or a target: "
                    f"{method}(target_error=50) or count().target_error(50) in .agg(...).",
                )
            return {"target_error": target_error}
        if epsilon is not None or target_relative is not None:
            raise ConfigurationError(
                f"{method}(): the aggregations have error targets and the call gives "
                f"{'epsilon' if epsilon is not None else 'target_relative'} too.",
                why="with targets, Dalenius computes the smallest ε that meets them.",
                fix="drop .target_error(...) from the aggregations, or the call's loss.",
            )
        if target_error is None:
            return {"target_error": own}
        if not isinstance(target_error, Mapping):
            raise ConfigurationError(
                f"{method}(target_error={target_error!r}) and per-aggregation targets are both "
                "given.",
                fix="give per-column targets as a mapping, or only on the aggregations.",
            )
        merged: dict[str, Fraction] = dict(own)
        for name, value in target_error.items():
            number = as_fraction(value, f"target_error[{name}]")
            if name in merged and merged[name] != number:
                raise ConfigurationError(
                    f"two targets for {name!r}: {float(merged[name]):g} and {float(number):g}.",
                    fix="give one target per column.",
                )
            merged[str(name)] = number
        return {"target_error": merged}

    def _at_call(self, exc: QueryError) -> QueryError:
        """The binder's refusal, naming the method whose clause it is (keeping why and fix)."""
        method = _CLAUSE_METHOD.get(exc.clause or "", "")
        calls = [c for c in self._calls if method and c.startswith(method + "(")]
        if exc.span is not None and len(calls) > 1:
            calls = [c for c in calls if exc.span.text and exc.span.text in c] or calls
        clause = " and ".join(calls) if calls else ".collect()"
        out = type(exc).__new__(type(exc))
        QueryError.__init__(out, exc.bare, clause=clause, why=exc.why, fix=exc.fix)
        out.sql = self.to_sql()
        return out
