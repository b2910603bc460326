"""A query with subqueries used as values, answered in stages: each subquery is released first,
then the outer query with the released values as constants — one ledger entry for the whole.

``SELECT COUNT(*) FROM customer WHERE balance > (SELECT AVG(balance) FROM customer)`` compares
every row with an average over private rows. That average is an aggregate, so it is released
with its own noise; released, it is public, and the outer query uses it as it would use any
constant the analyst typed. The privacy argument is sequential composition: the subqueries' and
the outer query's releases are each ε-DP (the outer one for *every* value of its constants, since
its sensitivities do not depend on them), and running the outer query with a constant chosen
from the earlier releases is adaptive composition, whose loss is the sum
(Dwork & Roth, Theorem 3.16 and §3.5.1). docs/sql.md gives the argument in full.

How it runs on the one spending path (:meth:`dalenius.engine.session.Session.spend`):

* before any data is read, every subquery and the outer query (its subqueries replaced by
  stand-in constants, :data:`~dalenius.sql.scalar_subqueries.SENTINEL`) are planned, so a refusal of either is
  decided, located and free; the loss charged is their sum, and ε is split over them in
  proportion to their measurements (each measurement gets the share it would in one query);
* behind the data gate, the measure step releases each subquery, plans the outer query again
  with the released values written in, checks that its loss, measurements and outputs are the
  stand-in plan's, then releases it; the ledger's record holds every noisy answer, so a
  repeated request is answered from it, free;
* publishing is post-processing: the outer answer, with a note giving each subquery's released
  value and interval.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from dalenius.accounting.compose import compose
from dalenius.core.catalog import Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import (
    InternalError,
    PrivacyRefusal,
    PublicAnswer,
    PublicQuery,
    QueryError,
)
from dalenius.core.loss import ZCDP, ApproxDP, Loss
from dalenius.engine.noise import Noisy
from dalenius.engine.postprocess import Answer, output_kinds
from dalenius.engine.public import public_rows
from dalenius.engine.query_release import QueryRelease
from dalenius.plan.explain import Explanation, MeasurementCost, explain
from dalenius.plan.nodes import DPQuery
from dalenius.plan.protocol import Fetch, Measure, Measured
from dalenius.sql import validate
from dalenius.sql.correlated import MAX_CORRELATED_KEYS, Correlation, correlation
from dalenius.sql.scalar_subqueries import (
    ALLOWED_CLAUSES,
    Subquery,
    find,
    outer_text,
    placeholder,
)
from dalenius.sql.validate import span_at

if TYPE_CHECKING:
    from dalenius.engine.session import Prepared, Session

ANSWER_FORMAT = "staged-1"
"""The format of a staged query's ledger record (part of its request key)."""

VALUE_CONFIDENCE = 0.95
"""The confidence a subquery's released value is computed at: its point value does not depend on
it (only its interval, which the published note shows at the analyst's confidence)."""


@dataclass(frozen=True)
class Stage:
    """A subquery released before the outer query: where it stands, and its prepared release."""

    subquery: Subquery
    release: QueryRelease
    stand_in: str
    """The constant the outer query was planned with in its place (see ``SENTINEL``)."""
    correlation: Correlation | None = None
    """How the subquery refers to the outer query, if it does: it is then released per value of
    the outer column, and written in as a ``CASE`` over that column."""

    def stand_in_text(self) -> str:
        """What stands in the subquery's place to plan the outer query as it will run: the
        stand-in constant, or for a correlated subquery a branch per key with the stand-in.
        """
        if self.correlation is None:
            return self.stand_in
        branches = [(_literal(k), self.stand_in) for k in _keys(self.release.prepared)]
        return self.correlation.case(branches)

    def written(self, answer: Answer) -> str:
        """What the outer query holds in the subquery's place, from its released ``answer``."""
        if self.correlation is None:
            return constant(answer)
        # A NULL key matches no row (a CASE never matches NULL): it has no branch.
        return self.correlation.case(
            [(_literal(r[0]), _number(r[1])) for r in answer.rows if r[0] is not None]
        )


@dataclass(frozen=True)
class StagedNoisy:
    """What a staged query records: each subquery's noisy answer, the constants written from
    them, and the outer query's noisy answer.
    """

    stages: tuple[Noisy, ...]
    constants: tuple[str, ...]
    outer: Noisy

    def to_json(self) -> dict[str, Any]:
        """The ledger's record (with :data:`ANSWER_FORMAT`)."""
        return {
            "format": ANSWER_FORMAT,
            "stages": [n.to_json() for n in self.stages],
            "constants": list(self.constants),
            "outer": self.outer.to_json(),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> StagedNoisy:
        """Rebuild from :meth:`to_json`."""
        if doc.get("format") != ANSWER_FORMAT:
            raise InternalError("the ledger's record has an unknown format")
        return cls(
            stages=tuple(Noisy.from_json(n) for n in doc["stages"]),
            constants=tuple(str(c) for c in doc["constants"]),
            outer=Noisy.from_json(doc["outer"]),
        )


@dataclass(frozen=True)
class StagedRelease:
    """A query whose subqueries used as values are released first (see the module's docstring).

    Attributes:
        stages: the subqueries, each prepared with its share of ε.
        outer: the outer query planned with stand-in constants (its loss, measurements and outputs
            are those of the query with any constants written in).
        sql: the analyst's text.
        replan: the outer query prepared with the given constants written in (SQL literals).
    """

    stages: tuple[Stage, ...]
    outer: QueryRelease
    sql: str
    replan: Callable[[Sequence[str]], Prepared]
    kind: ClassVar[str] = "query"
    answer_format: ClassVar[str] = ANSWER_FORMAT

    @property
    def text(self) -> str:
        """The SQL as the analyst wrote it."""
        return self.sql

    @cached_property
    def loss(self) -> Loss:
        """The sum of the stages' and the outer query's losses (sequential composition)."""
        return compose([r.loss for r in self._releases], _definition(self._releases))

    @property
    def tables(self) -> tuple[Table, ...]:
        """Every table a stage or the outer query reads, each once."""
        seen: dict[str, Table] = {}
        for release in self._releases:
            for table in release.tables:
                seen.setdefault(table.name, table)
        return tuple(seen.values())

    @property
    def plan_class(self) -> str:
        """The outer query's class (staged queries are refused on constant-time datasets)."""
        return self.outer.plan_class

    def fingerprint(self) -> str:
        """The stages' and the outer plan's fingerprints, in order."""
        return "staged:" + ",".join(r.fingerprint() for r in self._releases)

    def privacy_map(self) -> Loss:
        """The sum of each release's privacy map, recomputed from its mechanisms."""
        return compose([r.privacy_map() for r in self._releases], _definition(self._releases))

    @property
    def _releases(self) -> tuple[QueryRelease, ...]:
        return (*(s.release for s in self.stages), self.outer)

    def prepare(self, dialect: Dialect, salt: int) -> Measure[StagedNoisy]:
        """Release the subqueries, write their values into the outer query, release it."""
        first = [s.release.prepare(dialect, salt) for s in self.stages]

        def measure(fetch: Fetch) -> Measured[StagedNoisy]:
            noisy = tuple(step(fetch).value for step in first)
            constants = tuple(
                s.written(s.release.publish(n, VALUE_CONFIDENCE))
                for s, n in zip(self.stages, noisy, strict=True)
            )
            outer = QueryRelease(self._outer_with(constants), self.sql)
            released = outer.prepare(dialect, salt)(fetch).value
            value = StagedNoisy(noisy, constants, released)
            return Measured(json.dumps(value.to_json(), sort_keys=True, default=str), value)

        return measure

    def check_written(self, constants: Sequence[str]) -> None:
        """Plan the outer query with ``constants`` written in, before any data is read: a
        refusal then is free, and the shape it must keep is checked (:meth:`_outer_with`).

        Raises:
            QueryError: the outer query cannot be planned with them (located in the analyst's
                text at the first subquery).
        """
        try:
            self._outer_with(constants)
        except QueryError as exc:
            first = self.stages[0].subquery
            raise QueryError(
                f"the query cannot be planned with its subqueries' values written in: {exc.bare}",
                clause=first.clause,
                sql=self.sql,
                span=span_at(self.sql, first.start, self.sql[first.start : first.end + 1]),
                why=exc.why,
                fix=exc.fix,
            ) from None

    def _outer_with(self, constants: Sequence[str]) -> Prepared:
        """The outer query with ``constants`` written in; the same loss, measurements and number
        of outputs as with the stand-ins, or an internal error (charged: the data has been read).
        """
        known = self._outers.get(tuple(constants))
        if known is not None:  # planned for the release, published now
            return known
        prepared = self.replan(constants)
        planned, stood_in = prepared.plan, self.outer.plan
        same = (
            planned.loss == stood_in.loss
            and [(m.name, m.sensitivity) for m in planned.measurements]
            == [(m.name, m.sensitivity) for m in stood_in.measurements]
            and len(planned.query.outputs) == len(stood_in.query.outputs)
        )
        if not same:
            raise InternalError("the outer query's plan changed with its released constants")
        self._outers.clear()
        self._outers[tuple(constants)] = prepared
        return prepared

    @cached_property
    def _outers(self) -> dict[tuple[str, ...], Prepared]:
        """The outer query last planned, by its constants: a release plans it and publishes
        its answer with the same constants (with a correlated subquery's CASE of a branch per
        key, planning it is a tenth of the query's time).
        """
        return {}

    @cached_property
    def columns(self) -> tuple[str, ...]:
        """The answer's column names: the outer query's, each stand-in written back as its
        subquery (an output ``COUNT(*) - (SELECT ...)`` is named as the analyst wrote it).
        """
        return tuple(self.named(o.name, full=True) for o in self.outer.plan.query.outputs)

    def named(self, text: str, *, full: bool = False) -> str:
        """``text`` with each stand-in constant written back as its subquery (``full``) or as
        ``(subquery n)``.
        """
        for n, stage in enumerate(self.stages, start=1):
            shown = f"({stage.subquery.text})" if full else f"(subquery {n})"
            text = text.replace(stage.stand_in, shown)
        return text

    def shape(self) -> DPQuery:
        """The outer plan with the answer's column names (a client describing the statement)."""
        plan = self.outer.plan
        outputs = tuple(
            replace(o, name=c) for o, c in zip(plan.query.outputs, self.columns, strict=True)
        )
        return replace(plan, query=replace(plan.query, outputs=outputs))

    def decode(self, record: str) -> StagedNoisy:
        """The noisy answers of a ledger record."""
        return StagedNoisy.from_json(json.loads(record))

    def publish(self, value: StagedNoisy, confidence: float) -> Answer:
        """The outer answer (post-processed with the constants it was released with), with a
        note per subquery: its released value, interval and share of the loss.
        """
        outer = QueryRelease(self._outer_with(value.constants), self.sql)
        answer = outer.publish(value.outer, confidence)
        notes = tuple(
            _note(stage, stage.release.publish(noisy, confidence), confidence)
            for stage, noisy in zip(self.stages, value.stages, strict=True)
        )
        return replace(answer, columns=self.columns, notes=(*notes, *answer.notes))


def constant(answer: Answer) -> str:
    """A subquery's released value as a SQL constant: its one cell (``NULL`` when no row is
    released, or the value is not a finite number).
    """
    if not answer.rows:
        return "NULL"
    return _number(answer.rows[0][0])


def _number(value: object) -> str:
    """A released value as a SQL constant (``NULL`` when missing or not a finite number)."""
    if value is None or isinstance(value, bool):
        return "NULL" if value is None else ("TRUE" if value else "FALSE")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float | Decimal):
        number = float(value)
        return repr(number) if math.isfinite(number) else "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    raise InternalError(f"a subquery's released value has an unexpected type {type(value)}")


def _literal(key: object) -> str:
    """A public key as a SQL literal (a ``CASE`` branch of a correlated subquery's values)."""
    if isinstance(key, str):
        return "'" + key.replace("'", "''") + "'"
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    raise InternalError(f"a correlated subquery's key has an unexpected type {type(key)}")


def _note(stage: Stage, answer: Answer, confidence: float) -> str:
    """What a published answer says about one subquery released first."""
    link = stage.correlation
    if link is not None:
        keyed = [r for r in answer.rows if r[0] is not None]
        numbers = [float(r[1]) for r in keyed if isinstance(r[1], int | float | Decimal)]
        spread = (
            f", from {_outward(min(numbers), up=False)} to {_outward(max(numbers), up=True)}"
            if numbers
            else ""
        )
        return (
            f"The subquery ({stage.subquery.text}) was released first, per value of "
            f"{link.column}: {len(keyed):,} values of the public table {link.table} (its "
            f"rows that pass the query's conditions on it), spending {stage.release.loss}"
            f"{spread}. The query used each as the value for its rows' {link.column}."
        )
    shown = constant(answer)
    low = answer.lows[0][0] if answer.rows and answer.lows else None
    high = answer.highs[0][0] if answer.rows and answer.highs else None
    interval = (
        f" ({confidence:.0%} interval [{_outward(low, up=False)}, {_outward(high, up=True)}])"
        if isinstance(low, int | float) and isinstance(high, int | float)
        else ""
    )
    return (
        f"The subquery ({stage.subquery.text}) was released first, spending "
        f"{stage.release.loss}: {shown}{interval}. The query used that value as a constant."
    )


def _outward(end: float, *, up: bool) -> str:
    """An interval's end to six significant digits, rounded away from the interval's inside (so
    the shown interval still holds the value).
    """
    if isinstance(end, int) or end == 0 or not math.isfinite(end):
        return repr(end)
    step = Decimal(1).scaleb(math.floor(math.log10(abs(end))) - 5)
    rounded = Decimal(repr(end)).quantize(step, rounding=ROUND_CEILING if up else ROUND_FLOOR)
    return format(rounded.normalize(), "f")


def _definition(releases: Sequence[QueryRelease]) -> str:
    """The definition the summed losses are stated in: zCDP, (ε, δ) or pure ε."""
    losses = [r.loss for r in releases]
    if any(isinstance(loss, ZCDP) for loss in losses):
        return "zcdp"
    if any(isinstance(loss, ApproxDP) for loss in losses):
        return "approx"
    return "pure"


def subqueries_of(sql: str) -> list[Subquery]:
    """The subqueries of ``sql`` used as values; a text with one SELECT has none (no tokenizing)."""
    if sql.upper().count("SELECT") < 2:
        return []
    return find(sql)


def build(
    session: Session,
    sql: str,
    subqueries: Sequence[Subquery],
    epsilon: Any,
    delta: Any,
    *,
    choose: bool = False,
    provisional: bool = False,
) -> StagedRelease | str:
    """Plan a query with subqueries used as values; reads no private data, spends nothing.

    A subquery over public tables alone is answered now, exactly and free (public tables belong
    to no privacy unit), and its value written in. If every subquery is public, the query text
    with their values is returned, to be answered as any query; otherwise the staged release,
    with ε split over the private subqueries and the outer query by their measurements.

    Long because its steps (plan the subqueries, then the outer query, split ε by what both
    measure, plan each again with its share) share the texts, the values and the counts.

    Raises:
        QueryError: a subquery cannot be released on its own (located in the analyst's text),
            gives more than one value, or the outer query reads public tables only.
        ConfigurationError: an error target was given, or ε is missing.
        PrivacyRefusal: the dataset answers in constant time.
    """
    _check_clauses(sql, subqueries)
    if session.catalog.constant_time:
        raise PrivacyRefusal(
            "a subquery used as a value is not answered on a constant-time dataset.",
            clause=subqueries[0].clause,
            why="the subquery is released first and the query after it: two runs of the engine, "
            "whose time no single deadline of the constant-time mode covers.",
            fix="release the subquery with its own query and write its value as a constant.",
        )
    try:
        values, probes, links = _probe(
            session, sql, subqueries, choose=choose, provisional=provisional
        )
    except QueryError:
        if _public_whole(session, sql):  # run as written, correlated subqueries and all
            return sql
        raise
    if not probes:
        return outer_text(sql, subqueries, [v or "NULL" for v in values])
    stand_ins = [
        v if v is not None else placeholder(n, output_kinds(probes[n].plan)[1 if n in links else 0])
        for n, v in enumerate(values)
    ]
    outer_sql = outer_text(sql, subqueries, stand_ins, pad=True)
    probe = _outer_probe(session, sql, outer_sql, subqueries, epsilon, delta, choose, provisional)
    _check_not_measured(sql, subqueries, stand_ins, probe.plan, set(probes))
    counts = {n: len(p.plan.measurements) for n, p in probes.items()}
    total = sum(counts.values()) + len(probe.plan.measurements)
    outer_share = Fraction(len(probe.plan.measurements), total)

    # A correlated subquery is written in as a CASE with a branch per key: its text grows
    # with the keys (read from public tables, counted before any private row is read).
    room = _room({n: probes[n] for n in links})

    def replan(constants: Sequence[str]) -> Prepared:
        written = iter(constants)
        filled = [v if v is not None else next(written) for v in values]
        with validate.written_in(*room):
            return session.prepare(
                outer_text(sql, subqueries, filled),
                epsilon,
                delta,
                choose=choose,
                provisional=provisional,
                _share=outer_share,
            )

    asked = probe.epsilon or Fraction(0)  # prepare refuses a query without ε
    stages = tuple(
        Stage(
            subqueries[n],
            QueryRelease(
                session.prepare(
                    links[n].stage_sql if n in links else subqueries[n].sql,
                    asked * Fraction(count, total),
                    None,
                    choose=choose,
                    provisional=provisional,
                ),
                subqueries[n].text,
            ),
            stand_ins[n],
            links.get(n),
        )
        for n, count in counts.items()
    )
    outer = session.prepare(
        outer_sql, epsilon, delta, choose=choose, provisional=provisional, _share=outer_share
    )
    staged = StagedRelease(stages, QueryRelease(outer, sql), sql, replan)
    if links:
        # Planned now with every key's branch (stand-in values), so that the outer query with
        # the released values cannot be refused behind the data gate for its size or shape.
        staged.check_written([s.stand_in_text() for s in stages])
    # Written now, before anything is reserved: SQL that cannot be written is a free refusal
    # (the outer query is written again with its values, after the gate, the same way).
    for prepared in (outer, *(stage.release.prepared for stage in stages)):
        prepared.exact  # noqa: B018 (cached on the object)
    return staged


def _keys(prepared: Prepared) -> list[Any]:
    """The public keys a correlated subquery is released for (its one group key's list)."""
    (key,) = prepared.plan.query.group_by
    return [k for k in key.keys or () if k is not None]


def _room(probes: Mapping[int, Prepared]) -> tuple[int, int]:
    """The characters and tokens the ``CASE`` of each correlated subquery may take, from its
    keys: ``WHEN key THEN value`` per key, a value at most 24 characters and 2 tokens (a
    negative number's sign is one).
    """
    chars = tokens = 0
    for probe in probes.values():
        for k in _keys(probe):
            chars += len(f" WHEN {_literal(k)} THEN ") + 24
            tokens += 5
        chars, tokens = chars + 32, tokens + 8
    return chars, tokens


def _check_clauses(sql: str, subqueries: Sequence[Subquery]) -> None:
    """Refuse a subquery used as a value outside SELECT, WHERE and HAVING."""
    for sub in subqueries:
        if sub.clause not in ALLOWED_CLAUSES:
            raise QueryError(
                f"a subquery used as a value is answered in SELECT, WHERE and HAVING, not in "
                f"{sub.clause}.",
                clause=sub.clause,
                sql=sql,
                span=span_at(sql, sub.start, sql[sub.start : sub.end + 1]),
                why="its value is released first and then written in; elsewhere the value "
                "itself could decide whether the query is valid.",
                fix="release it with its own query and write its value as a constant.",
            )


def _check_not_measured(
    sql: str,
    subqueries: Sequence[Subquery],
    stand_ins: Sequence[str],
    plan: DPQuery,
    private: set[int],
) -> None:
    """Refuse a released value that the outer query would aggregate (``SUM(x - (SELECT …))``):
    the measurement's bounds, so its sensitivity and noise, would depend on the value, which
    is known only after the data is read.
    """
    noisy = repr((plan.measurements, plan.selection))
    for n in sorted(private):
        if stand_ins[n] in noisy:
            sub = subqueries[n]
            raise QueryError(
                "a subquery used as a value is inside an aggregate's argument here.",
                clause=sub.clause,
                sql=sql,
                span=span_at(sql, sub.start, sql[sub.start : sub.end + 1]),
                why="the aggregate's bounds, and so its noise, would depend on the released "
                "value, which is known only once the data has been read.",
                fix="use the value outside the aggregate: SUM(x) - (SELECT …) * COUNT(x), or "
                "AVG(x) - (SELECT …); or compare with it in WHERE.",
            )


def _outer_probe(
    session: Session,
    sql: str,
    outer_sql: str,
    subqueries: Sequence[Subquery],
    epsilon: Any,
    delta: Any,
    choose: bool,
    provisional: bool,
) -> Prepared:
    """The outer query planned with its stand-in constants (at the ε asked), its refusals
    pointing at the analyst's own text.
    """
    try:
        return session.prepare(outer_sql, epsilon, delta, choose=choose, provisional=provisional)
    except PublicAnswer:
        raise QueryError(
            "a subquery over private rows is used as a value in a query over public tables.",
            clause=subqueries[0].clause,
            sql=sql,
            span=span_at(sql, subqueries[0].start, subqueries[0].text),
            why="the outer query's rows belong to no privacy unit, so it is answered exactly; "
            "a value released from private rows is not planned into such an answer.",
            fix="release the subquery with its own query and write its value as a constant.",
        ) from None
    except QueryError as exc:
        raise (exc.relocated(sql, exc.span) if exc.span else exc) from None


def _probe(
    session: Session,
    sql: str,
    subqueries: Sequence[Subquery],
    *,
    choose: bool,
    provisional: bool,
) -> tuple[list[str | None], dict[int, Prepared], dict[int, Correlation]]:
    """Plan each subquery on its own (at ε = 1, to count its measurements): the exact value of
    each over public tables alone, ``None`` for the others, the others' plans by position, and
    how each correlated one refers to the outer query (it is then planned per outer value).
    """
    values: list[str | None] = []
    probes: dict[int, Prepared] = {}
    links: dict[int, Correlation] = {}
    for n, sub in enumerate(subqueries):
        link = correlation(sql, sub, outer_text(sql, [sub], ["0"]), session.catalog)
        if link:
            _check_unique(session, sub, sql, link)
        try:
            probe = session.prepare(
                link.stage_sql if link else sub.sql,
                Fraction(1),
                None,
                choose=choose,
                provisional=provisional,
            )
        except PublicQuery as public:
            if link:
                raise _public_correlated(sub, sql, link) from None
            values.append(_public_value(session, sub, sql, public))
            continue
        except QueryError as exc:
            raise (_per_key_error(exc, sub, sql) if link else _in_subquery(exc, sql)) from None
        if link:
            _check_per_key(probe, sub, sql, link)
            links[n] = link
        else:
            _check_one_value(probe, sub, sql)
        probes[n] = probe
        values.append(None)
    return values, probes, links


def _public_whole(session: Session, sql: str) -> bool:
    """Whether ``sql`` reads public tables alone (answered as written, exactly, free)."""
    try:
        session.prepare(sql, Fraction(1), None)
    except PublicAnswer:
        return True
    except Exception:
        return False
    return False


def _public_value(session: Session, sub: Subquery, sql: str, public: PublicQuery) -> str:
    """A subquery over public tables alone, answered exactly now: its one value as a constant."""
    if len(public.columns) != 1:
        raise _not_one_value(sub, sql, f"{len(public.columns)} columns")
    rows, _, _ = public_rows(session.executor, public)
    if len(rows) > 1:
        raise _not_one_value(sub, sql, f"{len(rows)} rows")
    cell = rows[0][0] if rows else None
    if isinstance(cell, str):
        return "'" + cell.replace("'", "''") + "'"
    return constant(Answer(("v",), ((cell,),) if rows else (), (), (), ("exact",)))


def _at_subquery(sub: Subquery, sql: str, what: str, why: str, fix: str | None) -> QueryError:
    """A refusal of a correlated subquery, pointing at the whole subquery in ``sql``."""
    return QueryError(
        what,
        clause=sub.clause,
        sql=sql,
        span=span_at(sql, sub.start, sql[sub.start : sub.end + 1]),
        why=why,
        fix=fix,
    )


def _public_correlated(sub: Subquery, sql: str, link: Correlation) -> QueryError:
    """The refusal of a correlated subquery that reads public tables alone."""
    return _at_subquery(
        sub,
        sql,
        f"the subquery reads public tables alone and is correlated with {link.column}.",
        "a correlated subquery is released per value of the outer column; over public tables "
        "alone there is nothing to release, and its exact values are not written into a query "
        "over private rows.",
        f"join what it reads to the outer query's {link.table} instead, or ask it over the "
        "public tables in a query of its own (answered exactly, free).",
    )


def _check_per_key(probe: Prepared, sub: Subquery, sql: str, link: Correlation) -> None:
    """Refuse a correlated subquery whose per-key query would not release one value for each
    value of the outer column, from its public list.
    """
    query = probe.plan.query
    if len(query.outputs) != 2:  # the key and the value
        raise _not_one_value(sub, sql, f"{len(query.outputs) - 1} columns")
    (key,) = query.group_by
    narrow = (
        f"narrow the outer query's conditions on {link.table} (its WHERE, on that table's "
        "columns alone)."
    )
    if key.keys is None or probe.plan.selection is not None:
        raise _at_subquery(
            sub,
            sql,
            f"the subquery is correlated with {link.column}, and the public table {link.table} "
            "holds too many of its values to answer each.",
            "a correlated subquery is released once per value of the outer column, every value "
            "answered; the values are those of the table's rows that pass the outer query's "
            "conditions on it alone.",
            narrow,
        )
    count = len([k for k in key.keys if k is not None])
    if count > MAX_CORRELATED_KEYS:
        raise _at_subquery(
            sub,
            sql,
            f"the subquery is correlated with {link.column}, which takes {count:,} values in "
            f"{link.table} under the outer query's conditions; at most "
            f"{MAX_CORRELATED_KEYS:,} are answered.",
            "each value is released and then written into the outer query as a branch of a CASE.",
            narrow,
        )


def _check_unique(session: Session, sub: Subquery, sql: str, link: Correlation) -> None:
    """Refuse a correlation on a column that is not unique in its public table: the per-key
    query joins the table on it, and a value held by several rows would count the subquery's
    rows once per row (a SUM or COUNT multiplied), not the subquery's answer. Read from the
    public table, before any private row.
    """
    most = session.rows_per_value(link.table, link.key)
    if most > 1:
        raise _at_subquery(
            sub,
            sql,
            f"the subquery is correlated with {link.column}, which is not unique in "
            f"{link.table} (up to {most:,} rows share a value).",
            "the subquery is asked per value joined to the outer query's table, so each of its "
            "rows would count once per row of the table holding that value.",
            f"correlate it with a key of {link.table} (a column whose values are unique), or ask "
            "per group with GROUP BY in a query of its own.",
        )


def _per_key_error(exc: QueryError, sub: Subquery, sql: str) -> QueryError:
    """``exc``, raised while planning a correlated subquery per outer value, located at it."""
    return _relabelled(
        exc,
        f"the correlated subquery cannot be released per value of the outer column: {exc.bare}",
        clause=sub.clause,
        sql=sql,
        span=span_at(sql, sub.start, sql[sub.start : sub.end + 1]),
        why=exc.why
        or "a correlated subquery is asked as one query grouped by the outer column, joined to "
        "its public table.",
        fix=exc.fix,
    )


def _check_one_value(probe: Prepared, sub: Subquery, sql: str) -> None:
    """Refuse a private subquery that would release more than one value."""
    query = probe.plan.query
    if len(query.outputs) != 1:
        raise _not_one_value(sub, sql, f"{len(query.outputs)} columns")
    if query.group_by:
        raise _not_one_value(sub, sql, "a row per group (GROUP BY)")


def _not_one_value(sub: Subquery, sql: str, got: str) -> QueryError:
    return QueryError(
        f"a subquery used as a value must give one value; this one gives {got}.",
        clause="WHERE",
        sql=sql,
        span=span_at(sql, sub.start, sql[sub.start : sub.end + 1]),
        fix="select one aggregate, with no GROUP BY, e.g. (SELECT AVG(x) FROM t WHERE ...).",
    )


def _in_subquery(exc: QueryError, sql: str) -> QueryError:
    """``exc``, raised while planning a subquery on its own, said of the analyst's whole text."""
    return _relabelled(
        exc,
        f"the subquery used as a value cannot be released on its own: {exc.bare}",
        sql=sql,
        span=exc.span,
        why=exc.why
        or "a subquery used as a value is released first, by itself (or, correlated, per value "
        "of a public table's column), so it cannot refer to the outer query's rows.",
        fix=(
            "check the name against the subquery's own FROM; a subquery may refer to the outer "
            "query only by equating one of its columns with a column of a public table of the "
            "outer query (WHERE t.k = outer_table.k)."
        )
        if exc.bare.startswith("unknown")
        else exc.fix,
    )


def _relabelled(
    exc: QueryError,
    what: str,
    *,
    sql: str,
    span: Any,
    why: str | None,
    fix: str | None,
    clause: str | None = None,
) -> QueryError:
    """A refusal of ``exc``'s kind (a privacy refusal stays one) with a new message and place."""
    out = type(exc).__new__(type(exc))
    QueryError.__init__(
        out, what, clause=clause or exc.clause, sql=sql, span=span, why=why, fix=fix
    )
    return out


def explain_staged(staged: StagedRelease, confidence: float) -> Explanation:
    """What explain shows of a staged query: the outer query's explanation, with each subquery's
    measurements before its own (labelled as released first), the whole loss, and the exact SQL
    of every stage in the order it runs.
    """
    outer = staged.outer.prepared
    shown = explain(outer.plan, confidence, outer.exact.all())
    named = staged.named
    first: list[MeasurementCost] = []
    notes: list[str] = []
    sql = []
    for n, stage in enumerate(staged.stages, start=1):
        prepared = stage.release.prepared
        inner = explain(prepared.plan, confidence, prepared.exact.all())
        first += [
            replace(m, name=f"{n}.{m.name}", label=f"subquery {n}: {m.label}")
            for m in inner.measurements
        ]
        link = stage.correlation
        notes.append(
            f"subquery {n}, ({stage.subquery.text}), is released first, spending "
            f"{stage.release.loss}; its released value is then a constant of the query."
            if link is None
            else f"subquery {n}, ({stage.subquery.text}), is released first per value of "
            f"{link.column} (the {len(_keys(prepared)):,} values of the public table "
            f"{link.table} that pass the query's conditions on it), spending "
            f"{stage.release.loss}; the query then reads CASE {link.column} WHEN <key> THEN "
            "<released value> ... END in its place."
        )
        sql.append(f"-- subquery {n}, released first:\n{inner.exact_sql}")
    sql.append(f"-- then the query:\n{named(shown.exact_sql)}")
    return replace(
        shown,
        filters=tuple(named(f) for f in shown.filters),
        outputs=tuple((named(c, full=True), named(f)) for c, f in shown.outputs),
        measurements=(*first, *shown.measurements),
        loss=staged.loss,
        notes=(*notes, *shown.notes),
        exact_sql="\n".join(sql),
    )
