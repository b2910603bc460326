"""Row-level scalar expressions: the WHERE predicates and GROUP BY keys of a plan.

A small immutable tree, independent of sqlglot, so a plan can be hashed, compared, explained and
compiled to any engine's dialect. Only deterministic, total (never-failing) row-wise operations
are representable: an expression that could raise an error on some rows would make the refusal of a
query depend on the data.

Example:
    >>> pred = BinOp(">=", Col("age"), Lit(40))
    >>> sorted(columns(pred))
    ['age']
    >>> render(pred)
    'age >= 40'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

LiteralValue = int | float | str | bool | None

COMPARISONS = ("=", "<>", "<", "<=", ">", ">=")
ARITHMETIC = ("+", "-", "*", "/", "%")
LOGICAL = ("AND", "OR")
BINARY_OPS = COMPARISONS + ARITHMETIC + LOGICAL + ("||",)


@dataclass(frozen=True)
class Col:
    """A reference to a catalog column (the name is the catalog's spelling)."""

    name: str


@dataclass(frozen=True)
class KeyRef(Col):
    """Group key ``index`` of the query, as output, HAVING and ORDER BY expressions read it.

    A typed reference: code asks ``isinstance(e, KeyRef)`` and reads ``e.index``, never parses
    the name. The name (``@k<index>``) is only the column of the post-processing environment, and
    since it is no catalog column it is never offered to an analyst.
    """

    index: int = 0

    @classmethod
    def of(cls, index: int) -> KeyRef:
        """The reference to group key ``index``."""
        return cls(f"@k{index}", index)


@dataclass(frozen=True)
class AggRef(Col):
    """Aggregate ``index`` of the query, as output, HAVING and ORDER BY expressions read it."""

    index: int = 0

    @classmethod
    def of(cls, index: int) -> AggRef:
        """The reference to aggregate ``index``."""
        return cls(f"@a{index}", index)


@dataclass(frozen=True)
class Lit:
    """A constant."""

    value: LiteralValue


@dataclass(frozen=True)
class BinOp:
    """A binary operator from :data:`BINARY_OPS`."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Not:
    """Logical negation."""

    operand: Expr


@dataclass(frozen=True)
class Neg:
    """Arithmetic negation."""

    operand: Expr


@dataclass(frozen=True)
class IsNull:
    """``operand IS [NOT] NULL``."""

    operand: Expr
    negated: bool = False


@dataclass(frozen=True)
class InList:
    """``operand [NOT] IN (items)``."""

    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False


@dataclass(frozen=True)
class Between:
    """``operand [NOT] BETWEEN low AND high``."""

    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False


@dataclass(frozen=True)
class Like:
    """``operand [NOT] LIKE pattern`` (``ILIKE`` when ``case_insensitive``)."""

    operand: Expr
    pattern: Expr
    negated: bool = False
    case_insensitive: bool = False


@dataclass(frozen=True)
class Func:
    """A call of a registered scalar function (see :data:`dalenius.plan.functions.FUNCTIONS`)."""

    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Case:
    """``CASE WHEN c1 THEN v1 ... ELSE default END``."""

    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None = None


Expr = Col | Lit | BinOp | Not | Neg | IsNull | InList | Between | Like | Func | Case


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``expr``."""
    match expr:
        case Col() | Lit():
            return ()
        case BinOp(left=left, right=right):
            return (left, right)
        case Not(operand=o) | Neg(operand=o) | IsNull(operand=o):
            return (o,)
        case InList(operand=o, items=items):
            return (o, *items)
        case Between(operand=o, low=lo, high=hi):
            return (o, lo, hi)
        case Like(operand=o, pattern=p):
            return (o, p)
        case Func(args=args):
            return args
        case Case(whens=whens, default=default):
            flat = [e for pair in whens for e in pair]
            return (*flat, default) if default is not None else tuple(flat)


def with_children(expr: Expr, kids: Sequence[Expr]) -> Expr:
    """``expr`` with its direct sub-expressions replaced by ``kids`` (in :func:`children` order).

    Example:
        >>> with_children(BinOp("+", Col("a"), Lit(1)), [Col("b"), Lit(2)])
        BinOp(op='+', left=Col(name='b'), right=Lit(value=2))
    """
    match expr:
        case BinOp(op=op):
            return BinOp(op, kids[0], kids[1])
        case Not():
            return Not(kids[0])
        case Neg():
            return Neg(kids[0])
        case IsNull(negated=n):
            return IsNull(kids[0], n)
        case InList(negated=n):
            return InList(kids[0], tuple(kids[1:]), n)
        case Between(negated=n):
            return Between(kids[0], kids[1], kids[2], n)
        case Like(negated=n, case_insensitive=ci):
            return Like(kids[0], kids[1], n, ci)
        case Func(name=name):
            return Func(name, tuple(kids))
        case Case(whens=whens, default=default):
            pairs = tuple((kids[2 * i], kids[2 * i + 1]) for i in range(len(whens)))
            return Case(pairs, kids[-1] if default is not None else None)
    return expr


def walk(expr: Expr) -> list[Expr]:
    """``expr`` and every sub-expression, parents before their children."""
    out = [expr]
    for kid in children(expr):
        out.extend(walk(kid))
    return out


def columns(expr: Expr) -> set[str]:
    """Names of every column ``expr`` reads."""
    if isinstance(expr, Col):
        return {expr.name}
    out: set[str] = set()
    for child in children(expr):
        out |= columns(child)
    return out


def references(expr: Expr) -> list[Col]:
    """Every column reference in ``expr`` (catalog columns, :class:`KeyRef` s and
    :class:`AggRef` s), in reading order.
    """
    if isinstance(expr, Col):
        return [expr]
    return [ref for child in children(expr) for ref in references(child)]


def aggregates_read(expr: Expr) -> list[int]:
    """The indices of the aggregates ``expr`` reads, sorted, each once."""
    return sorted({r.index for r in references(expr) if isinstance(r, AggRef)})


def render(expr: Expr, names: Mapping[str, str] | None = None) -> str:
    """A readable, dialect-neutral rendering for explain output (not for execution).

    ``names`` maps column ids to the names analysts wrote.
    """
    if names is not None:
        return _render(expr, names)
    return _render(expr, {})


def _render(expr: Expr, names: Mapping[str, str]) -> str:
    def render(e: Expr) -> str:
        return _render(e, names)

    def _paren(e: Expr) -> str:
        text = _render(e, names)
        return (
            f"({text})" if isinstance(e, BinOp | Not | Between | Like | InList | IsNull) else text
        )

    match expr:
        case Col(name=name):
            return names.get(name, name)
        case Lit(value=None):
            return "NULL"
        case Lit(value=bool(v)):
            return "TRUE" if v else "FALSE"
        case Lit(value=str(v)):
            return "'" + v.replace("'", "''") + "'"
        case Lit(value=v):
            return repr(v)
        case BinOp(op=op, left=left, right=right):
            return f"{_paren(left)} {op} {_paren(right)}"
        case Not(operand=o):
            return f"NOT {_paren(o)}"
        case Neg(operand=o):
            return f"-{_paren(o)}"
        case IsNull(operand=o, negated=neg):
            return f"{_paren(o)} IS {'NOT ' if neg else ''}NULL"
        case InList(operand=o, items=items, negated=neg):
            inner = ", ".join(render(i) for i in items)
            return f"{_paren(o)} {'NOT ' if neg else ''}IN ({inner})"
        case Between(operand=o, low=lo, high=hi, negated=neg):
            return f"{_paren(o)} {'NOT ' if neg else ''}BETWEEN {_paren(lo)} AND {_paren(hi)}"
        case Like(operand=o, pattern=p, negated=neg, case_insensitive=ci):
            word = "ILIKE" if ci else "LIKE"
            return f"{_paren(o)} {'NOT ' if neg else ''}{word} {_paren(p)}"
        case Func(name=name, args=args):
            return f"{name}({', '.join(render(a) for a in args)})"
        case Case(whens=whens, default=default):
            parts = " ".join(f"WHEN {render(c)} THEN {render(v)}" for c, v in whens)
            tail = f" ELSE {render(default)}" if default is not None else ""
            return f"CASE {parts}{tail} END"
