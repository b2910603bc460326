"""Contribution bounding in SQL: keep at most ``max_rows`` rows in ``max_groups`` groups per unit.

Which rows and groups are kept is decided by ranking keyed hashes, so the choice favours no data
value and depends only on each unit's own rows. Ranking is the costliest step of a query, so only
the units over their caps are ranked (:func:`bounded`), and where every measurement adds up over
parts, each unit is aggregated once (:func:`bounded_aggregate`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache

from sqlglot import exp

from dalenius.core.catalog import Key
from dalenius.core.dialect import Dialect
from dalenius.plan.nodes import GroupKey
from dalenius.sql.emit.dialects import hash_ties, keyed_hash
from dalenius.sql.emit.writing import _among_keys, _col, _key_literal, _quoted, _sql


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
    -0.0 and 0.0, hash alike: :func:`dalenius.sql.emit.dialects.keyed_hash`). Whether a unit is ranked
    depends on its own rows only. On Spark every row is ranked (see below), with no ``WITH``
    clause (:attr:`~dalenius.core.dialect.Dialect.ranks_every_row`).

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
    # With max_groups >= max_rows, any max_rows rows are in few enough groups: only the rows
    # are counted.
    checked = list(zip(keys, key_types, strict=True)) if max_groups < max_rows else []
    within = _within_caps([_compared(k, kind) for k, kind in checked], max_rows)
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


def capped_rows(
    table: str,
    columns: list[str],
    *,
    unit: str,
    types: Mapping[str, str],
    max_rows: int,
    dialect: Dialect,
    salt: int,
) -> str:
    """``SELECT columns FROM table`` keeping at most ``max_rows`` rows of each privacy unit.

    The rows a release publishes one by one (record perturbation) are capped per unit exactly
    as a query's rows are (:func:`bounded`: ranked by a hash keyed with ``salt``, each unit's
    choice its own; rows without a unit id left out), so one unit changes at most ``max_rows``
    of them. ``types`` gives the catalog type of the unit and of every column (for the hash).
    """
    needed = list(dict.fromkeys([unit, *columns]))
    relation = exp.select(*[_col(c) for c in needed]).from_(
        exp.to_table(_quoted(table)), copy=False
    )
    prefix, source = bounded(
        relation,
        unit=unit,
        row_fields=columns,
        keys=[],
        key_types=[],
        types=types,
        max_rows=max_rows,
        max_groups=1,
        dialect=dialect,
        salt=salt,
        conditions=[],
    )
    selected = ", ".join(_sql(_col(c), dialect) for c in columns)
    return f"{prefix}SELECT {selected} FROM {source}"


def bounded_aggregate(
    relation: exp.Select,
    *,
    unit: str,
    row_fields: list[str],
    keys: list[exp.Expr],
    group_keys: list[GroupKey],
    measures: list[tuple[str, exp.Expr]],
    max_rows: int,
    max_groups: int,
    rank: Callable[..., exp.Select],
    dialect: Dialect,
    keep_input: bool = False,
    per_unit_keys: bool = False,
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

    The units over their caps read ``__input`` a second time. With ``keep_input`` (the relation
    joins, or filters by a subquery) it is ``MATERIALIZED``: computing such a relation again cost
    more than keeping it (TPC-H Q18, Q19 and Q21 at SF 1 in DuckDB: 0.42 to 0.55 times the time
    with it kept). A plain scan is read again instead (keeping Q1's six million lines cost 1.12
    times the time), unless its WHERE is estimated to keep few rows
    (:mod:`dalenius.sql.emit.selectivity`; Q6 at SF 10, 1.8% of the lines: 0.79 times).

    With ``max_groups >= max_rows`` any ``max_rows`` rows meet the group cap, so a unit is within
    its caps when it has at most ``max_rows`` rows, in any number of groups: its parts are then
    computed per (unit, group) cell, and an aggregation of the cells sums each unit's rows.
    That second aggregation is as large as the first when most units have one group, so where
    they are expected to (``per_unit_keys``: the catalog declares every key column ``per_unit``;
    or ``max_rows`` is 1, where a unit within the cap has one row), the unit is aggregated once,
    and one with several groups is read again with those over the cap. Ranking keeps all of its
    rows when it has at most ``max_rows`` of them (``max_groups >= max_rows`` ranks rows only),
    so the kept rows are those of the cells form, whether the declaration holds or not
    (the census visits by state at 10M persons in DuckDB: 0.69 times the time of the cells).

    On Spark, which may evaluate a CTE once per reference, the split is kept by the executor
    (:attr:`~dalenius.core.dialect.Dialect.kept_by_executor`), the only expression kept; with
    ``keep_input`` Spark ranks every row in one read instead (``None``).

    Long because it writes one statement whose parts (the per-unit partials, the units over
    their caps ranked, the per-group totals, the keys mapped back from their list positions)
    share the grouping, the listed keys and the dialect; the rows and the lists are
    :func:`_unit_rows`.
    """
    split = _partials([m for _, m in measures])
    # An executor that keeps an expression by a job of its own keeps only the small split; an
    # input it would have to keep (a join, a subquery) is read once and every row ranked.
    if split is None or (dialect.kept_by_executor and keep_input):
        return None
    parts, totals = split
    unit_col = _col(unit)
    rows, lists, computed = _unit_rows(relation, unit, row_fields, keys, group_keys, dialect)
    listed = list(lists)
    # What each key is grouped by: the key, its position in its public list, or the column its
    # expression was computed into. Constant keys (GROUP BY 'all') are one group for every unit,
    # and selected only at the end.
    read_keys = [exp.column(f"__e{i}") if i in computed else key for i, key in enumerate(keys)]
    grouped = [
        (i, exp.column(f"__i{i}") if i in listed else read_keys[i])
        for i, key in enumerate(keys)
        if key.find(exp.Column) is not None
    ]
    compared = {i: _compared(by, "int" if i in listed else group_keys[i].type) for i, by in grouped}
    # Positions in a list are never NULL (the join drops NULL keys): they are compared first.
    checks = [compared[i] for i, _ in grouped if i in listed]
    checks += [compared[i] for i, _ in grouped if i not in listed]
    unit_sql = _sql(unit_col, dialect)
    part_sql = [_sql(p, dialect) for p in parts]
    by_sql = [_sql(by, dialect) for _, by in grouped]
    # A kept (materialised) input is read once whatever refers to it: the units over their
    # caps are then found by counting rows alone, and the others aggregated straight by group.
    counted = keep_input and max_groups >= max_rows
    cells = (
        bool(grouped)
        and max_groups >= max_rows
        and not counted
        and not _one_group_expected(per_unit_keys, max_rows, dialect)
    )
    if counted:
        units_sql = (
            f"SELECT {unit_sql} AS __u, COUNT(*) > {max_rows} AS __over_caps FROM __input"
            f" GROUP BY {unit_sql}"
        )
    elif cells:
        units_sql, rows_part = _cells(
            unit_sql,
            [i for i, _ in grouped],
            by_sql,
            part_sql,
            distribute=dialect.kept_by_executor,
        )
    else:
        units = [
            f"{unit_sql} AS __u",
            f"{_sql(exp.not_(_within_caps(checks, max_rows, len(listed)), copy=False), dialect)}"
            " AS __over_caps",
            *(f"MIN({_sql(compared[i], dialect)}) AS __lo{i}" for i, _ in grouped),
            *(f"{p} AS __p{j}" for j, p in enumerate(part_sql)),
        ]
        units_sql = f"SELECT {', '.join(units)} FROM __input GROUP BY {unit_sql}"

    def value(i: int) -> str:
        # A boolean key was compared as 0/1: its value is whether the minimum is 1.
        boolean = not cells and i not in listed and group_keys[i].type == "bool"
        return f"(__lo{i} = 1)" if boolean else f"__lo{i}"

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
    split_sql = (
        "SELECT __u AS __ou FROM __units WHERE __over_caps"
        if counted
        else f"SELECT {by_group}, {summed} FROM (SELECT {marked} FROM __units) AS __w"
        f" GROUP BY {by_group}"
    )
    units_cte, split_sql = (
        _split_cells(
            units_sql,
            rows_part,
            max_rows,
            [i for i, _ in grouped],
            ps,
            window=dialect.kept_by_executor,
        )
        if cells
        else (f"__units AS {hint}({units_sql})", split_sql)
    )
    prefix = (
        f"WITH __input AS {'MATERIALIZED ' if keep_input else hint}({rows}), "
        f"{units_cte}, __split AS MATERIALIZED ({split_sql}) "
    )
    capped = rank(
        _over_rows(unit_sql, dialect.name, dialect.kept_by_executor).copy(),
        keys=read_keys,
        columns=_read_columns(
            [by for _, by in grouped] + parts,
            [unit, *row_fields, *(f"__i{i}" for i in listed), *(f"__e{i}" for i in computed)],
        ),
    )
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
    if counted:
        within_part = (
            f"SELECT {ranked_part} FROM __input AS __s WHERE NOT EXISTS"
            f" (SELECT 1 FROM __split AS __o WHERE __o.__ou = __s.{unit_sql})"
        ) + (" GROUP BY " + ", ".join(by_sql) if by_sql else "")
    total_sql = [
        f"{_sql(t, dialect)} AS {_quoted(name)}"
        for (name, _), t in zip(measures, totals, strict=True)
    ]
    body = f"SELECT {', '.join([*gs, *total_sql])} FROM ({within_part} UNION ALL {ranked_sql}) AS __parts"
    if gs:
        body += " GROUP BY " + ", ".join(gs)
    outputs = [_output_key(i, key, i in listed, dialect) for i, key in enumerate(keys)]
    outputs += [f"__t.{_quoted(name)}" for name, _ in measures]
    back = "".join(f" JOIN {lists[i]} ON __t.__g{i} = __kv{i}.__i" for i in listed)
    return f"{prefix}SELECT {', '.join(outputs)} FROM ({body}) AS __t{back}"


def _one_group_expected(per_unit_keys: bool, max_rows: int, dialect: Dialect) -> bool:
    """Whether a unit within its caps is expected to have one group, so that aggregating each
    unit once beats the (unit, group) cells: the catalog says so of every key column, or a unit
    within the caps has one row. Spark keeps its cells: it sums each unit's cells by a window
    beside them, in the one job it keeps (:func:`_split_cells`).
    """
    return (per_unit_keys or max_rows == 1) and not dialect.kept_by_executor


def _read_columns(expressions: list[exp.Expr], columns: list[str]) -> list[str]:
    """The ``columns`` (in order, each once) that ``expressions`` read; the first if none: the
    kept rows need only the columns their groups and parts read.
    """
    read = {c.name for e in expressions for c in e.find_all(exp.Column)}
    return [c for c in dict.fromkeys(columns) if c in read] or columns[:1]


def _output_key(i: int, key: exp.Expr, listed: bool, dialect: Dialect) -> str:
    """Key ``i`` of the answer: mapped back from its list position, a constant, or grouped."""
    if listed:
        return f"__kv{i}.__v AS __k{i}"
    if key.find(exp.Column) is None:
        return f"{_sql(key, dialect)} AS __k{i}"
    return f"__t.__g{i} AS __k{i}"


def _cells(
    unit_sql: str,
    indexes: list[int],
    by_sql: list[str],
    part_sql: list[str],
    *,
    distribute: bool = False,
) -> tuple[str, str]:
    """The per-unit statement of :func:`bounded_aggregate` when only rows are capped: one row
    per (unit, group) with the group's parts, and the part that counts the cell's rows (a
    ``COUNT(*)`` part serves, else one is added: each aggregate of the cells costs time).

    Which units are over the cap is read from the cells by a second aggregation (their rows
    summed per unit), not by a window over them: a window sorts the cells by unit, and the
    aggregation and an anti-join with the few units over the cap cost less (TPC-H Q1 at SF 1
    0.87 times the time, the arrivals' Q9 at 1M persons 0.90 times, in DuckDB).

    With ``distribute`` (Spark, whose split sums each unit's rows by a window over the cells:
    :func:`_split_cells`), the rows are first distributed by unit (``DISTRIBUTE BY``). The
    aggregation by (unit, group) and the window by unit then need no shuffle of their own: one
    exchange of the rows replaces two of the cells, and the window's sort of the cells by unit
    is done within each partition.
    """
    rows_part = next((f"__p{j}" for j, p in enumerate(part_sql) if p == "COUNT(*)"), None)
    cell = [
        f"{unit_sql} AS __u",
        *(f"{b} AS __lo{i}" for b, i in zip(by_sql, indexes, strict=True)),
        *([] if rows_part else ["COUNT(*) AS __n"]),
        *(f"{p} AS __p{j}" for j, p in enumerate(part_sql)),
    ]
    source = f"(SELECT * FROM __input DISTRIBUTE BY {unit_sql}) AS __d" if distribute else "__input"
    statement = f"SELECT {', '.join(cell)} FROM {source} GROUP BY {', '.join([unit_sql, *by_sql])}"
    return statement, rows_part or "__n"


def _split_cells(
    cells_sql: str,
    rows_part: str,
    max_rows: int,
    indexes: list[int],
    parts: list[str],
    *,
    window: bool = False,
) -> tuple[str, str]:
    """The cells' CTEs and the split of :func:`bounded_aggregate`'s cells form: the cells kept
    (they are read twice), the units over ``max_rows`` (their rows summed over their cells),
    and the others' parts summed by group, followed by one row per unit over the cap.

    With ``window`` (an executor that keeps an expression by a job of its own), the cells are
    read once: a window sums each unit's rows over its cells beside them, and the split groups
    them by the unit if it is over the cap, else by the group. Keeping ten million cells took
    Spark longer than the whole query without them (the census visits at 10M persons: 37 s
    against 13 s).
    """
    los = [f"__lo{i}" for i in indexes]
    gs = [f"__g{i}" for i in indexes]
    if window:
        over = f"__total > {max_rows}"
        ctes = (
            f"__units AS ({cells_sql}), __totals AS (SELECT *, SUM({rows_part}) OVER "
            "(PARTITION BY __u) AS __total FROM __units)"
        )
        keys = [f"CASE WHEN {over} THEN __u END AS __ou"]
        keys += [
            f"CASE WHEN {over} THEN NULL ELSE {lo} END AS {g}"
            for lo, g in zip(los, gs, strict=True)
        ]
        by = ", ".join(["__ou", *gs])
        split = (
            f"SELECT {by}, {', '.join(f'SUM({p}) AS {p}' for p in parts)} FROM "
            f"(SELECT {', '.join([*keys, *parts])} FROM __totals) AS __w GROUP BY {by}"
        )
        return ctes, split
    ctes = (
        f"__units AS MATERIALIZED ({cells_sql}), __over AS MATERIALIZED (SELECT __u AS __ou"
        f" FROM __units GROUP BY __u HAVING SUM({rows_part}) > {max_rows})"
    )
    split = (
        f"SELECT NULL AS __ou, {', '.join(f'{lo} AS {g}' for lo, g in zip(los, gs, strict=True))}, "
        f"{', '.join(f'SUM({p}) AS {p}' for p in parts)} FROM __units WHERE NOT EXISTS"
        " (SELECT 1 FROM __over WHERE __over.__ou = __units.__u)"
        f" GROUP BY {', '.join(los)} UNION ALL SELECT __ou, {', '.join('NULL' for _ in gs)},"
        f" {', '.join('NULL' for _ in parts)} FROM __over"
    )
    return ctes, split


@cache
def _over_rows(unit_sql: str, dialect: str, broadcast: bool = False) -> exp.Select:
    """The rows of the units over their caps, from ``__input`` (parsed once per unit column and
    dialect: parsing it was a tenth of the time spent writing a query; callers copy it); with
    ``broadcast``, the list of those units is broadcast to the read (a Spark hint).
    """
    hint = "/*+ BROADCAST(__split) */ " if broadcast else ""
    return (
        exp.select("__s.*")
        .from_("__input AS __s")
        .where(
            f"__s.{unit_sql} IN (SELECT {hint}__ou FROM __split WHERE NOT __ou IS NULL)",
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
) -> tuple[str, dict[int, str], list[int]]:
    """The rows a bounded query reads, the public lists joined to them by key index, and the
    indexes of the keys computed into columns.

    Rows with a NULL unit, or a key outside its public list, are left out before any unit is
    bounded (they would use up its quota). A text key with a public list gets its position in
    the list as column ``__i<index>``, from a join with the list that also does the filtering.
    Any other key that is an expression of the row (not a field) is computed once, as column
    ``__e<index>``: the statement reads it in the unit's check, its groups, the ranking's hash
    and its order, and written out in each of them the private bounds' binary search made a
    statement of 114 KB that Spark took 28 s to plan on a thousand rows.
    """
    listed = [
        i
        for i, (k, g) in enumerate(zip(keys, group_keys, strict=True))
        if g.keys
        and None not in g.keys
        and g.type == "str"
        and g.from_table is None  # a public table's values: no list in the SQL
        and k.find(exp.Column) is not None
    ]
    lists = {
        i: _values_list(
            tuple(k for k in group_keys[i].keys or () if k is not None), f"__kv{i}", dialect
        )
        for i in listed
    }
    where: list[exp.Expr] = [exp.Not(this=exp.Is(this=_col(unit), expression=exp.Null()))]
    for i, (key, group) in enumerate(zip(keys, group_keys, strict=True)):
        if group.keys is not None and group.from_table is None and i not in listed:
            where.append(_among_keys(key, group.keys))
    computed = [
        i
        for i, k in enumerate(keys)
        if i not in listed and not isinstance(k, exp.Column) and k.find(exp.Column) is not None
    ]
    needed = [unit, *(f for f in row_fields if f != unit)]
    columns = [_sql(_col(f), dialect) for f in needed]
    columns += [f"__kv{i}.__i AS __i{i}" for i in listed]
    columns += [f"{_sql(keys[i], dialect)} AS __e{i}" for i in computed]
    joins = "".join(f" JOIN {lists[i]} ON {_sql(keys[i], dialect)} = __kv{i}.__v" for i in listed)
    rows = (
        f"SELECT {', '.join(columns)} FROM ({_sql(relation, dialect)}) AS __in{joins}"
        f" WHERE {_sql(exp.and_(*where, copy=False), dialect)}"
    )
    return rows, lists, computed


def _values_list(keys: tuple[Key, ...], name: str, dialect: Dialect) -> str:
    """A public key list as a relation ``name(__v, __i)``: each key and its position.

    Each key appears once, whatever the list: a key listed twice would join each of its rows
    twice.

    Example:
        >>> from dalenius.core.dialect import DUCKDB
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
    columns: Sequence[str] = (),
) -> exp.Select:
    """The rows of ``source`` in each unit's first ``max_groups`` groups and first ``max_rows`` rows.

    Groups and rows are ranked by keyed hashes of the unit's id with the group key, and with
    the row. The id is part of the hash so that each unit's choice is its own: with one key per
    query for every unit, every unit over its cap would keep the same "lucky" groups and values,
    a bias of the whole answer toward them (each unit's choice still depends on its own rows only).

    ``columns`` names the columns of ``source`` the caller reads from the kept rows: where only
    rows are ranked, the dialect has a top-n aggregate and no two distinct rows can hash alike,
    the rows are kept by :func:`_first_rows` instead of a window (the same rows, with only those
    columns).
    """
    current: exp.Expr = source.subquery("__filtered", copy=False)
    rank_filter: exp.Expr | None = None
    unit_typed = (unit_col, types[unit_col.name])
    row_typed = [unit_typed, *((_col(f), types[f]) for f in row_fields)]
    ranks_groups = bool(keys) and max_groups < max_rows
    if columns and dialect.top_n_aggregate and not ranks_groups and not hash_ties(row_typed):
        order = keyed_hash(dialect, salt + 1, row_typed)
        return _first_rows(current, unit_col, list(columns), order, max_rows)
    if ranks_groups:
        # (With max_groups >= max_rows the cap on groups is met by any max_rows rows.)
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


def _first_rows(
    source: exp.Expr, unit_col: exp.Column, columns: list[str], order: exp.Expr, max_rows: int
) -> exp.Select:
    """Each unit's first ``max_rows`` rows of ``source`` by ``order``, kept by one aggregation.

    ``ARG_MIN(row, order, n)`` keeps a unit's n rows of least ``order`` in a heap as the unit's
    rows are aggregated; unnested, they are the rows ``ROW_NUMBER() OVER (PARTITION BY unit
    ORDER BY order) <= n`` keeps, without sorting every row of the unit. Rows of equal ``order``
    are equal in every hashed column (the caller makes sure no double's tie-break is needed), so
    which of them is kept cannot change an answer. The columns travel as the fields ``f0``,
    ``f1``, … of a struct, named back after the unnesting.
    """
    fields = [
        exp.PropertyEQ(this=exp.to_identifier(f"f{i}"), expression=_col(c))
        for i, c in enumerate(columns)
    ]
    kept = exp.ArgMin(
        this=exp.Struct(expressions=fields),
        expression=order,
        count=exp.Literal.number(max_rows),
    )
    top = (
        exp.select(exp.alias_(exp.Unnest(expressions=[kept]), "__k", copy=False))
        .from_(source, copy=False)
        .group_by(unit_col.copy(), copy=False)
    )
    named = [
        exp.alias_(
            exp.Dot(this=exp.column("__k"), expression=exp.to_identifier(f"f{i}")), _col(c).this
        )
        for i, c in enumerate(columns)
    ]
    return exp.select(*named).from_(top.subquery("__top", copy=False), copy=False)
