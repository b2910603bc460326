"""SELECT-list aliases in ``HAVING`` and ``ORDER BY``: ``HAVING n > 10`` with ``COUNT(*) AS n``.

DuckDB, PostgreSQL (in ORDER BY) and Spark accept them, so analysts write them. The alias stands
for its SELECT expression, which the binder then reads as if written in place (the aggregate it
names is the SELECT's own, computed and paid for once). A column of the same name in the queried
relation takes precedence, as in GROUP BY and in PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from sqlglot import exp


def expand_aliases(
    node: exp.Expr, aliases: Mapping[str, exp.Expr], columns: Collection[str]
) -> exp.Expr:
    """``node`` with each unqualified column naming an alias (by lower-case name) replaced by
    the alias's expression, unless it names one of ``columns`` (lower-case).

    Example:
        >>> import sqlglot
        >>> count = sqlglot.parse_one("COUNT(*)")
        >>> expand_aliases(sqlglot.parse_one("n > 10 AND sex = 'F'"), {"n": count}, {"sex"}).sql()
        "COUNT(*) > 10 AND sex = 'F'"
    """

    def swap(sub: exp.Expr) -> exp.Expr:
        if (
            isinstance(sub, exp.Column)
            and not sub.table
            and sub.name.lower() in aliases
            and sub.name.lower() not in columns
        ):
            return aliases[sub.name.lower()].copy()
        return sub

    return node.transform(swap)
