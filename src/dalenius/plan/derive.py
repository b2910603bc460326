"""Derive, from public metadata only, the type, bounds and key list of an expression.

* **Bounds** by interval arithmetic over the columns' public bounds: ``SUM(a * b)`` is summable
  when ``a`` and ``b`` are bounded; ``SUM(CASE WHEN ... THEN 1 ELSE 0 END)`` has bounds [0, 1].
  Inside aggregates each column is clipped to its bounds first, so the result always lies within
  the derived bounds.
* **Keys** by enumeration over public domains: a column with a key list, a bool, or an int column
  whose public bounds span at most :data:`MAX_DOMAIN` values. ``LEAST((age / 10) * 10, 60)`` over
  ``age`` in [17, 90] has the public keys 10, 20, …, 60; a ``CASE`` with literal results has those
  literals. An expression with no finite public domain has no public keys (its groups must then
  be selected privately).

Example:
    >>> from fractions import Fraction as F
    >>> from dalenius.plan.expr import BinOp, Col, Lit
    >>> fields = {"age": FieldInfo("int", (F(17), F(90)), None, False)}
    >>> bounds_of(BinOp("*", Col("age"), Lit(2)), fields)
    (Fraction(34, 1), Fraction(180, 1))
    >>> keys_of(BinOp("/", Col("age"), Lit(30)), fields)
    (0, 1, 2, 3)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from dalenius.core.catalog import Key
from dalenius.plan.evaluate import evaluate
from dalenius.plan.expr import (
    COMPARISONS,
    LOGICAL,
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
    LiteralValue,
    Neg,
    Not,
    columns,
)
from dalenius.plan.functions import (
    EMPTY,
    FUNCTIONS,
    NUMERIC,
    Bounds,
    Empty,
    EvaluationError,
    Fail,
    Interval,
    common_type,
    union,
)

MAX_DOMAIN = 100_000
"""The largest public domain enumerated to derive the keys of a GROUP BY expression."""


GroupKeys = tuple[Key | None, ...]
"""The public keys of a GROUP BY expression; ``None`` among them is the NULL key."""


@dataclass(frozen=True)
class FieldInfo:
    """Public metadata of one column of a relation."""

    type: str
    bounds: Bounds | None
    keys: GroupKeys | None
    nullable: bool


def type_of(expr: Expr, fields: Mapping[str, FieldInfo], fail: Fail | None = None) -> str:  # noqa: C901, PLR0912  # one arm per expression node
    """The SQL type of ``expr``: ``int``, ``float``, ``str``, ``bool``, ``date`` or ``null``.

    The one type checker of plan expressions. With ``fail`` it is strict: it refuses (raises
    ``fail(what, fix)``) any mix the engine would resolve by converting row values, which can
    fail on some rows. Without, it derives the type of an expression already checked and never
    refuses.

    Example:
        >>> from dalenius.plan.expr import BinOp, Col, Lit
        >>> fields = {"age": FieldInfo("int", None, None, False)}
        >>> type_of(BinOp("/", Col("age"), Lit(2.5)), fields)
        'float'
        >>> type_of(BinOp("=", Col("age"), Lit("x")), fields, lambda what, fix: ValueError(what))
        Traceback (most recent call last):
        ...
        ValueError: cannot compare a int with a str.
    """

    def t(e: Expr) -> str:
        return type_of(e, fields, fail)

    match expr:
        case Col(name=name):
            return fields[name].type
        case Lit(value=None):
            return "null"
        case Lit(value=bool()):
            return "bool"
        case Lit(value=int()):
            return "int"
        case Lit(value=float()):
            return "float"
        case Lit():
            return "str"
        case BinOp(op=op, left=left, right=right):
            result = "bool" if op in LOGICAL or op in COMPARISONS else "str" if op == "||" else None
            if result is not None and fail is None:
                return result
            lt, rt = t(left), t(right)
            if fail is not None:
                _check_binary(op, left, right, lt, rt, fail)
            return result or ("int" if {lt, rt} <= {"int", "null"} else "float")
        case Not() | IsNull() | InList() | Between() | Like():
            if fail is not None:
                _check_predicate(expr, t, fail)
            return "bool"
        case Neg(operand=o):
            ot = t(o)
            if fail is not None and ot not in NUMERIC | {"null"}:
                raise fail("unary minus needs a number.", "negate numeric columns only.")
            return ot
        case Func(name=name, args=args):
            types = [t(a) for a in args]
            spec = FUNCTIONS.get(name)
            return spec.result(types, fail) if spec is not None else common_type(types, fail)
        case Case(whens=whens, default=default):
            results = []
            for cond, value in whens:
                if fail is not None and t(cond) not in ("bool", "null"):
                    raise fail(
                        "a CASE WHEN condition must be true/false.", "write WHEN x > 1 THEN ..."
                    )
                results.append(t(value))
            if default is not None:
                results.append(t(default))
            return common_type(results, fail)
    raise AssertionError(f"unknown expression {expr!r}")


def _comparable(a: str, b: str, a_expr: Expr, b_expr: Expr) -> bool:
    if "null" in (a, b) or a == b or (a in NUMERIC and b in NUMERIC):
        return True
    # A date against a string literal: the literal is cast once, at planning time, so a
    # malformed one fails for every dataset alike.
    if {a, b} == {"date", "str"}:
        return isinstance(a_expr if a == "str" else b_expr, Lit)
    return False


def _check_binary(op: str, left: Expr, right: Expr, lt: str, rt: str, fail: Fail) -> None:
    if op in LOGICAL:
        if not ({lt, rt} <= {"bool", "null"}):
            raise fail(f"{op} needs true/false operands.", "combine comparisons with AND/OR.")
    elif op in COMPARISONS:
        if not _comparable(lt, rt, left, right):
            raise fail(
                f"cannot compare a {lt} with a {rt}.",
                "compare values of the same type, e.g. quote a string: zip = '90210'.",
            )
    elif op == "||":
        if not ({lt, rt} <= {"str", "null"}):
            raise fail("|| joins strings only.", "apply || to text columns.")
    elif not ({lt, rt} <= NUMERIC | {"null"}):
        raise fail(f"arithmetic {op} needs numbers, got {lt} and {rt}.", "use numeric columns.")


def _check_predicate(expr: Expr, t: Callable[[Expr], str], fail: Fail) -> None:
    match expr:
        case Not(operand=o):
            if t(o) not in ("bool", "null"):
                raise fail("NOT needs a true/false operand.", "write NOT (condition).")
        case IsNull(operand=o):
            t(o)
        case InList(operand=o, items=items):
            ot = t(o)
            for item in items:
                if not _comparable(ot, t(item), o, item):
                    raise fail(
                        f"IN mixes a {ot} with a {t(item)}.", "list values of the column's type."
                    )
        case Between(operand=o, low=lo, high=hi):
            ot = t(o)
            for side in (lo, hi):
                if not _comparable(ot, t(side), o, side):
                    raise fail(
                        f"BETWEEN mixes a {ot} with a {t(side)}.",
                        "use bounds of the column's type.",
                    )
        case Like(operand=o, pattern=p):
            if t(o) not in ("str", "null") or t(p) not in ("str", "null"):
                raise fail(
                    "LIKE applies to text.", "use LIKE on a text column with a quoted pattern."
                )


def bounds_of(expr: Expr, fields: Mapping[str, FieldInfo]) -> Bounds | None:
    """Public bounds of a numeric expression, or ``None`` when they cannot be derived."""
    result = _bounds(expr, fields)
    return None if isinstance(result, Empty) else result


def _bounds(expr: Expr, fields: Mapping[str, FieldInfo]) -> Interval:  # one arm per expression node
    match expr:
        case Col(name=name):
            info = fields[name]
            if info.type == "bool":
                return Fraction(0), Fraction(1)
            return info.bounds
        case Lit(value=None):
            return EMPTY
        case Lit(value=bool()):
            return None
        case Lit(value=int(v)) | Lit(value=float(v)):
            if isinstance(v, float) and not math.isfinite(v):
                return None
            f = Fraction(repr(v)) if isinstance(v, float) else Fraction(v)
            return f, f
        case BinOp(op=op, left=left, right=right) if op in ("+", "-", "*", "/"):
            a, b = _bounds(left, fields), _bounds(right, fields)
            if a is None or b is None:
                return None
            if isinstance(a, Empty) or isinstance(b, Empty):
                return EMPTY
            return _arith(op, a, b, type_of(expr, fields) == "int")
        case Neg(operand=o):
            a = _bounds(o, fields)
            if a is None or isinstance(a, Empty):
                return a
            return -a[1], -a[0]
        case Func(name=name, args=args) if name in FUNCTIONS:
            return FUNCTIONS[name].bounds([_bounds(a, fields) for a in args])
        case Case(whens=whens, default=default):
            parts = [_bounds(v, fields) for _, v in whens]
            parts.append(_bounds(default, fields) if default is not None else EMPTY)
            return union(parts)
    return None


def per_unit_bounds(func: str, bounds: Bounds | None, rows: int) -> Bounds:
    """Bounds of one privacy unit's ``func`` (``count``, ``sum``, ``avg``, ``min``, ``max``) over
    at most ``rows`` rows whose argument lies in ``bounds``.

    Example:
        >>> from fractions import Fraction as F
        >>> per_unit_bounds("sum", (F(-1), F(5)), 3)
        (Fraction(-3, 1), Fraction(15, 1))
        >>> per_unit_bounds("count", None, 3)
        (Fraction(0, 1), Fraction(3, 1))
    """
    if func == "count":
        return Fraction(0), Fraction(rows)
    assert bounds is not None
    lo, hi = bounds
    if func == "sum":
        return rows * min(lo, Fraction(0)), rows * max(hi, Fraction(0))
    return lo, hi


def _arith(op: str, a: Bounds, b: Bounds, integer: bool) -> Bounds | None:
    if op == "+":
        return a[0] + b[0], a[1] + b[1]
    if op == "-":
        return a[0] - b[1], a[1] - b[0]
    if op == "*":
        products = [x * y for x in a for y in b]
        return min(products), max(products)
    # Division: only by a divisor bounded away from zero (else the quotient is unbounded).
    if b[0] <= 0 <= b[1]:
        return None
    quotients = [x / y for x in a for y in b]
    lo, hi = min(quotients), max(quotients)
    if integer:
        return Fraction(math.trunc(lo)), Fraction(math.trunc(hi))
    return lo, hi


def keys_of(
    expr: Expr,
    fields: Mapping[str, FieldInfo],
    limit: int = MAX_DOMAIN,
    where: Sequence[Expr] = (),
) -> GroupKeys | None:
    """The public keys of a GROUP BY expression, or ``None`` if its domain is not public.

    ``where`` holds conditions every grouped row satisfies (the query's own ``WHERE``, split at
    ``AND``: :func:`key_conditions`). A key none of whose column values can pass them can only
    form an empty group, so it is left out: ``WHERE state = 'CA' GROUP BY state`` answers CA
    alone. This reads the query and the public domain only, never the data. Conditions on other
    columns, or that the engines might decide differently, are not used; if nothing would be
    left, every key is kept.

    NULL is a key of its own when the expression yields NULL for non-NULL column values (a
    ``CASE`` without ``ELSE`` that no branch matches): SQL groups those rows under NULL, and the
    key is as public as the others, derived from the expression alone. A NULL column value is
    not a key of its own (rows holding one are left out, as rows outside a key list are), but
    rows it sends to an expression's NULL key are counted there, as SQL does.

    Example:
        >>> from fractions import Fraction as F
        >>> from dalenius.plan.expr import BinOp, Case, Col, Lit
        >>> fields = {"age": FieldInfo("int", (F(17), F(90)), None, False)}
        >>> young = Case(((BinOp("<", Col("age"), Lit(30)), Lit("young")),), None)
        >>> keys_of(young, fields)
        ('young', None)
        >>> keys_of(young, fields, where=(BinOp("<", Col("age"), Lit(25)),))
        ('young',)
    """
    filtered = _keys_of(expr, fields, limit, where)
    if filtered or not where:
        return filtered
    return _keys_of(expr, fields, limit, ())


def _keys_of(
    expr: Expr, fields: Mapping[str, FieldInfo], limit: int, where: Sequence[Expr]
) -> GroupKeys | None:
    names = sorted(columns(expr))
    conditions = [c for c in where if columns(c) and columns(c) <= set(names)]
    if isinstance(expr, Col) and fields[expr.name].keys is not None:
        keys = fields[expr.name].keys
        assert keys is not None
        return tuple(k for k in keys if _passes(conditions, {expr.name: k}))
    literal = _literal_results(expr)
    if literal is not None:
        assert isinstance(expr, Case)
        # Branches the conditions (or the WHERE) rule out for every public value form no group;
        # decided by evaluation only where every engine decides the conditions alike.
        if not all(_decided_alike(c, fields) for c, _ in expr.whens):
            return literal
        reached = _enumerated(expr, names, fields, limit, conditions)
        if reached is None:
            return literal
        return tuple(k for k in literal if k in reached) or None
    return _enumerated(expr, names, fields, limit, conditions)


def _enumerated(
    expr: Expr,
    names: Sequence[str],
    fields: Mapping[str, FieldInfo],
    limit: int,
    conditions: Sequence[Expr],
) -> GroupKeys | None:
    """The values of ``expr`` over the public domain of its columns (see :func:`keys_of`)."""
    domains = []
    size = 1
    for name in names:
        domain = _domain(fields[name], limit)
        if domain is None:
            return None
        size *= len(domain)
        if size > limit:
            return None
        domains.append(domain)
    seen: dict[Key | None, None] = {}
    null_key = False
    for values in itertools.product(*domains):
        env = dict(zip(names, values, strict=True))
        if not _passes(conditions, env):
            continue
        try:
            key = evaluate(expr, env)
        except (EvaluationError, TypeError, ArithmeticError):
            return None
        if key is None:
            null_key = null_key or None not in values
            continue
        if isinstance(key, float) and key.is_integer() and type_of(expr, fields) == "int":
            key = int(key)
        if not isinstance(key, str | int | bool):
            return None  # float keys are left to private selection: equality on floats is brittle
        seen.setdefault(key, None)
    if null_key:
        seen[None] = None
    return tuple(seen) if seen else None


def key_conditions(predicate: Expr | None, fields: Mapping[str, FieldInfo]) -> tuple[Expr, ...]:
    """The ``AND``-ed parts of a ``WHERE`` that :func:`keys_of` may decide on public values.

    Only parts every engine decides as Python does: columns with public keys, booleans or
    integers, literals, ``=``, ``<>``, ``IN``, ``IS NULL``, ``NOT``, ``AND``, ``OR``, arithmetic,
    and order comparisons (``<``, ``BETWEEN``) of numbers and booleans — never of text, whose
    order depends on the engine's collation, nor functions, ``CASE`` or ``LIKE``.
    """
    if predicate is None:
        return ()
    return tuple(p for p in _and_parts(predicate) if _decided_alike(p, fields))


def listed_keys(expr: Expr, predicate: Expr | None, kind: str) -> GroupKeys | None:
    """The keys a ``WHERE`` lists for a GROUP BY expression without a public domain, or ``None``.

    ``WHERE SUBSTRING(phone, 1, 2) IN ('13', '31') GROUP BY SUBSTRING(phone, 1, 2)``: every
    grouped row passed the condition, so its key is one of the literals the analyst wrote, and
    those literals are public. A part of the ``WHERE`` joined by ``AND`` that is ``expr IN
    (literals)`` or ``expr = literal`` lists them; several such parts keep the keys they share.
    Only text and integer expressions with literals of their own type are taken: the engine's
    equality then holds exactly when the values are equal (text compared byte for byte, no
    collation folds two listed values), so every group the engine forms is one listed key.

    Example:
        >>> from dalenius.plan.expr import Col, InList, Lit
        >>> where = InList(Col("state"), (Lit("CA"), Lit("NY"), Lit("CA")))
        >>> listed_keys(Col("state"), where, "str")
        ('CA', 'NY')
        >>> listed_keys(Col("state"), where, "int") is None
        True
    """
    wanted = {"str": str, "int": int}.get(kind)
    if predicate is None or wanted is None:
        return None
    found: GroupKeys | None = None
    for part in _and_parts(predicate):
        values = _listed_values(part, expr)
        if values is None or not all(
            isinstance(v, wanted) and not isinstance(v, bool) for v in values
        ):
            continue
        keys = tuple(dict.fromkeys(v for v in values if isinstance(v, str | int)))
        found = keys if found is None else tuple(k for k in found if k in keys)
    return found or None


def _listed_values(part: Expr, expr: Expr) -> tuple[LiteralValue, ...] | None:
    """The literals ``part`` lists for ``expr`` (``expr IN (...)``, ``expr = literal``)."""
    if isinstance(part, InList) and not part.negated and part.operand == expr:
        items = part.items
    elif isinstance(part, BinOp) and part.op == "=" and expr in (part.left, part.right):
        items = (part.right if part.left == expr else part.left,)
    else:
        return None
    if not all(isinstance(i, Lit) for i in items):
        return None
    return tuple(i.value for i in items if isinstance(i, Lit))


def _and_parts(predicate: Expr) -> list[Expr]:
    """The parts of ``predicate`` joined by ``AND``, in order."""
    parts: list[Expr] = []
    stack = [predicate]
    while stack:
        node = stack.pop()
        if isinstance(node, BinOp) and node.op == "AND":
            stack.extend((node.right, node.left))
        else:
            parts.append(node)
    return parts


def _decided_alike(expr: Expr, fields: Mapping[str, FieldInfo]) -> bool:
    """Whether every engine evaluates ``expr`` as :func:`evaluate` does (see :func:`key_conditions`)."""
    if isinstance(expr, Lit):
        return True
    if isinstance(expr, Col):
        info = fields.get(expr.name)
        return info is not None and (info.keys is not None or info.type in ("int", "bool"))
    if isinstance(expr, Not | Neg | IsNull):
        return _decided_alike(expr.operand, fields)
    if isinstance(expr, InList):
        return all(_decided_alike(e, fields) for e in (expr.operand, *expr.items))
    if isinstance(expr, Between):
        parts = (expr.operand, expr.low, expr.high)
        return all(_decided_alike(e, fields) and _ordered(e, fields) for e in parts)
    if isinstance(expr, BinOp) and expr.op != "||":
        if not (_decided_alike(expr.left, fields) and _decided_alike(expr.right, fields)):
            return False
        if expr.op in COMPARISONS and expr.op not in ("=", "<>"):
            return _ordered(expr.left, fields) and _ordered(expr.right, fields)
        return True
    return False


def _ordered(expr: Expr, fields: Mapping[str, FieldInfo]) -> bool:
    """Whether ``expr`` (already :func:`_decided_alike`: every column known) is a number or a
    boolean, ordered alike everywhere, not text.
    """
    return type_of(expr, fields) in ("int", "float", "bool", "null")


def _passes(conditions: Sequence[Expr], env: Mapping[str, Key | None]) -> bool:
    """Whether a row holding ``env`` could pass every condition (undecidable: it could)."""
    for condition in conditions:
        try:
            if evaluate(condition, env) is not True:
                return False
        except (EvaluationError, TypeError, ArithmeticError):
            continue
    return True


def _literal_results(expr: Expr) -> GroupKeys | None:
    """The results of a CASE whose every branch is a literal, or a CASE of the same kind:
    public, whatever the input (a nested CASE is how a binning by binary search is written).

    Without ``ELSE`` (or with a NULL branch), NULL is one of them.

    Example:
        >>> from dalenius.plan.expr import BinOp, Case, Col, Lit
        >>> inner = Case(((BinOp(">=", Col("x"), Lit(8)), Lit(3)),), Lit(2))
        >>> _literal_results(Case(((BinOp(">=", Col("x"), Lit(4)), inner),), Lit(0)))
        (3, 2, 0)
    """
    results = _branch_literals(expr)
    if results is None:
        return None
    return results if any(k is not None for k in results) else None


def _branch_literals(expr: Expr) -> GroupKeys | None:
    if not isinstance(expr, Case):
        return None
    branches = [v for _, v in expr.whens] + [
        expr.default if expr.default is not None else Lit(None)
    ]
    seen: dict[Key | None, None] = {}
    for v in branches:
        if isinstance(v, Case):
            inner = _branch_literals(v)
            if inner is None:
                return None
            seen.update(dict.fromkeys(inner))
        elif isinstance(v, Lit) and (v.value is None or isinstance(v.value, str | int | bool)):
            seen.setdefault(v.value, None)
        else:
            return None
    return tuple(seen)


def _domain(info: FieldInfo, limit: int) -> tuple[Key | None, ...] | None:
    """The public values a column may hold, NULL included when it is nullable."""
    values: GroupKeys
    if info.keys is not None:
        values = info.keys
    elif info.type == "bool":
        values = (False, True)
    elif info.type == "int" and info.bounds is not None:
        lo, hi = math.ceil(info.bounds[0]), math.floor(info.bounds[1])
        if hi - lo + 1 > limit:
            return None
        values = tuple(range(lo, hi + 1))
    else:
        return None
    return (*values, None) if info.nullable and None not in values else values
