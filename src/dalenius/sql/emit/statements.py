"""Every statement of one query: the main aggregate, one per histogram, the degree counts.

:func:`exact_queries` renders the relation once and assembles each statement around it, bounded
(:mod:`.bounding`) when the privacy unit is an id column, with the measurements written by the
:class:`~dalenius.sql.emit.expressions.Compiler`.
"""

from __future__ import annotations

from dataclasses import dataclass, is_dataclass
from dataclasses import fields as dataclass_fields
from functools import partial
from typing import Any

from sqlglot import exp

from dalenius.core.dialect import DUCKDB, Dialect, as_dialect
from dalenius.plan.derive import FieldInfo
from dalenius.plan.expr import Col, Lit, columns
from dalenius.plan.nodes import (
    VECTOR_KINDS,
    DPQuery,
    Field,
    Filter,
    GroupKey,
    Project,
    Query,
    Relation,
    Scan,
    all_fields,
)
from dalenius.sql.emit.bounding import _ranked, bounded, bounded_aggregate
from dalenius.sql.emit.expressions import Compiler
from dalenius.sql.emit.selectivity import KEEP_SHARE, estimated_share
from dalenius.sql.emit.writing import _among_keys, _col, _sql


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
    frequencies: tuple[str, ...] = ()
    """For a join bounded by elastic sensitivity, the statements giving each side's largest key
    frequency after its unit caps (one row, one integer each; :mod:`dalenius.plan.elastic`)."""

    def all(self) -> str:
        """Every statement, for explain output."""
        return ";\n".join([self.main, *(sql for _, sql in self.histograms), *self.frequencies])


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
        salt=salt,
    )
    relation = compiler.relation(query.relation)
    keys = [compiler.expression(k.expr) for k in query.group_by]
    conditions: list[exp.Expr] = []
    for key, sql_key in zip(query.group_by, keys, strict=True):
        if key.keys is not None and key.from_table is None:
            # (A public table's values: every joined row holds one, no filter needed.)
            conditions.append(_among_keys(sql_key, key.keys))
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
            max_groups=bounding.max_groups,
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
            keep_input=_keep_input(query.relation),
            per_unit_keys=_per_unit_keys(query),
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
    return ExactSQL(
        main=main,
        histograms=tuple(histograms),
        reads=compiler.reads(),
        frequencies=tuple(_sql(f, dialect) for f in compiler.frequencies),
    )


def _per_unit_keys(query: Query) -> bool:
    """Whether every column the GROUP BY keys read is one the catalog declares ``per_unit``.

    Each unit then has, as the custodian says, one value of every key: one group.
    """
    declared = {f.id for f in all_fields(query.relation) if f.per_unit}
    read = [columns(k.expr) for k in query.group_by]
    return bool(read) and all(names and names <= declared for names in read)


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
        elif isinstance(value, Col):
            found.add(value.name)  # a reference holds one name (its index, if any, is none)
        elif isinstance(value, Lit):
            continue  # a constant names nothing (a correlated subquery's CASE holds thousands)
        elif isinstance(value, tuple | list | frozenset | set):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.items())
        elif isinstance(value, GroupKey):
            # Its key list holds values, not names (a public table's up to 100,000 of them).
            stack.extend(getattr(value, f.name) for f in _GROUP_KEY_NAMES)
        elif is_dataclass(value) and not isinstance(value, Field | type):
            stack.extend(getattr(value, f.name) for f in dataclass_fields(value))
    return frozenset(found)


_GROUP_KEY_NAMES = tuple(f for f in dataclass_fields(GroupKey) if f.name != "keys")
"""The fields of a group key :func:`read_names` reads: all but its list of key values."""


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


def _keep_input(relation: Relation) -> bool:
    """Whether a bounded query keeps its input rather than reading it again: a join or a
    subquery costs more to compute again than to keep; one table's rows are kept when its WHERE
    leaves few of them (estimated from public bounds alone, :mod:`dalenius.sql.emit.selectivity`).
    """
    if not _scanned(relation):
        return True
    infos = {f.id: FieldInfo(f.type, f.bounds, f.keys, f.nullable) for f in all_fields(relation)}
    return estimated_share(relation, infos) <= KEEP_SHARE


def _scanned(relation: Relation) -> bool:
    """Whether ``relation`` is one table's rows, filtered or projected: cheap to read again.

    Example:
        >>> from dalenius.plan.expr import Col
        >>> from dalenius.plan.nodes import Join
        >>> t = Scan("t", "t", ())
        >>> _scanned(Filter(t, Col("t__x"))), _scanned(Join(t, Scan("p", "p", ()), "t__k", "p__k", "inner", 1))
        (True, False)
    """
    match relation:
        case Scan():
            return True
        case Filter(child=c) | Project(child=c):
            return _scanned(c)
    return False
