"""Rule: a GROUP BY column of a public table takes that table's values as its public key list.

A private table joined to a public dimension table (``lineitem JOIN supplier ON l_suppkey =
s_suppkey``) is grouped by the dimension's column (``GROUP BY s_suppkey``). The set of values that
column holds is public data, so, like a key list in the catalog, it can be released whole: every
value is answered, empty ones included, and no private partition selection (nor δ) is needed.
The values are read from the public table before planning, as the join multiplicities are
(:mod:`dalenius.plan.rewrite.measure_joins`); the private data is not read.

The rule applies to a key that is a column of a public table reached from the query's top through
inner joins only: every joined row then holds one of the table's values (a ``LEFT JOIN``'s right
side can be NULL where nothing matched, so its columns are left to the private selection).

Only the values of the table's rows that pass the query's conditions on that table alone are
listed (``WHERE p_brand = 'Brand#23'`` over ``part``): a WHERE conjunct that reads only the
table's columns drops every joined row of a table row that fails it, so no kept row holds such a
value. The conditions are public too, so the list stays public, and a query grouped by a key of
a large dimension table but about a few of its rows answers those rows, not every row.
"""

from __future__ import annotations

from dataclasses import replace

from dalenius.plan.expr import BinOp, Col, Expr, columns
from dalenius.plan.nodes import Filter, Join, Query, Relation, Scan, SemiJoin
from dalenius.plan.rewrite.context import Context, Plan


class TooManyKeys(Exception):
    """A public column holds more values than a key list may (raised by ``context.public_keys``)."""


def public_table_keys(plan: Plan, context: Context) -> Plan:
    """``plan`` with each GROUP BY column of an inner-joined public table given its values as keys.

    ``context.public_keys`` reads them (``None``: not a public table, or a type that cannot be a
    key) from the table's rows that pass the query's conditions on that table alone, so the rule
    acts only where public tables may be read. A column with too many values
    (:class:`TooManyKeys`) keeps no keys but names its table, so the refusal can say why.

    Example:
        >>> from dalenius.plan.nodes import Field, GroupKey, UnitSpec
        >>> t = Scan("t", "t", (Field("t__k", "k", "t", "int"),))
        >>> p = Scan("p", "p", (Field("p__k", "k", "p", "int"), Field("p__name", "name", "p", "str")))
        >>> key = GroupKey("name", Col("p__name"), "str", None)
        >>> q = Query(Join(t, p, "t__k", "p__k", "inner", 1), UnitSpec("row", None, 1, 1, ""), (key,), (), ())
        >>> read = lambda scan, column, conditions: ("a", "b") if scan.table == "p" else None
        >>> public_table_keys(q, Context(public_keys=read)).group_by[0].keys
        ('a', 'b')
    """
    read = context.public_keys
    if read is None or not isinstance(plan, Query):
        return plan
    keys = []
    for key in plan.group_by:
        found = _inner_scan(plan.relation, key.expr.name) if isinstance(key.expr, Col) else None
        # Keys the WHERE lists (``s_suppkey IN (2, 4, 5)``) give way to the table's values that
        # pass every condition on the table, that list included: never more, often fewer.
        if (key.keys is not None and not key.listed) or found is None:
            keys.append(key)
            continue
        scan, column, conditions = found
        try:
            values = read(scan, column, conditions)
        except TooManyKeys:
            keys.append(key if key.listed else replace(key, from_table=scan.table))
            continue
        if values is None:
            keys.append(key)
            continue
        keys.append(replace(key, keys=values, from_table=scan.table, listed=False))
    if keys == list(plan.group_by):
        return plan
    return replace(plan, group_by=tuple(keys))


def _inner_scan(relation: Relation, field_id: str) -> tuple[Scan, str, tuple[Expr, ...]] | None:
    """The table scan exposing ``field_id``, the column's catalog name and the conditions above
    the scan that read that scan's fields alone, if every join between it and the top of
    ``relation`` is an inner join (on either side) and no projection renames it; ``None``
    otherwise.
    """
    match relation:
        case Scan(fields=fields):
            return next(((relation, f.name, ()) for f in fields if f.id == field_id), None)
        case Filter(child=child, predicate=predicate):
            found = _inner_scan(child, field_id)
            if found is None:
                return None
            scan, column, conditions = found
            own = {f.id for f in scan.fields}
            kept = tuple(c for c in _conjuncts(predicate) if columns(c) and columns(c) <= own)
            return scan, column, (*conditions, *kept)
        case SemiJoin(child=child):
            return _inner_scan(child, field_id)
        case Join(left=left, right=right, kind=kind):
            return _inner_scan(left, field_id) or (
                _inner_scan(right, field_id) if kind == "inner" else None
            )
    return None


def _conjuncts(predicate: Expr) -> list[Expr]:
    """The parts of ``predicate`` joined by AND, in order."""
    if isinstance(predicate, BinOp) and predicate.op == "AND":
        return [*_conjuncts(predicate.left), *_conjuncts(predicate.right)]
    return [predicate]
