"""Free hints from the catalog: a literal compared with a keyed column that is not among its keys.

``WHERE income = '<=50k'`` against the declared keys ``'<=50K'``, ``'>50K'`` is almost surely a
typo; the query is answered (a count of nobody), but the analyst should hear about it before
trusting the answer. The hint reads the query and the catalog's key lists only, never the data:
whether a value is declared says nothing about anyone, and a value missing from the list matches
no row that has a declared value. With ``--strict`` (:func:`strict_refusal`) such a query is
refused instead, before anything is spent.

Example:
    >>> from dalenius.plan.expr import BinOp, Col, Lit
    >>> from dalenius.plan.nodes import Field
    >>> income = Field("t__income", "income", "t", "str", keys=("<=50K", ">50K"))
    >>> literal_hints([BinOp("=", Col("t__income"), Lit("<=50k"))], {income.id: income})
    ("income = '<=50k': '<=50k' is not among the declared keys of income; did you mean '<=50K'?",)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from dalenius.core.errors import QueryError
from dalenius.plan.expr import BinOp, Col, Expr, InList, Lit, aggregates_read, walk
from dalenius.plan.nodes import (
    Field,
    Filter,
    Join,
    Project,
    Query,
    Relation,
    Scan,
    SemiJoin,
    UnitAggregate,
    all_fields,
)


def query_hints(query: Query) -> tuple[str, ...]:
    """The hints for every expression of ``query`` (WHERE, derived columns, keys, aggregates)."""
    exprs = list(_relation_exprs(query.relation))
    exprs += [k.expr for k in query.group_by]
    exprs += [a.arg for a in query.aggregates if a.arg is not None]
    return literal_hints(exprs, {f.id: f for f in all_fields(query.relation)})


def query_notes(query: Query) -> tuple[str, ...]:
    """What the analyst should know about the answer: :func:`query_hints`, then
    :func:`combined_notes`.
    """
    return (*query_hints(query), *combined_notes(query))


def combined_notes(query: Query) -> tuple[str, ...]:
    """One note per output that combines several aggregates, released without an interval.

    Each aggregate's interval holds with the stated confidence; their combination's would hold
    only when all of them do, with a lower confidence, so none is given (the aggregates' own
    intervals are there when they are selected as columns).
    """
    return tuple(
        f"{o.name} combines {len(aggregates_read(o.expr))} aggregates: released without an "
        "interval (select them as columns for theirs)."
        for o in query.outputs
        if len(aggregates_read(o.expr)) > 1
    )


def literal_hints(exprs: Iterable[Expr], fields: Mapping[str, Field]) -> tuple[str, ...]:
    """One hint per literal compared (``=``, ``<>``, ``IN``) with a keyed column and not a key."""
    hints: dict[str, None] = {}
    for expr in exprs:
        for node in walk(expr):
            for col, lit in _compared(node):
                field = fields.get(col.name)
                if field is None or field.keys is None or lit.value is None:
                    continue
                if any(lit.value == k and type(lit.value) is type(k) for k in field.keys):
                    continue
                hints.setdefault(_hint(field, lit.value, node), None)
    return tuple(hints)


def strict_refusal(hints: tuple[str, ...]) -> QueryError | None:
    """The refusal ``--strict`` gives a query with hints, or ``None`` if it has none."""
    if not hints:
        return None
    return QueryError(
        hints[0],
        clause="WHERE",
        why="with --strict, a value that is not a declared key is taken for a mistake: it "
        "matches no row that has a declared key.",
        fix="use one of the declared keys (the catalog lists them), or drop --strict.",
    )


def _compared(node: Expr) -> list[tuple[Col, Lit]]:
    if isinstance(node, BinOp) and node.op in ("=", "<>"):
        pairs = [(node.left, node.right), (node.right, node.left)]
        return [(c, v) for c, v in pairs if isinstance(c, Col) and isinstance(v, Lit)]
    if isinstance(node, InList) and isinstance(node.operand, Col):
        return [(node.operand, i) for i in node.items if isinstance(i, Lit)]
    return []


def _hint(field: Field, value: object, node: Expr) -> str:
    shown = repr(value)
    compared = f"{node.op} {shown}" if isinstance(node, BinOp) else "IN (...)"
    keys = [str(k) for k in field.keys or ()]
    close = difflib.get_close_matches(str(value), keys, n=1, cutoff=0.6)
    lowered = [k for k in keys if k.lower() == str(value).lower()]
    suggestion = lowered[0] if lowered else close[0] if close else None
    text = f"{field.name} {compared}: {shown} is not among the declared keys of {field.name}"
    if suggestion is not None:
        match = next(k for k in field.keys or () if str(k) == suggestion)
        return f"{text}; did you mean {match!r}?"
    return f"{text} ({', '.join(repr(k) for k in (field.keys or ())[:8])}{', …' if len(keys) > 8 else ''})."


def _relation_exprs(relation: Relation) -> Iterable[Expr]:
    match relation:
        case Scan():
            return []
        case Filter(child=c, predicate=p):
            return [p, *_relation_exprs(c)]
        case Project(child=c, exprs=exprs):
            return [*exprs, *_relation_exprs(c)]
        case UnitAggregate(child=c, aggregates=aggs, keys=keys):
            args = [a.arg for a in aggs if a.arg is not None]
            return [*keys, *args, *_relation_exprs(c)]
        case Join(left=left, right=right):
            return [*_relation_exprs(left), *_relation_exprs(right)]
        case SemiJoin(child=c, right=right, condition=cond, operand=operand):
            own = [e for e in (cond, operand) if e is not None]
            return [*own, *_relation_exprs(c), *_relation_exprs(right)]
    raise AssertionError(f"unknown relation {relation!r}")
