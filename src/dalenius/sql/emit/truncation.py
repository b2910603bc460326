"""A side of a join of two private tables, truncated before the join (Tumult's strategy).

The join's stability (:func:`dalenius.plan.nodes.truncated_stability`) holds only if each side
keeps at most ``R`` rows per unit (an ``id`` side) and then at most ``τ`` rows per join-key value,
where *which* rows are kept is decided by a fixed order of the rows themselves: removing a unit
then removes its own kept rows and lets in at most as many rows of others, the next in that
order. The order is a keyed hash of the row (:func:`~dalenius.sql.emit.dialects.keyed_hash`, the
same on every engine, its key drawn per query), with the row's doubles breaking ties, so rows
that tie are equal in every column the query reads and interchangeable for it.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from dalenius.core.dialect import Dialect
from dalenius.sql.emit.dialects import hash_ties, keyed_hash
from dalenius.sql.emit.writing import _col


def truncated_side(
    side: exp.Select,
    *,
    columns: list[str],
    types: Mapping[str, str],
    key: str,
    per_key: int | None,
    unit: str | None,
    unit_rows: int | None,
    dialect: Dialect,
    salt: int,
    tag: str,
) -> exp.Select:
    r"""``side``'s rows, at most ``unit_rows`` per ``unit`` and then at most ``per_key`` per ``key``.

    ``columns`` are the field ids the query reads of the side (the row's identity for the
    hash), ``types`` their hash kinds. Rows with a NULL key (which join nothing) or a NULL unit
    id (which belong to no known unit, as in contribution bounding) are left out first, so they
    use up no quota. ``tag`` makes the rank columns' names unique in the statement (they stay
    in the side's output, unread) and is hashed with each row, so each side's order is its own.

    Example:
        >>> from dalenius.core.dialect import DUCKDB
        >>> side = exp.select("*").from_("t")
        >>> sql = truncated_side(side, columns=["k"], types={"k": "int"}, key="k", per_key=2,
        ...     unit=None, unit_rows=None, dialect=DUCKDB, salt=1, tag="0").sql("duckdb")
        >>> sql.count("ROW_NUMBER() OVER (PARTITION BY"), "'join side 0'" in sql
        (1, True)
        >>> sql.endswith("WHERE __key_rank0 <= 2")
        True
    """
    # The query's hash key (``salt`` and ``salt + 1``, the two numbers a cached statement is
    # given afresh per query, see dalenius.engine.plans) with the side's tag hashed first: each
    # side's order is its own, and none is contribution bounding's.
    typed: list[tuple[exp.Expr, str]] = [(exp.Literal.string(f"join side {tag}"), "str")]
    typed += [(_col(c), types[c]) for c in columns]
    present = [exp.Not(this=exp.Is(this=_col(key), expression=exp.Null()))]
    if unit is not None:
        present.append(exp.Not(this=exp.Is(this=_col(unit), expression=exp.Null())))
    current = (
        exp.select(exp.Star())
        .from_(side.subquery(f"__side{tag}", copy=False), copy=False)
        .where(exp.and_(*present), copy=False)
    )
    if unit is not None and unit_rows is not None:
        current = _kept(current, unit, unit_rows, typed, dialect, salt, f"__unit_rank{tag}")
    if per_key is None:  # elastic sensitivity: the unit caps only
        return current
    return _kept(current, key, per_key, typed, dialect, salt + 1, f"__key_rank{tag}")


def key_frequency(side: exp.Select, key: str) -> exp.Select:
    """The most rows of ``side`` sharing one value of ``key`` (0 when it has none): the ``mf`` of
    elastic sensitivity (:mod:`dalenius.plan.elastic`).
    """
    counts = (
        exp.select(exp.alias_(exp.Count(this=exp.Star()), "__n", copy=False))
        .from_(side.subquery("__sides", copy=False), copy=False)
        .group_by(_col(key), copy=False)
    )
    top = exp.Coalesce(this=exp.Max(this=exp.column("__n")), expressions=[exp.Literal.number(0)])
    return exp.select(exp.alias_(top, "__mf", copy=False)).from_(
        counts.subquery("__counts", copy=False), copy=False
    )


def _kept(
    source: exp.Select,
    partition: str,
    limit: int,
    typed: list[tuple[exp.Expr, str]],
    dialect: Dialect,
    salt: int,
    name: str,
) -> exp.Select:
    """The first ``limit`` rows of each ``partition`` value of ``source``, in the hash order."""
    rank = exp.Window(
        this=exp.Anonymous(this="ROW_NUMBER"),
        partition_by=[_col(partition)],
        order=exp.Order(
            expressions=[exp.Ordered(this=keyed_hash(dialect, salt, typed))]
            + [exp.Ordered(this=t, nulls_first=False) for t in hash_ties(typed)]
        ),
    )
    ranked = exp.select(exp.Star(), exp.alias_(rank, name, copy=False)).from_(
        source.subquery(f"{name}_in", copy=False), copy=False
    )
    return (
        exp.select(exp.Star())
        .from_(ranked.subquery(f"{name}_of", copy=False), copy=False)
        .where(exp.LTE(this=exp.column(name), expression=exp.Literal.number(limit)), copy=False)
    )
