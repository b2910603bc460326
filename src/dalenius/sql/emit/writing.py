"""Writing sqlglot trees as text in a dialect, and the small node builders every statement uses.

The one place the generated SQL becomes text (:func:`_sql`, without sqlglot's defensive copy),
plus quoted column references and literals, shared by the expression compiler and the bounding.
"""

from __future__ import annotations

from functools import cache

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect as GlotDialect

from dalenius.core.catalog import Key
from dalenius.core.dialect import Dialect
from dalenius.plan.derive import GroupKeys


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


def _among_keys(key: exp.Expr, keys: GroupKeys) -> exp.Expr:
    """Whether ``key`` is one of ``keys``: ``IN``, or ``IS NULL`` for the NULL key (which ``IN``
    never matches).
    """
    listed = [_key_literal(v) for v in keys if v is not None]
    among = exp.In(this=key.copy(), expressions=listed)
    if None not in keys:
        return among
    null = exp.Is(this=key.copy(), expression=exp.Null())
    return exp.Paren(this=exp.or_(among, null, copy=False)) if listed else null


def _key_literal(value: Key) -> exp.Expr:
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int | float):
        return exp.Literal.number(repr(value) if isinstance(value, float) else value)
    return exp.Literal.string(str(value))
