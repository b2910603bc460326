"""Compile a DP plan into the exact aggregate queries an engine runs.

The generated SQL computes, per group, every measurement of the plan exactly: counts, and sums of
values clipped to their public bounds, centred and rounded to a power-of-two grid, as integers (so
the engine sums exactly, whatever the row order); and per-bin counts for private selections. It adds
no noise: noise is drawn in Python from the OS generator after the exact values come back.

Every relation becomes a subquery whose columns are the plan's unique field ids. A privacy unit
given by an id column is bounded before aggregating (see :func:`bounded`). Expressions are made
total: arithmetic in DOUBLE (no overflow), NULL-safe division, integer division truncating toward
zero, so the query cannot fail on particular rows.

Example:
    >>> from fractions import Fraction as F
    >>> from dalenius.plan.nodes import Measurement
    >>> from dalenius.plan.expr import Col
    >>> m = Measurement("m0", "sum", Col("age"), "int", (F(17), F(90)), F(0), F(1), 90, 90, F(1))
    >>> print(Compiler({}).measurement(m).sql("duckdb"))
    SUM(CAST(CASE WHEN "age" BETWEEN 17 AND 90 THEN "age" WHEN "age" < 17 THEN 17 WHEN "age" > 90 THEN 90 ELSE "age" END AS BIGINT))
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, is_dataclass
from dataclasses import fields as dataclass_fields
from fractions import Fraction
from functools import cache, partial
from typing import Any

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect as GlotDialect

from dalenius.core.catalog import Key
from dalenius.core.dialect import DUCKDB, Dialect, as_dialect
from dalenius.plan.derive import FieldInfo, type_of
from dalenius.plan.expr import (
    Between,
    BinOp,
    Case,
    Col,
    Expr,
    Func,
    InList,
    IsNull,
    Like,
    Lit,
    Neg,
    Not,
)
from dalenius.plan.functions import FUNCTIONS
from dalenius.plan.nodes import (
    VECTOR_KINDS,
    AggCall,
    DPQuery,
    Field,
    Filter,
    GroupKey,
    Join,
    Measurement,
    Project,
    Relation,
    Scan,
    UnitAggregate,
    all_fields,
    output_fields,
)
from dalenius.plan.sensitivity import DOUBLE_MAX, SCALED_LIMIT
from dalenius.sql.dialects import (
    double_arithmetic,
    exact_sum,
    hash_ties,
    keyed_hash,
    modulo,
    round_half,
)

_BINARY: dict[str, type[exp.Binary]] = {
    "=": exp.EQ,
    "<>": exp.NEQ,
    "<": exp.LT,
    "<=": exp.LTE,
    ">": exp.GT,
    ">=": exp.GTE,
    "+": exp.Add,
    "-": exp.Sub,
    "*": exp.Mul,
    "AND": exp.And,
    "OR": exp.Or,
    "||": exp.DPipe,
}

_FUNCS: dict[str, type[exp.Func]] = {
    spec.name: getattr(exp, spec.sqlglot) for spec in FUNCTIONS.values()
}
"""sqlglot's class of each registered function (:data:`dalenius.plan.functions.FUNCTIONS`),
which writes it in each dialect; the cases of :meth:`Compiler.expression` add guards."""


@dataclass(frozen=True)
class ExactSQL:
    """The exact queries of one plan: the main aggregate and one per histogram measurement.

    Main result columns: the group keys in order, then one column per non-histogram measurement
    named after it. Histogram result columns: the group keys, the bin index, the count.
    """

    main: str
    histograms: tuple[tuple[str, str], ...]
    reads: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Each table the statements scan (by its catalog name, sorted) with the columns they read
    of it (sorted): an executor may scan a relation of just those columns
    (:meth:`dalenius.executors.base.Executor.scoped`)."""

    def all(self) -> str:
        """Every statement, for explain output."""
        return ";\n".join([self.main, *(sql for _, sql in self.histograms)])


def exact_queries(plan: DPQuery, dialect: Dialect | str = DUCKDB, *, salt: int = 0) -> ExactSQL:
    """The SQL that computes every measurement of ``plan`` exactly, per group, in ``dialect``.

    ``salt`` keys the hash that picks which rows of a unit are kept; the engine draws it per query
    from the OS generator, and all statements of one query share it (so they see the same rows).

    Long because it assembles every statement of one query (relation, group keys, the bounding or
    the key filter, the main aggregate and one per histogram) around one rendering of the relation,
    which pieces split apart would pass around as half a dozen values.
    """
    dialect = as_dialect(dialect)
    query = plan.query
    compiler = Compiler(
        {f.id: FieldInfo(f.type, f.bounds, f.keys, f.nullable) for f in all_fields(query.relation)},
        dialect,
        read=read_names(plan),
    )
    relation = compiler.relation(query.relation)
    keys = [compiler.expression(k.expr) for k in query.group_by]
    conditions: list[exp.Expr] = []
    for key, sql_key in zip(query.group_by, keys, strict=True):
        if key.keys is not None:
            conditions.append(
                exp.In(this=sql_key.copy(), expressions=[_key_literal(v) for v in key.keys])
            )
    scalars = [m for m in plan.measurements if m.kind not in VECTOR_KINDS]
    # Only selections (quantiles): the main query still lists the groups present.
    measures = [(m.name, compiler.measurement(m)) for m in scalars] or [
        ("__rows", exp.Count(this=exp.Star()))
    ]
    aggregated: str | None = None
    bounding = plan.bounding
    if bounding.enforced:
        # Rank rows by a hash of the fields the measurements and keys read, not of every field:
        # rows alike in those fields are interchangeable for this query, and the engine need
        # not carry (or sort) the other columns (in DuckDB, a third of the time and most memory).
        args = [compiler.expression(m.arg) for m in plan.measurements if m.arg is not None]
        read = sorted({c.name for e in [*keys, *args] for c in e.find_all(exp.Column)})
        aggregated = bounded_aggregate(
            relation,
            unit=bounding.unit or "",
            row_fields=read or [bounding.unit or ""],
            keys=keys,
            group_keys=list(query.group_by),
            measures=measures,
            max_rows=bounding.max_rows,
            rank=partial(
                _ranked,
                unit_col=_col(bounding.unit or ""),
                row_fields=read or [bounding.unit or ""],
                keys=keys,
                types=compiler.hash_kinds([bounding.unit or "", *read]),
                key_types=[k.type for k in query.group_by],
                max_rows=bounding.max_rows,
                max_groups=bounding.max_groups,
                dialect=dialect,
                salt=salt,
            ),
            dialect=dialect,
        )
        # The bounded rows are written only for the statements that read them: the main one
        # when it could not aggregate per unit, and the histograms (writing them was half of
        # the time spent writing a small query's SQL).
        read_rows = aggregated is None or any(m.kind in VECTOR_KINDS for m in plan.measurements)
        prefix, source = (
            bounded(
                relation,
                unit=bounding.unit or "",
                row_fields=read or [bounding.unit or ""],
                keys=keys,
                key_types=[k.type for k in query.group_by],
                types=compiler.hash_kinds([bounding.unit or "", *read]),
                max_rows=bounding.max_rows,
                max_groups=bounding.max_groups,
                dialect=dialect,
                salt=salt,
                conditions=conditions,
            )
            if read_rows
            else ("", "")
        )
        conditions = []
    else:
        if plan.public_groups:
            # Every group key is public and no unit is bounded: rows outside the key lists only
            # form groups that exact_values drops, so the engine need not test every row against
            # the lists (in DuckDB a string IN list costs more than the aggregate itself).
            conditions = []
        # The relation is rendered once and shared by every statement of the query: building
        # each statement as one sqlglot tree would deep-copy it each time, which dominated
        # planning.
        prefix, source = "", f"({_sql(relation, dialect)}) AS __rows"
    key_sql = [_sql(k, dialect) for k in keys]
    # A constant key (GROUP BY 'all', GROUP BY TRUE) forms one group: it is selected but not
    # grouped by, since engines refuse or misread constants in GROUP BY (PostgreSQL rejects a
    # string constant; DuckDB reads GROUP BY 2 as the second column).
    group_sql = [s for s, k in zip(key_sql, keys, strict=True) if k.find(exp.Column) is not None]
    condition_sql = [_sql(c, dialect) for c in conditions]

    def grouped(select: list[exp.Expr], extra_group: list[exp.Expr], where: list[exp.Expr]) -> str:
        names = [f"{k} AS __k{i}" for i, k in enumerate(key_sql)]
        columns = ", ".join(names + [_sql(s, dialect) for s in select])
        text = f"{prefix}SELECT {columns} FROM {source}"
        filters = condition_sql + [f"({_sql(w, dialect)})" for w in where]
        if filters:
            text += " WHERE " + " AND ".join(filters)
        group = group_sql + [_sql(g, dialect) for g in extra_group]
        if group:
            text += " GROUP BY " + ", ".join(group)
        return text

    main = aggregated or grouped([exp.alias_(e, name) for name, e in measures], [], [])
    histograms = []
    for m in plan.measurements:
        if m.kind != "histogram":
            continue
        assert m.arg is not None
        index = compiler.bin_index(m)
        sql = grouped(
            [exp.alias_(index, "__bin"), exp.alias_(exp.Count(this=exp.Star()), m.name)],
            [index.copy()],
            [exp.Not(this=exp.Is(this=compiler.expression(m.arg), expression=exp.Null()))],
        )
        histograms.append((m.name, sql))
    for m in plan.measurements:
        if m.kind == "degrees":
            assert m.arg is not None  # the unit's id, as COUNT(DISTINCT unit) reads it
            unit = _sql(compiler.expression(m.arg), dialect)
            sql = degree_counts(prefix, source, key_sql, group_sql, condition_sql, unit, m.name)
            histograms.append((m.name, sql))
    return ExactSQL(main=main, histograms=tuple(histograms), reads=compiler.reads())


def read_names(plan: DPQuery) -> frozenset[str]:
    """Every name ``plan`` mentions outside the fields its relations declare: a superset of the
    field ids it reads (column references, join keys, the unit's field), for column pruning.

    Over-inclusion only keeps a column the engine then ignores; a field left out would make the
    statement fail to bind, never change an answer (field ids are unique within a plan).
    """
    found: set[str] = set()
    stack: list[Any] = [plan]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            found.add(value)
        elif isinstance(value, tuple | list | frozenset | set):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.items())
        elif is_dataclass(value) and not isinstance(value, Field | type):
            stack.extend(getattr(value, f.name) for f in dataclass_fields(value))
    return frozenset(found)


def degree_counts(
    prefix: str,
    source: str,
    key_sql: list[str],
    group_sql: list[str],
    condition_sql: list[str],
    unit: str,
    name: str,
) -> str:
    """Per group and degree ``d``, the units holding ``d`` groups (bin ``d − 1``), as a histogram.

    One row per (unit, group) pair of the bounded rows, with its unit's number of groups by a
    window over those pairs, then a count per (group, degree). Integers only, so every engine
    gives the same counts.
    """
    names = ", ".join(f"{k} AS __k{i}" for i, k in enumerate(key_sql))
    inner = f"SELECT {names}, COUNT(*) OVER (PARTITION BY {unit}) AS __deg FROM {source}"
    if condition_sql:
        inner += " WHERE " + " AND ".join(condition_sql)
    inner += " GROUP BY " + ", ".join([unit, *group_sql])
    keys = ", ".join(f"__k{i}" for i in range(len(key_sql)))
    return (
        f"{prefix}SELECT {keys}, __deg - 1 AS __bin, COUNT(*) AS {name} "
        f"FROM ({inner}) AS __d GROUP BY {keys}, __deg"
    )


def bounded(
    relation: exp.Select,
    *,
    unit: str,
    row_fields: list[str],
    keys: list[exp.Expr],
    key_types: list[str],
    types: Mapping[str, str],
    max_rows: int,
    max_groups: int,
    dialect: Dialect,
    salt: int,
    conditions: list[exp.Expr],
) -> tuple[str, str]:
    """Keep at most ``max_groups`` groups and ``max_rows`` rows of each privacy unit.

    Returns a ``WITH`` clause (possibly empty) and the bounded rows as a subquery named
    ``__rows`` (reading the ``row_fields`` columns) for the statements of the query to aggregate.

    Which groups and rows are kept is decided by ranking a keyed hash of the group key and of the
    row's content. The key (``salt``) is drawn per query, so the choice favours no data value, and
    it depends only on the unit's own rows, so removing one unit changes no other unit's selection.
    Rows with a NULL id belong to no known unit and are left out; so are rows outside the public
    keys, before ranking, so that they do not use up a unit's quota.

    Ranking every row (two window functions over the whole table) is by far the costliest step of
    a query, yet most units are within their caps, and for them ranking keeps every row. So one
    hash aggregation per unit finds the units *over* their caps (more than ``max_rows`` rows, or
    rows in more than one group: every key not constant), and only their rows are ranked; the rows
    of every other unit are kept as they are. A unit within its caps has one group and at most
    ``max_rows`` rows, so ranking would have kept all of them (values the GROUP BY merges, such as
    -0.0 and 0.0, hash alike: :func:`dalenius.sql.dialects.keyed_hash`). Whether a unit is ranked
    depends on its own rows only. On Spark every row is ranked (see below), with no ``WITH``
    clause.

    Long because it writes one statement, the two-pass bounding (one aggregation finds the units
    over their caps, only their rows are ranked), whose parts share the unit, the columns read and
    the dialect; the ranking itself is :func:`_ranked`.
    """
    unit_col = _col(unit)
    where = [exp.Not(this=exp.Is(this=unit_col.copy(), expression=exp.Null())), *conditions]
    # Only the columns the query reads (and the unit) are carried: the input is materialised.
    needed = [unit, *(f for f in row_fields if f != unit)]
    rows = (
        exp.select(*[_col(f) for f in needed])
        .from_(relation.subquery("__in"))
        .where(exp.and_(*where))
    )
    columns = ", ".join(_sql(_col(f), dialect) for f in row_fields)

    def ranked(source: exp.Select) -> str:
        capped = _ranked(
            source,
            unit_col=unit_col,
            row_fields=row_fields,
            keys=keys,
            types=types,
            key_types=key_types,
            max_rows=max_rows,
            max_groups=max_groups,
            dialect=dialect,
            salt=salt,
        )
        return f"SELECT {columns} FROM ({_sql(capped, dialect)}) AS __b"

    if dialect.ranks_every_row:
        # Spark may read a CTE's source once per reference, and the caps hold only if every
        # read sees the same rows; it also sorts for the window functions whatever is ranked
        # (both ways took the same time). So Spark ranks every row, reading the data once.
        return "", f"({ranked(rows)}) AS __rows"
    within = _within_caps(
        [_compared(k, kind) for k, kind in zip(keys, key_types, strict=True)], max_rows
    )
    over = (
        exp.select(exp.alias_(unit_col.copy(), "__unit"))
        .from_(exp.to_table("__input"))
        .group_by(unit_col.copy())
        .having(exp.not_(within))
    )
    # The caps hold only if every reference to __input sees the same rows. DuckDB materialises
    # it (read once). PostgreSQL reads the table again for each reference — cheaper than
    # materialising it — and one statement sees one snapshot of the data.
    prefix = (
        f"WITH __input AS {dialect.cte_hint} ({_sql(rows, dialect)}), "
        f"__over AS ({_sql(over, dialect)}) "
    )
    unit_sql = _sql(unit_col, dialect)
    within_caps = (
        f"SELECT {columns} FROM __input AS __s WHERE NOT EXISTS "
        f"(SELECT 1 FROM __over AS __o WHERE __o.__unit = __s.{unit_sql})"
    )
    over_rows = (
        exp.select("__s.*")
        .from_("__input AS __s")
        .join("__over AS __o", on=f"__o.__unit = __s.{unit_sql}", dialect=dialect.name)
    )
    return prefix, f"({within_caps} UNION ALL {ranked(over_rows)}) AS __rows"


def bounded_aggregate(
    relation: exp.Select,
    *,
    unit: str,
    row_fields: list[str],
    keys: list[exp.Expr],
    group_keys: list[GroupKey],
    measures: list[tuple[str, exp.Expr]],
    max_rows: int,
    rank: Callable[[exp.Select], exp.Select],
    dialect: Dialect,
) -> str | None:
    """The main statement of a bounded query, aggregating each unit once; ``None`` if it cannot.

    :func:`bounded` returns the kept *rows*: it materialises the input (so that every read sees
    the same rows) and joins every row twice against the units over their caps. Here, one hash
    aggregation per unit computes both whether the unit is within its caps and its part of every
    measurement (:func:`_partials`), so a unit within its caps — most of them — is never looked at
    again: its parts are summed per group. Only the units over their caps are read again, ranked
    by ``rank`` (:func:`_ranked` with the caps and hash key of :func:`bounded`) and aggregated per
    group. A unit
    is within its caps exactly as in :func:`bounded`, so the kept rows, and the exact answers, are
    the same. Each unit's contribution comes from one read: the per-unit aggregate (evaluated once,
    ``MATERIALIZED``) or its ranked rows, which hold the caps whatever a later read returns — so
    the input need not be materialised.

    A text key with a public list is compared (MIN = MAX) through its position in the list, found
    by a join with the list (which also drops the rows outside it): comparing integers instead of
    strings made the whole statement about 1.6 times faster in DuckDB. The position is mapped back
    to the key after the last aggregation.

    Not for Spark, which may evaluate a CTE once per reference (see :func:`bounded`).

    Long because it writes one statement whose parts (the per-unit partials, the units over
    their caps ranked, the per-group totals, the keys mapped back from their list positions)
    share the grouping, the listed keys and the dialect; the rows and the lists are
    :func:`_unit_rows`.
    """
    split = _partials([m for _, m in measures])
    if split is None or dialect.ranks_every_row:
        return None
    parts, totals = split
    unit_col = _col(unit)
    rows, lists = _unit_rows(relation, unit, row_fields, keys, group_keys, dialect)
    listed = list(lists)
    # What each key is grouped by: the key, or its position in its public list. Constant keys
    # (GROUP BY 'all') are one group for every unit, and selected only at the end.
    grouped = [
        (i, exp.column(f"__i{i}") if i in listed else key)
        for i, key in enumerate(keys)
        if key.find(exp.Column) is not None
    ]
    compared = {i: _compared(by, "int" if i in listed else group_keys[i].type) for i, by in grouped}
    # Positions in a list are never NULL (the join drops NULL keys): they are compared first.
    checks = [compared[i] for i, _ in grouped if i in listed]
    checks += [compared[i] for i, _ in grouped if i not in listed]
    unit_sql = _sql(unit_col, dialect)
    part_sql = [_sql(p, dialect) for p in parts]
    units = [
        f"{unit_sql} AS __u",
        f"{_sql(exp.not_(_within_caps(checks, max_rows, len(listed)), copy=False), dialect)}"
        " AS __over_caps",
        *(f"MIN({_sql(compared[i], dialect)}) AS __lo{i}" for i, _ in grouped),
        *(f"{p} AS __p{j}" for j, p in enumerate(part_sql)),
    ]

    def value(i: int) -> str:
        # A boolean key was compared as 0/1: its value is whether the minimum is 1.
        return f"(__lo{i} = 1)" if i not in listed and group_keys[i].type == "bool" else f"__lo{i}"

    gs = [f"__g{i}" for i, _ in grouped]
    ps = [f"__p{j}" for j in range(len(parts))]
    marked = ", ".join(
        [
            "CASE WHEN __over_caps THEN __u END AS __ou",
            *(f"CASE WHEN __over_caps THEN NULL ELSE {value(i)} END AS __g{i}" for i, _ in grouped),
            *ps,
        ]
    )
    by_group = ", ".join(["__ou", *gs])
    summed = ", ".join(f"SUM({p}) AS {p}" for p in ps)
    hint = "NOT MATERIALIZED "
    prefix = (
        f"WITH __input AS {hint}({rows}), "
        f"__units AS {hint}(SELECT {', '.join(units)} FROM __input GROUP BY {unit_sql}), "
        f"__split AS MATERIALIZED (SELECT {by_group}, {summed} FROM (SELECT {marked} FROM __units)"
        f" AS __w GROUP BY {by_group}) "
    )
    capped = rank(_over_rows(unit_sql, dialect.name).copy())
    by_sql = [_sql(by, dialect) for _, by in grouped]
    ranked_part = ", ".join(
        [
            *(f"{b} AS __g{i}" for b, (i, _) in zip(by_sql, grouped, strict=True)),
            *(f"{p} AS __p{j}" for j, p in enumerate(part_sql)),
        ]
    )
    ranked_sql = f"SELECT {ranked_part} FROM ({_sql(capped, dialect)}) AS __b"
    if by_sql:
        ranked_sql += " GROUP BY " + ", ".join(by_sql)
    within_part = f"SELECT {', '.join([*gs, *ps])} FROM __split WHERE __ou IS NULL"
    total_sql = [
        f"{_sql(t, dialect)} AS {_quoted(name)}"
        for (name, _), t in zip(measures, totals, strict=True)
    ]
    body = f"SELECT {', '.join([*gs, *total_sql])} FROM ({within_part} UNION ALL {ranked_sql}) AS __parts"
    if gs:
        body += " GROUP BY " + ", ".join(gs)
    outputs = []
    for i, key in enumerate(keys):
        if i in listed:
            outputs.append(f"__kv{i}.__v AS __k{i}")
        elif key.find(exp.Column) is None:
            outputs.append(f"{_sql(key, dialect)} AS __k{i}")
        else:
            outputs.append(f"__t.__g{i} AS __k{i}")
    outputs += [f"__t.{_quoted(name)}" for name, _ in measures]
    back = "".join(f" JOIN {lists[i]} ON __t.__g{i} = __kv{i}.__i" for i in listed)
    return f"{prefix}SELECT {', '.join(outputs)} FROM ({body}) AS __t{back}"


@cache
def _over_rows(unit_sql: str, dialect: str) -> exp.Select:
    """The rows of the units over their caps, from ``__input`` (parsed once per unit column and
    dialect: parsing it was a tenth of the time spent writing a query; callers copy it).
    """
    return (
        exp.select("__s.*")
        .from_("__input AS __s")
        .where(
            f"__s.{unit_sql} IN (SELECT __ou FROM __split WHERE NOT __ou IS NULL)",
            dialect=dialect,
        )
    )


def _unit_rows(
    relation: exp.Select,
    unit: str,
    row_fields: list[str],
    keys: list[exp.Expr],
    group_keys: list[GroupKey],
    dialect: Dialect,
) -> tuple[str, dict[int, str]]:
    """The rows a bounded query reads, and the public lists joined to them, by key index.

    Rows with a NULL unit, or a key outside its public list, are left out before any unit is
    bounded (they would use up its quota). A text key with a public list gets its position in
    the list as column ``__i<index>``, from a join with the list that also does the filtering.
    """
    listed = [
        i
        for i, (k, g) in enumerate(zip(keys, group_keys, strict=True))
        if g.keys and g.type == "str" and k.find(exp.Column) is not None
    ]
    lists = {i: _values_list(group_keys[i].keys or (), f"__kv{i}", dialect) for i in listed}
    where: list[exp.Expr] = [exp.Not(this=exp.Is(this=_col(unit), expression=exp.Null()))]
    for i, (key, group) in enumerate(zip(keys, group_keys, strict=True)):
        if group.keys is not None and i not in listed:
            where.append(exp.In(this=key.copy(), expressions=[_key_literal(v) for v in group.keys]))
    needed = [unit, *(f for f in row_fields if f != unit)]
    columns = [_sql(_col(f), dialect) for f in needed]
    columns += [f"__kv{i}.__i AS __i{i}" for i in listed]
    joins = "".join(f" JOIN {lists[i]} ON {_sql(keys[i], dialect)} = __kv{i}.__v" for i in listed)
    rows = (
        f"SELECT {', '.join(columns)} FROM ({_sql(relation, dialect)}) AS __in{joins}"
        f" WHERE {_sql(exp.and_(*where, copy=False), dialect)}"
    )
    return rows, lists


def _values_list(keys: tuple[Key, ...], name: str, dialect: Dialect) -> str:
    """A public key list as a relation ``name(__v, __i)``: each key and its position.

    Each key appears once, whatever the list: a key listed twice would join each of its rows
    twice.

    Example:
        >>> _values_list(("a", "b", "a"), "__kv0", DUCKDB)
        "(VALUES ('a', 0), ('b', 1)) AS __kv0(__v, __i)"
    """
    unique = dict.fromkeys(keys)
    rows = ", ".join(f"({_sql(_key_literal(v), dialect)}, {i})" for i, v in enumerate(unique))
    return f"(VALUES {rows}) AS {name}(__v, __i)"


def _compared(key: exp.Expr, kind: str) -> exp.Expr:
    """The value whose MIN and MAX over a unit's rows tell whether ``key`` is constant there.

    MIN and MAX compare a key exactly (a hash could collide); booleans, which PostgreSQL cannot
    MIN, as 0 and 1.
    """
    if kind != "bool":
        return key.copy()
    return exp.Case(
        ifs=[
            exp.If(this=key.copy(), true=exp.Literal.number(1)),
            exp.If(this=exp.Not(this=exp.Paren(this=key.copy())), true=exp.Literal.number(0)),
        ]
    )


def _within_caps(values: list[exp.Expr], max_rows: int, never_null: int = 0) -> exp.Expr:
    """Whether a unit (one GROUP BY unit) is within its caps: one group and at most ``max_rows`` rows.

    A key is constant in a unit if all its values are equal and none is NULL, or all are NULL;
    the first ``never_null`` values cannot be NULL, so MIN = MAX suffices for them. Never NULL:
    the last comparison of each key is TRUE when all its values are NULL.
    """
    n_rows = exp.Count(this=exp.Star())
    within: list[exp.Expr] = [exp.LTE(this=n_rows, expression=exp.Literal.number(max_rows))]
    for i, value in enumerate(values):
        same: exp.Expr = exp.EQ(
            this=exp.Min(this=value.copy()), expression=exp.Max(this=value.copy())
        )
        if i < never_null:
            within.append(same)
            continue
        present = exp.Count(this=value.copy())
        same = exp.and_(same, exp.EQ(this=present, expression=n_rows.copy()), copy=False)
        zero = exp.EQ(this=present.copy(), expression=exp.Literal.number(0))
        within.append(exp.or_(same, zero, copy=False))
    # Every part is a fresh tree: the builders need not copy them (here and below).
    return exp.and_(*within, copy=False)


def _partials(measures: list[exp.Expr]) -> tuple[list[exp.Expr], list[exp.Expr]] | None:
    """Split aggregates into per-part aggregates and their totals, or ``None`` if one cannot be.

    Every measurement is a linear combination of integer ``SUM`` and ``COUNT`` aggregates (the
    values are in grid units), so it can be computed per part — per unit, per group of ranked
    rows — and the parts summed, exactly, with the same result as aggregating the rows at once.
    Returns the part aggregates (column ``__p<i>`` is the i-th) and each measure rewritten over
    them. ``COUNT(DISTINCT x)`` does not add up over parts: ``None``.
    """
    parts: list[exp.Expr] = []

    def total(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Sum | exp.Count):
            return node
        column = exp.column(f"__p{len(parts)}")
        parts.append(node.copy())
        summed: exp.Expr = exp.Sum(this=column)
        if isinstance(node, exp.Count):
            # A count is a BIGINT, and 0 (not NULL) when no row is left.
            summed = exp.cast(
                exp.Coalesce(this=summed, expressions=[exp.Literal.number(0)]),
                exp.DataType.Type.BIGINT,
            )
        return summed

    totals = []
    for measure in measures:
        for node in measure.find_all(exp.AggFunc):
            if not isinstance(node, exp.Sum | exp.Count) or node.find(exp.Distinct) is not None:
                return None
            if any(inner is not node for inner in node.find_all(exp.AggFunc)):
                return None
        totals.append(measure.transform(total))  # on a copy
    return parts, totals


def _ranked(
    source: exp.Select,
    *,
    unit_col: exp.Column,
    row_fields: list[str],
    keys: list[exp.Expr],
    types: Mapping[str, str],
    key_types: list[str],
    max_rows: int,
    max_groups: int,
    dialect: Dialect,
    salt: int,
) -> exp.Select:
    """The rows of ``source`` in each unit's first ``max_groups`` groups and first ``max_rows`` rows.

    Groups and rows are ranked by keyed hashes of the unit's id with the group key, and with
    the row. The id is part of the hash so that each unit's choice is its own: with one key per
    query for every unit, every unit over its cap would keep the same "lucky" groups and values,
    a bias of the whole answer toward them (each unit's choice still depends on its own rows only).
    """
    current: exp.Expr = source.subquery("__filtered", copy=False)
    rank_filter: exp.Expr | None = None
    unit_typed = (unit_col, types[unit_col.name])
    if keys:
        # A key that is a field is hashed as the field is; any other key is computed in the
        # engine's double arithmetic, so an integer key is then a double, and hashed as one.
        kinds = [
            types[k.name]
            if isinstance(k, exp.Column) and k.name in types
            else "float"
            if kind == "int"
            else kind
            for k, kind in zip(keys, key_types, strict=True)
        ]
        hashed = [unit_typed, *zip(keys, kinds, strict=True)]
        group_rank = exp.Window(
            this=exp.Anonymous(this="DENSE_RANK"),
            partition_by=[unit_col.copy()],
            order=exp.Order(
                expressions=[exp.Ordered(this=keyed_hash(dialect, salt, hashed))]
                + [exp.Ordered(this=k.copy(), nulls_first=False) for k in keys]
            ),
        )
        ranked = exp.select(exp.Star(), exp.alias_(group_rank, "__group_rank", copy=False))
        current = ranked.from_(current, copy=False).subquery("__grouped", copy=False)
        rank_filter = exp.LTE(
            this=exp.column("__group_rank"), expression=exp.Literal.number(max_groups)
        )
    row_typed = [unit_typed, *((_col(f), types[f]) for f in row_fields)]
    row_rank = exp.Window(
        this=exp.Anonymous(this="ROW_NUMBER"),
        partition_by=[unit_col.copy()],
        order=exp.Order(
            expressions=[exp.Ordered(this=keyed_hash(dialect, salt + 1, row_typed))]
            + [exp.Ordered(this=t, nulls_first=False) for t in hash_ties(row_typed)]
        ),
    )
    rows = exp.select(exp.Star(), exp.alias_(row_rank, "__row_rank", copy=False))
    rows = rows.from_(current, copy=False)
    if rank_filter is not None:
        rows = rows.where(rank_filter, copy=False)
    capped = exp.select(exp.Star()).from_(rows.subquery("__ranked", copy=False), copy=False)
    return capped.where(
        exp.LTE(this=exp.column("__row_rank"), expression=exp.Literal.number(max_rows)),
        copy=False,
    )


class Compiler:
    """Compiles plan expressions, relations and measurements, knowing each field's type."""

    def __init__(
        self,
        fields: Mapping[str, FieldInfo],
        dialect: Dialect | str = DUCKDB,
        *,
        read: frozenset[str] | None = None,
    ) -> None:
        self.fields = dict(fields)
        self.dialect = as_dialect(dialect)
        self.read = read
        """The names the query reads (:func:`read_names`): a scan projects only these fields
        (all of them when ``None``)."""
        self.computed: set[str] = set()
        """Field ids computed from an expression other than a column (a projection's, a
        per-unit aggregate's)."""
        self.scanned: dict[str, set[str]] = {}
        """The columns each scanned table is read for, by table name (filled as scans are
        compiled)."""

    def hash_kinds(self, names: list[str]) -> dict[str, str]:
        """How :func:`~dalenius.sql.dialects.keyed_hash` reads each field id in ``names``: its
        type, except that an integer a projection computes (in the engine's double arithmetic)
        is a double in the SQL, and is hashed as one.
        """
        return {
            name: "float"
            if name in self.computed and self.fields[name].type == "int"
            else self.fields[name].type
            for name in names
        }

    def reads(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The tables scanned so far, each with the columns read of it (:attr:`ExactSQL.reads`)."""
        return tuple((t, tuple(sorted(cs))) for t, cs in sorted(self.scanned.items()))

    # -- relations --------------------------------------------------------------------------------

    def relation(self, relation: Relation) -> exp.Select:
        """A SELECT whose columns are the relation's field ids."""
        match relation:
            case Scan(table=table, fields=fs):
                return self._scan(table, fs)
            case Filter(child=child, predicate=predicate):
                # Every tree here is fresh: the builders need not copy what they wrap.
                inner = self.relation(child)
                return (
                    exp.select(exp.Star())
                    .from_(inner.subquery("__f", copy=False), copy=False)
                    .where(self.expression(predicate), copy=False)
                )
            case Project(child=child, fields=fs, exprs=exprs):
                inner = self.relation(child)
                self._learn(child)
                cols = [
                    exp.alias_(self.expression(e), f.id, quoted=True, copy=False)
                    for f, e in zip(fs, exprs, strict=True)
                ]
                self.computed.update(
                    f.id for f, e in zip(fs, exprs, strict=True) if not isinstance(e, Col)
                )
                return exp.select(*cols).from_(inner.subquery("__p", copy=False), copy=False)
            case Join(left=left, right=right, left_key=lk, right_key=rk, kind=kind):
                lsql, rsql = self.relation(left), self.relation(right)
                on = exp.EQ(this=_col(lk), expression=_col(rk))
                return (
                    exp.select(exp.Star())
                    .from_(lsql.subquery("__l", copy=False), copy=False)
                    .join(
                        rsql.subquery("__r", copy=False),
                        on=on,
                        join_type="LEFT" if kind == "left" else "INNER",
                        copy=False,
                    )
                )
            case UnitAggregate():
                return self._unit_aggregate(relation)
        raise AssertionError(f"unknown relation {relation!r}")

    def _unit_aggregate(self, relation: UnitAggregate) -> exp.Select:
        """One row per unit (and key): the unit, its keys and its aggregates."""
        unit, fs, aggs, keys = (
            relation.unit_field,
            relation.fields,
            relation.aggregates,
            relation.keys,
        )
        inner = self.relation(relation.child)
        self._learn(relation.child)
        unit_out, *rest = fs
        key_fields, value_fields = rest[: len(keys)], rest[len(keys) :]
        cols = [exp.alias_(_col(unit), unit_out.id, quoted=True)]
        cols += [
            exp.alias_(self.expression(k), f.id, quoted=True)
            for f, k in zip(key_fields, keys, strict=True)
        ]
        cols += [
            exp.alias_(self.unit_aggregate(a), f.id, quoted=True)
            for f, a in zip(value_fields, aggs, strict=True)
        ]
        # Per-unit aggregates and key expressions are computed (an integer one may be a double
        # in the SQL): hashed as doubles (hash_kinds).
        self.computed.update(f.id for f in value_fields)
        self.computed.update(
            f.id for f, k in zip(key_fields, keys, strict=True) if not isinstance(k, Col)
        )
        group = [_col(unit), *[self.expression(k) for k in keys]]
        q = (
            exp.select(*cols)
            .from_(inner.subquery("__u"))
            .where(exp.Not(this=exp.Is(this=_col(unit), expression=exp.Null())))
        )
        return q.group_by(*group)

    def _scan(self, table: str, fs: tuple[Field, ...]) -> exp.Select:
        read = self.read
        # Only the columns the query reads: each projected column is one more conversion the
        # engine binds and plans (a third of a tiny COUNT's time in DuckDB). A SELECT needs one
        # column, so a query reading none keeps the first.
        kept = fs if read is None else tuple(f for f in fs if f.id in read) or fs[:1]
        self.scanned.setdefault(table, set()).update(f.name for f in kept)
        cols = [exp.alias_(_col(f.name), f.id, quoted=True, copy=False) for f in kept]
        return exp.select(*cols).from_(exp.to_table(_quoted(table)), copy=False)

    def _learn(self, relation: Relation) -> None:
        for f in output_fields(relation):
            self.fields.setdefault(f.id, FieldInfo(f.type, f.bounds, f.keys, f.nullable))

    def unit_aggregate(self, agg: AggCall) -> exp.Expr:
        """A per-unit aggregate, clamped to its bounds so the outer query sees bounded values."""
        arg = self.clipped_arg(agg.arg) if agg.arg is not None else None
        if agg.func == "count":
            value: exp.Expr = exp.Count(this=exp.Star() if arg is None else arg)
        elif agg.func == "sum":
            assert agg.arg is not None and arg is not None
            value = (
                exact_sum(arg, self.dialect, bigint=False)
                if self._is_int(agg.arg)
                else exp.Sum(this=arg)
            )
        elif agg.func == "avg":
            value = exp.Avg(this=_double(arg)) if arg is not None else exp.Null()
        elif agg.func == "min":
            value = exp.Min(this=arg)
        else:
            value = exp.Max(this=arg)
        assert agg.bounds is not None
        return _clip(value, agg.bounds[0], agg.bounds[1])

    # -- measurements -----------------------------------------------------------------------------

    def clipped_arg(self, arg: Expr) -> exp.Expr:
        """An aggregate's argument with every bounded column clipped to its bounds first."""
        return self.expression(arg, clip=True)

    def bounded_arg(self, arg: Expr, low: Fraction, high: Fraction) -> exp.Expr:
        """``arg`` (columns clipped) clipped to ``[low, high]`` — once, for a plain bounded column."""
        if isinstance(arg, Col):
            info = self.fields.get(arg.name)
            if info is not None and info.bounds == (low, high):
                return self.clipped_arg(arg)
        return _clip(self.clipped_arg(arg), low, high)

    def measurement(self, m: Measurement) -> exp.Expr:
        """The exact aggregate for one measurement (an integer in grid units).

        Every step is total over the clipped values: integers stay within BIGINT (bounds within
        its range, centres subtracted before any product, counts widened before multiplying),
        doubles are scaled by powers of two split so that no factor overflows, and every double
        is clipped to the measurement's range in grid units *before* it is cast to BIGINT. Which
        arithmetic is used is decided from the bounds alone (see
        :func:`dalenius.plan.sensitivity.grid_problem`).
        """
        if m.kind == "count":
            return exp.Count(this=exp.Star() if m.arg is None else self.expression(m.arg))
        if m.kind == "count_distinct":
            assert m.arg is not None
            return exp.Count(this=exp.Distinct(expressions=[self.expression(m.arg)]))
        clip = m.clip
        assert clip is not None
        clipped = self.bounded_arg(clip.expr, clip.low, clip.high)
        if m.kind == "sum":
            return self._sum(m, clipped)
        return self._sum_of_squares(m, clipped)

    def _sum(self, m: Measurement, clipped: exp.Expr) -> exp.Expr:
        assert m.bounds is not None
        scale = 1 / m.granularity
        offset = m.center / m.granularity
        if _bigint_bounds(m) and scale.denominator == 1 and offset.denominator == 1:
            # Σ (x·scale − offset) = scale·Σx − offset·n, exactly, in integers: the engine
            # then does no arithmetic per row (DuckDB sums a column twice as fast as an
            # expression). With no rows, SUM is NULL, read as 0. The count is widened before
            # the product, which can pass 2^63 (a centre near 2^62 times a few rows).
            units: exp.Expr = exact_sum(exp.cast(clipped, exp.DataType.Type.BIGINT), self.dialect)
            if scale != 1:
                units = exp.Mul(this=units, expression=_number(scale))
            if offset:
                # COUNT(clip(col)) is COUNT(col): the clip maps NULL, and only NULL, to NULL.
                # Counting the column itself spares the engine a second CASE per row.
                counted = self.expression(m.arg) if isinstance(m.arg, Col) else clipped.copy()
                count = _wide(exp.Count(this=counted))
                units = exp.Sub(
                    this=units, expression=exp.Mul(this=_number(offset), expression=count)
                )
            return units
        # x·2^-k − offset: the value times a power of two is exact and, from the bounds, below
        # 2^1000 (the plan refuses bounds where it would not be), so it is finite.
        shifted = exp.Sub(
            this=_scaled(_double(clipped), -_log2(m.granularity), self.dialect),
            expression=_double_literal(offset),
        )
        if _rounding_below(m, _SUM_SPAN):
            # Provably within ±row_units after rounding (see _rounding_below): no clamp.
            return exact_sum(_half_up(shifted), self.dialect)
        units_bound = Fraction(m.row_units)
        return exact_sum(_half_up(_clip(shifted, -units_bound, units_bound)), self.dialect)

    def _sum_of_squares(self, m: Measurement, clipped: exp.Expr) -> exp.Expr:
        """Σ round((clip(x) − centre)² / granularity), never overflowing or underflowing."""
        assert m.bounds is not None
        if (
            _bigint_bounds(m)
            and (2 * m.center).denominator == 1
            and m.granularity in (1, Fraction(1, 4))
        ):
            # (x − c)², or (2x − 2c)² in quarters for a half-integer centre, in BIGINT: the
            # integer part of the centre is subtracted first, so nothing passes 2^63.
            whole = Fraction(math.floor(m.center))
            diff: exp.Expr = exp.Paren(
                this=exp.Sub(
                    this=exp.cast(clipped, exp.DataType.Type.BIGINT), expression=_number(whole)
                )
            )
            if m.granularity == Fraction(1, 4):
                diff = exp.Paren(
                    this=exp.Sub(
                        this=exp.Mul(this=diff, expression=exp.Literal.number(2)),
                        expression=_number(2 * (m.center - whole)),
                    )
                )
            return exact_sum(exp.Mul(this=diff, expression=diff.copy()), self.dialect)
        # (x − c)² / 2^k = ((x − c)·2^a)² · 2^b with −k = 2a + b: the scaled difference is at
        # most about 2^16, so its square cannot overflow.
        wide = max(abs(m.bounds[0]), abs(m.bounds[1])) > SCALED_LIMIT
        centred = (
            double_arithmetic("-", _double(clipped), _double_literal(m.center), self.dialect)
            if wide
            else exp.Sub(this=_double(clipped), expression=_double_literal(m.center))
        )
        a, b = divmod(-_log2(m.granularity), 2)
        scaled = _scaled(exp.Paren(this=centred), a, self.dialect)
        if not self.dialect.ieee_doubles:
            # PostgreSQL raises when a product underflows to zero; a difference this small
            # squares to less than 1/16 of a grid step and rounds to 0 either way.
            scaled = exp.Case(
                ifs=[
                    exp.If(
                        this=exp.LT(
                            this=exp.Abs(this=scaled.copy()), expression=exp.Literal.number("0.25")
                        ),
                        true=_double(exp.Literal.number(0)),
                    )
                ],
                default=scaled.copy(),
            )
        square: exp.Expr = exp.Mul(
            this=exp.Paren(this=scaled), expression=exp.Paren(this=scaled.copy())
        )
        if b:
            square = exp.Mul(this=square, expression=exp.Literal.number(2))
        if not wide and _rounding_below(m, _SQUARE_SPAN):
            return exact_sum(_half_up(square), self.dialect)
        units_bound = Fraction(m.row_units)
        return exact_sum(_half_up(_clip(square, Fraction(0), units_bound)), self.dialect)

    def bin_index(self, m: Measurement) -> exp.Expr:
        """The bin of a histogram measurement each row falls in (0 … bins − 1).

        In doubles, the index is clipped to the bins before it is cast to BIGINT; bounds wider
        than 2^1020 are scaled by 1/4 first so that ``x − low`` cannot overflow.
        """
        clip = m.clip
        assert clip is not None
        low, high = clip.low, clip.high
        clipped = self.bounded_arg(clip.expr, low, high)
        bins = len(m.edges) - 1
        width = m.edges[1] - m.edges[0]
        if width == 1 and m.arg_type == "int" and _bigint_bounds(m):
            index: exp.Expr = exp.Sub(
                this=exp.cast(clipped, exp.DataType.Type.BIGINT), expression=_number(low)
            )
            return _clip(index, Fraction(0), Fraction(bins - 1))
        value = _double(clipped)
        if high - low > Fraction(2**1020):
            value, low, width = _scaled(value, -2, self.dialect), low / 4, width / 4
        scaled = double_arithmetic(
            "/",
            double_arithmetic("-", value, _double_literal(low), self.dialect),
            _double_literal(width),
            self.dialect,
        )
        floor = _clip(exp.Floor(this=scaled), Fraction(0), Fraction(bins - 1))
        return exp.cast(floor, exp.DataType.Type.BIGINT)

    # -- expressions ------------------------------------------------------------------------------

    def expression(self, expr: Expr, *, clip: bool = False) -> exp.Expr:  # noqa: C901, PLR0912  # one arm per expression node
        """Compile a plan expression (total: it never fails on a row).

        With ``clip``, every column that has public bounds is clipped to them (inside aggregates).

        Long because it has one arm per plan expression node, each writing that node's total
        (never-failing) SQL, plus the guards some functions need on some engines; plain calls are
        written from the registry of functions.
        """

        def sub(e: Expr) -> exp.Expr:
            return self.expression(e, clip=clip)

        match expr:
            case Col(name=name):
                info = self.fields.get(name)
                if (
                    clip
                    and info is not None
                    and info.bounds is not None
                    and info.type in ("int", "float")
                ):
                    return _clip(_col(name), info.bounds[0], info.bounds[1])
                return _col(name)
            case Lit(value=None):
                return exp.Null()
            case Lit(value=bool(v)):
                return exp.Boolean(this=v)
            case Lit(value=str(v)):
                return exp.Literal.string(v)
            case Lit(value=int(v)):
                return exp.Literal.number(v)
            case Lit(value=float(v)):
                return exp.Literal.number(repr(v))
            case BinOp(op="/", left=left, right=right):
                quotient = double_arithmetic(
                    "/",
                    _double(sub(left)),
                    exp.Nullif(this=_double(sub(right)), expression=exp.Literal.number(0)),
                    self.dialect,
                )
                if self._is_int(left) and self._is_int(right):
                    # Integer division truncates toward zero (PostgreSQL semantics).
                    return exp.Case(
                        ifs=[
                            exp.If(
                                this=exp.GTE(this=quotient, expression=exp.Literal.number(0)),
                                true=exp.Floor(this=quotient.copy()),
                            )
                        ],
                        default=exp.Ceil(this=quotient.copy()),
                    )
                return quotient
            case BinOp(op="%", left=left, right=right):
                # x % -1 is 0, like x % 1, but INT64_MIN % -1 overflows: use 1 (same answers).
                divisor = sub(right)
                safe = exp.Case(
                    ifs=[
                        exp.If(
                            this=exp.EQ(this=divisor.copy(), expression=exp.Literal.number(-1)),
                            true=exp.Literal.number(1),
                        )
                    ],
                    default=divisor.copy(),
                )
                return modulo(
                    sub(left),
                    exp.Nullif(this=safe, expression=exp.Literal.number(0)),
                    self.dialect,
                    floats=not (self._is_int(left) and self._is_int(right)),
                )
            case BinOp(op=op, left=left, right=right) if op in ("+", "-", "*"):
                return double_arithmetic(op, _double(sub(left)), _double(sub(right)), self.dialect)
            case BinOp(op=op, left=left, right=right):
                return exp.Paren(this=_BINARY[op](this=sub(left), expression=sub(right)))
            case Not(operand=o):
                return exp.Not(this=exp.Paren(this=sub(o)))
            case Neg(operand=o):
                return exp.Neg(this=exp.Paren(this=_double(sub(o))))
            case IsNull(operand=o, negated=neg):
                is_null = exp.Is(this=sub(o), expression=exp.Null())
                return exp.Paren(this=exp.Not(this=is_null) if neg else is_null)
            case InList(operand=o, items=items, negated=neg):
                in_list = exp.In(this=sub(o), expressions=[sub(i) for i in items])
                return _negated(in_list) if neg else exp.Paren(this=in_list)
            case Between(operand=o, low=lo, high=hi, negated=neg):
                between = exp.Between(this=sub(o), low=sub(lo), high=sub(hi))
                return _negated(between) if neg else exp.Paren(this=between)
            case Like(operand=o, pattern=p, negated=neg, case_insensitive=ci):
                like: exp.Expr = (exp.ILike if ci else exp.Like)(this=sub(o), expression=sub(p))
                return _negated(like) if neg else exp.Paren(this=like)
            case Func(name="ABS", args=args):
                return exp.Abs(this=_double(sub(args[0])))
            case Func(name="ROUND", args=(Col() | Lit() as whole, Lit(value=int(digits)))) if (
                digits < 0 and self._is_int(whole)
            ):
                # ROUND(INT64_MAX, -1) is 2^63 + 2: BIGINT would overflow, so an integer is
                # rounded in DECIMAL(38, 0), where every rounded BIGINT fits.
                return round_half(
                    _wide(sub(whole)), exp.Literal.number(digits), self.dialect, floats=False
                )
            case Func(name="ROUND", args=args):
                return round_half(
                    sub(args[0]),
                    sub(args[1]) if len(args) > 1 else None,
                    self.dialect,
                    floats=not self._is_int(args[0]),
                )
            case Func(name="FLOOR" | "CEIL" as name, args=args) if (
                self.dialect.floor_of_double_is_bigint and not self._is_int(args[0])
            ):
                # Spark's FLOOR and CEIL of a double return a BIGINT, which overflows (an error)
                # beyond 2^63; doubles from 2^52 on are whole already, and stay as they are.
                operand = _double(sub(args[0]))
                floored = exp.cast(_FUNCS[name](this=operand.copy()), exp.DataType.Type.DOUBLE)
                small = exp.LT(
                    this=exp.Abs(this=operand.copy()), expression=_number(Fraction(2**52))
                )
                return exp.Case(ifs=[exp.If(this=small, true=floored)], default=operand)
            case Func(name=name, args=args) if FUNCTIONS[name].max_args > 1:
                # Variadic (COALESCE, LEAST, GREATEST): the first argument, then the rest.
                return _FUNCS[name](this=sub(args[0]), expressions=[sub(a) for a in args[1:]])
            case Func(name=name, args=args):
                call: exp.Expr = _FUNCS[name](this=sub(args[0]))
                return call
            case Case(whens=whens, default=default):
                case = exp.Case()
                for cond, value in whens:
                    case = case.when(sub(cond), sub(value))
                if default is not None:
                    case = case.else_(sub(default))
                return case
        raise AssertionError(f"unknown expression node {expr!r}")

    def _is_int(self, expr: Expr) -> bool:
        try:
            return type_of(expr, self.fields) in ("int", "null")
        except KeyError:
            return False


def _clip(value: exp.Expr, low: Fraction, high: Fraction) -> exp.Expr:
    """``value`` clipped to ``[low, high]``, NULL staying NULL.

    Engines' GREATEST/LEAST skip NULL arguments (``GREATEST(NULL, 0)`` is 0), which would count a
    missing value as the lower bound. One CASE keeps NULL (every test is unknown, so it takes the
    ELSE, the value itself) and is cheaper than a NULL guard around LEAST/GREATEST (about twice as
    fast in DuckDB at 10M rows). NaN compares above every number in DuckDB, PostgreSQL and Spark:
    it is not BETWEEN the bounds, and becomes ``high``.

    The common case, a value within its bounds, is tested first, with one BETWEEN: DuckDB then
    selects rows once instead of twice and, when every row of a vector is within, passes the
    vector through untouched. The ELSE is the value rather than nothing: DuckDB then knows the
    result's range and nullness from the column's, and keeps its fast arithmetic for what follows
    (a sum of squares took 1.6 times as long without it; ``bench/clip.py``, ``docs/engines.md``).

    That form writes the value five times. A value other than a column (a clamp around a clipped
    aggregate, a bin index) keeps the two-test form, which writes it three times, so that nested
    clips do not grow the SQL five-fold per level; both forms give the same result on every row.
    """
    low_sql, high_sql = _number(low), _number(high)
    below = exp.If(this=exp.LT(this=value.copy(), expression=low_sql), true=low_sql.copy())
    above = exp.If(this=exp.GT(this=value.copy(), expression=high_sql), true=high_sql.copy())
    if not isinstance(value, exp.Column):
        return exp.Case(ifs=[below, above], default=value.copy())
    within = exp.If(
        this=exp.Between(this=value.copy(), low=low_sql.copy(), high=high_sql.copy()),
        true=value.copy(),
    )
    return exp.Case(ifs=[within, below, above], default=value.copy())


_SUM_SPAN = Fraction(2**40)
"""A centred sum's clamp is dropped when every bound is within 2^40 grid steps of 0."""

_SQUARE_SPAN = Fraction(2**16)
"""A sum of squares' clamp is dropped when every bound is within 2^16 reaches of 0."""


def _rounding_below(m: Measurement, span: Fraction) -> bool:
    """Whether doubles keep a clipped row's grid value within 0.05 of ``±row_units``: no clamp needed.

    The value is ``(clip(x) − c)/g`` computed as ``fl(fl(x)·2^k − fl(c/g))`` (a sum) or
    ``fl((fl(x) − fl(c))·2^a)²·2^b`` (a sum of squares), with ``x`` already clipped to the bounds
    written as doubles (NaN and ±∞ become a bound, NULL stays NULL). The exact value lies within
    ``row_units`` (the reach over the grid, rounded up). Each double rounds by at most 2^-53 of
    its magnitude and scaling by a power of two is exact, so with ``M = max(|low|, |high|)``:

    * sum: the error is at most ``3·2^-53·M/g + 2^-53·row_units <= 2^-11`` when ``M/g <= 2^40``;
    * square: the difference's error is at most ``3·2^-53·M`` and the square's at most
      ``2·reach·3·2^-53·M/g2 + 2^-53·row_units``; with ``reach²/g2 <= 2^30`` and
      ``M <= 2^16·reach`` that is below ``6·2^-7 < 0.05``.

    Subnormal rounding is absolute (2^-1075), so the grid (the reach, for squares) must not be
    tiny: ``g >= 2^-1000`` (``reach >= 2^-400``) keeps it far below a grid step.

    Either way ``FLOOR(v + 0.5)`` stays within ``[−row_units, row_units]`` (``[0, row_units]``),
    so the clamp to those bounds, which costs as much as the clip itself, could never bind;
    without the condition (a centre far from 0 relative to the reach, huge bounds) it is kept.
    """
    assert m.bounds is not None
    top = max(abs(m.bounds[0]), abs(m.bounds[1]))
    if m.row_units > 2**31:
        return False
    if m.kind == "sum":
        return m.granularity >= Fraction(1, 2**1000) and top <= span * m.granularity
    reach = max(abs(m.bounds[0] - m.center), abs(m.bounds[1] - m.center))
    return reach >= Fraction(1, 2**400) and top <= span * reach


_BIGINT_MIN, _BIGINT_MAX = -(2**63), 2**63 - 1
_MAX_FACTOR = 1000
"""Powers of two up to 2^±1000 are normal doubles: a scaling by any of them is exact."""


def _bigint_bounds(m: Measurement) -> bool:
    """Whether ``m`` reads integers whose bounds fit BIGINT (so a clipped value casts safely)."""
    assert m.bounds is not None
    return m.arg_type == "int" and all(
        b.denominator == 1 and _BIGINT_MIN <= b <= _BIGINT_MAX for b in m.bounds
    )


def _log2(power: Fraction) -> int:
    """The exponent of a power of two given as a Fraction.

    Example:
        >>> _log2(Fraction(1, 8)), _log2(Fraction(4))
        (-3, 2)
    """
    if power >= 1:
        return power.numerator.bit_length() - 1
    return -(power.denominator.bit_length() - 1)


def _scaled(value: exp.Expr, exponent: int, dialect: Dialect) -> exp.Expr:
    """``value`` (a DOUBLE) times ``2**exponent``, as factors that are each a normal double.

    Scaling by a power of two is exact unless it overflows or underflows. The grid of very fine
    bounds (``[0, 1e-300]``) needs a scale beyond the largest double, so it is split. PostgreSQL
    raises when a product underflows to zero, so there a factor below 1 goes through its
    IEEE-safe multiplication.

    Example:
        >>> _scaled(exp.column("x"), 3, DUCKDB).sql("duckdb")
        '(x * CAST(8 AS DOUBLE))'
    """
    out = value
    while exponent:
        step = max(-_MAX_FACTOR, min(_MAX_FACTOR, exponent))
        exponent -= step
        factor = (
            _double(exp.Literal.number(2**step))
            if 0 <= step <= 62
            else _double_text(repr(2.0**step))
        )
        if step < 0 and not dialect.ieee_doubles:
            out = double_arithmetic("*", out, factor, dialect)
        else:
            out = exp.Paren(this=exp.Mul(this=out, expression=factor))
    return out


def _double_literal(x: Fraction) -> exp.Expr:
    """``x`` rounded to the nearest double, as a DOUBLE literal (any magnitude up to 2^1024)."""
    if x.denominator == 1 and abs(x) < 2**53:
        return _number(x)
    node = _double_text(repr(float(abs(x))))
    return exp.Neg(this=node) if x < 0 else node


def _wide(value: exp.Expr) -> exp.Expr:
    """An integer widened to DECIMAL(38, 0) before a product that may pass 2^63."""
    return exp.cast(value, exp.DataType.build("DECIMAL(38, 0)"))


def _half_up(value: exp.Expr) -> exp.Expr:
    """FLOOR(x + 0.5) as a BIGINT, the same on every engine.

    Engines round halves differently (away from zero, to even) and the exact answer must be
    bit-identical everywhere; |x| <= 2**31, so x + 0.5 is exact.
    """
    return exp.cast(
        exp.Floor(this=exp.Add(this=value, expression=exp.Literal.number("0.5"))),
        exp.DataType.Type.BIGINT,
    )


def _negated(node: exp.Expr) -> exp.Expr:
    return exp.Not(this=exp.Paren(this=node))


@cache
def _writer(name: str) -> GlotDialect:
    return GlotDialect.get_or_raise(name)


def _sql(node: exp.Expr, dialect: Dialect) -> str:
    """``node`` written in ``dialect``, without sqlglot's defensive copy of the tree.

    sqlglot copies a tree before writing it because some dialects' writers first rewrite
    constructs in place (QUALIFY, DISTINCT ON, UNNEST, semi-joins, CONNECT BY); the trees written
    here hold none of them, so writing leaves them as they are, and the copy — a fifth of the
    time spent writing a query's SQL — is skipped. The SQL snapshot (``tests/sql``) shows the
    text is unchanged.
    """
    return _writer(dialect.name).generate(node, copy=False)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _col(name: str) -> exp.Column:
    return exp.Column(this=exp.to_identifier(name, quoted=True))


def _double(node: exp.Expr) -> exp.Expr:
    return exp.cast(node, exp.DataType.Type.DOUBLE)


def _number(x: Fraction) -> exp.Expr:
    """``x`` as a SQL literal: an integer within BIGINT exactly, anything else as a double.

    A longer integer literal is a DECIMAL in Spark, which refuses more than 38 digits (the
    largest double has 309), so it is written as the nearest double instead.
    """
    if x.denominator == 1 and abs(x) <= _BIGINT_MAX:
        node: exp.Expr = exp.Literal.number(abs(x.numerator))
    else:
        text = repr(float(min(abs(x), DOUBLE_MAX)))
        node = _double_text(text) if "e" in text or x.denominator == 1 else exp.Literal.number(text)
    return exp.Neg(this=node) if x < 0 else node


def _double_text(text: str) -> exp.Expr:
    """A double written in exponent form, cast from a string.

    Spark reads a numeric literal such as ``1e-300`` as a DECIMAL of 300 digits and refuses it
    (at most 38); ``CAST('1e-300' AS DOUBLE)`` means the same double on every engine.
    """
    return _double(exp.Literal.string(text))


def _key_literal(value: Key) -> exp.Expr:
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int | float):
        return exp.Literal.number(repr(value) if isinstance(value, float) else value)
    return exp.Literal.string(str(value))
