"""A subquery used as a value and correlated with the outer query on a public table's column,
turned into a query per value of that column (:mod:`dalenius.engine.staged_release`).

``WHERE l_quantity < (SELECT 0.2 * AVG(l_quantity) FROM lineitem WHERE l_partkey = p_partkey)``
compares each line with an average over the lines of *its own part*: one value per part, where
``p_partkey`` is a column of ``part``, a public table of the outer query. Each of those values is
an aggregate of private rows, so each must be released; all of them together are one grouped
query, asked per value of the outer column::

    SELECT p_partkey, 0.2 * AVG(l_quantity) FROM lineitem JOIN part ON l_partkey = p_partkey
    WHERE <the outer query's conditions on part alone> GROUP BY p_partkey

grouped by a public table's column, so its keys are that table's values (of the rows that pass
those conditions) and every one is answered, with no private selection. Released, the values are
public, and the outer query uses them as ``CASE p_partkey WHEN 1 THEN 10.2 … END`` in the
subquery's place.

Only the simplest correlation is taken: the subquery reads catalog tables, stands in ``WHERE``,
and refers to the outer query once, by an equality between one of its own columns and a column
of a public table of the outer query's ``FROM``. Any other reference to the outer query is
refused, naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from dalenius.core.catalog import Catalog
from dalenius.core.errors import QueryError
from dalenius.sql.parse import DEFAULT_DIALECT, parse
from dalenius.sql.scalar_subqueries import Subquery
from dalenius.sql.validate import span_at

MAX_CORRELATED_KEYS = 10_000
"""The most values of the outer column a correlated subquery is released for: each becomes a
branch of the ``CASE`` the outer query is planned and run with."""


@dataclass(frozen=True)
class Correlation:
    """How a subquery refers to its outer query, and the grouped query that answers it.

    Attributes:
        column: the outer column as the subquery writes it (``p_partkey``, ``p.p_partkey``).
        table: the public table it belongs to (catalog name).
        key: its catalog column name.
        stage_sql: the subquery asked per value of the column (see the module's docstring).
    """

    column: str
    table: str
    key: str
    stage_sql: str

    def case(self, values: list[tuple[str, str]]) -> str:
        """The outer query's stand-in for the subquery: the value written for each key, as
        ``CASE column WHEN key THEN value … END`` (``ELSE NULL``: no key, no value).
        """
        if not values:
            return "CAST(NULL AS DOUBLE)"
        whens = " ".join(f"WHEN {key} THEN {value}" for key, value in values)
        return f"CASE {self.column} {whens} END"


def correlation(sql: str, sub: Subquery, outer_sql: str, catalog: Catalog) -> Correlation | None:
    """How ``sub`` (a subquery of ``sql``) is correlated with its outer query, or ``None`` when
    it refers to nothing outside its own ``FROM`` (or reads what the planner refuses anyway).

    ``outer_sql`` is the outer query with a constant in the subquery's place.

    Raises:
        QueryError: a correlation other than one equality with a public table's column, or one
            outside ``WHERE`` (located at the subquery).
    """
    inner = parse(sub.sql)
    tables = _tables(inner)
    if tables is None or not isinstance(inner, exp.Select):
        return None
    known = [catalog.table(t.name) for t in tables]
    if any(t is None for t in known):
        return None
    names = {t.alias_or_name for t in tables}
    own = {c.name for t in known if t is not None for c in t.columns}

    def outside(column: exp.Column) -> bool:
        return column.table not in names if column.table else column.name not in own

    outer_refs = [c for c in inner.find_all(exp.Column) if outside(c)]
    if not outer_refs:
        return None
    refuse = _Refuse(sql, sub)
    if sub.nested:
        raise refuse(
            "a subquery used as a value inside another subquery refers to rows outside it "
            f"({outer_refs[0].sql(DEFAULT_DIALECT)})",
            "a correlated subquery is answered per value of a public table's column of the "
            "outer query itself; inside an IN, EXISTS or FROM subquery only an uncorrelated one "
            "is released first.",
            "refer only to the subquery's own FROM, or move the comparison to the outer query's "
            "WHERE.",
        )
    # A name neither side holds is the planner's to refuse (an unknown column), as written.
    if not all(_in_outer(c, outer_sql, catalog) for c in outer_refs):
        return None
    _check_form(inner, sub, refuse)
    where = inner.args.get("where")
    conjuncts = _conjuncts(where.this) if where is not None else []
    links = [c for c in conjuncts if _link(c, outside) is not None]
    stray = [c for c in outer_refs if not any(c in set(k.find_all(exp.Column)) for k in links)]
    if stray or len(links) != 1:
        named = stray[0].sql(DEFAULT_DIALECT) if stray else ", ".join(_sql(k) for k in links)
        raise refuse(
            f"the subquery refers to the outer query other than by one equality ({named})",
            "a correlated subquery is answered per value of one column of a public table of the "
            "outer query, the column it equates with one of its own: "
            "(SELECT AVG(x) FROM t WHERE t.k = outer_table.k AND ...).",
        )
    link = _link(links[0], outside)
    assert link is not None
    mine, theirs = link
    table, alias = _outer_table(outer_sql, theirs, catalog, refuse)
    if alias in names:
        raise refuse(
            f"the subquery and the outer query both name {alias}",
            "the subquery is asked joined to the outer query's table, under its name.",
            f"give the outer query's {table} another alias (FROM {table} AS o ...).",
        )
    conditions = [c for c in conjuncts if c is not links[0]]
    conditions += _conditions_on(outer_sql, alias, table, catalog, own)
    stage = _per_key(inner, table, alias, (mine, theirs), conditions)
    return Correlation(theirs.sql(DEFAULT_DIALECT), table, theirs.name, _sql(stage))


def _check_form(inner: exp.Select, sub: Subquery, refuse: _Refuse) -> None:
    """Refuse a correlated subquery outside WHERE, or with a clause its per-key query would not
    carry (only the select list, FROM, joins and WHERE are: any other would be dropped).
    """
    if sub.clause != "WHERE":
        raise refuse(
            f"a subquery correlated with the outer query is answered in WHERE, not in {sub.clause}",
            "its value differs from row to row of the outer query, so it can only filter rows.",
        )
    extra = sorted(k for k, v in inner.args.items() if v and k not in _CARRIED)
    if extra:
        raise refuse(
            "a correlated subquery used as a value must be one aggregate over its FROM and "
            f"WHERE, with no {', '.join(_CLAUSES.get(k, k.upper()) for k in extra)}",
            "it is asked once per value of the outer column, grouped by that column.",
        )


_CARRIED = frozenset({"expressions", "from_", "joins", "where"})
"""The parts of a correlated subquery its per-key query carries over (:func:`_per_key`)."""

_CLAUSES = {"group": "GROUP BY", "order": "ORDER BY", "distinct": "DISTINCT", "with": "WITH"}
"""A clause's name as written, by sqlglot's name for it (others are their names upper-cased)."""


def _per_key(
    inner: exp.Select,
    table: str,
    alias: str,
    link: tuple[exp.Column, exp.Column],
    conditions: list[exp.Expr],
) -> exp.Select:
    """The subquery grouped by the outer column: its FROM and joins, then the outer public
    table joined on the correlation, its other conditions and the outer ones on that table.
    """
    mine, theirs = link
    key = exp.column(theirs.name, table=alias)
    stage = (
        exp.select(key.copy(), *[e.copy() for e in inner.expressions])
        .from_(inner.args["from_"].this.copy())
        .join(
            exp.alias_(exp.to_table(table), alias, table=True),
            on=exp.EQ(this=mine.copy(), expression=key.copy()),
        )
        .group_by(key.copy())
    )
    for join in inner.args.get("joins") or []:
        stage.args["joins"].insert(-1, join.copy())
    if conditions:
        stage = stage.where(exp.and_(*[c.copy() for c in conditions]))
    return stage


def _sql(node: exp.Expr) -> str:
    return node.sql(DEFAULT_DIALECT)


def _tables(select: exp.Expr) -> list[exp.Table] | None:
    """The catalog tables a plain SELECT reads (FROM and its joins), or ``None`` for another
    form (a set operation, a subquery or a table function in FROM).
    """
    if not isinstance(select, exp.Select) or select.args.get("from_") is None:
        return None
    items = [select.args["from_"].this, *(j.this for j in select.args.get("joins") or [])]
    if not all(isinstance(i, exp.Table) and not i.args.get("db") for i in items):
        return None
    return items


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    """The parts of ``condition`` joined by AND (brackets unwrapped)."""
    while isinstance(condition, exp.Paren):
        condition = condition.this
    if isinstance(condition, exp.And):
        return [*_conjuncts(condition.this), *_conjuncts(condition.expression)]
    return [condition]


def _link(
    condition: exp.Expr, outside: Callable[[exp.Column], bool]
) -> tuple[exp.Column, exp.Column] | None:
    """``(inner column, outer column)`` if ``condition`` equates one of each, else ``None``."""
    if not isinstance(condition, exp.EQ):
        return None
    left, right = condition.this, condition.expression
    if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
        return None
    if outside(right) and not outside(left):
        return left, right
    if outside(left) and not outside(right):
        return right, left
    return None


def _in_outer(column: exp.Column, outer_sql: str, catalog: Catalog) -> bool:
    """Whether ``column`` names a column of a catalog table of the outer query's FROM."""
    for t in _outer_tables(outer_sql):
        declared = catalog.table(t.name)
        named = t.alias_or_name == column.table if column.table else True
        if declared is not None and named and declared.column(column.name) is not None:
            return True
    return False


def _outer_tables(outer_sql: str) -> list[exp.Table]:
    """The catalog tables of the outer query's FROM and joins (none for another form)."""
    return _tables(parse(outer_sql)) or []


def _outer_table(
    outer_sql: str, column: exp.Column, catalog: Catalog, refuse: _Refuse
) -> tuple[str, str]:
    """The public table of the outer query that ``column`` belongs to: (catalog name, alias)."""
    candidates = []
    for t in _outer_tables(outer_sql):
        declared = catalog.table(t.name)
        if declared is None:
            continue
        named = t.alias_or_name == column.table if column.table else True
        if named and declared.column(column.name) is not None:
            candidates.append((declared, t.alias_or_name))
    if len(candidates) != 1:
        raise refuse(
            f"the subquery refers to {column.sql(DEFAULT_DIALECT)}, which is not one column of "
            "a table in the outer query's FROM",
            "a correlated subquery is answered per value of a column of the outer query's own "
            "tables.",
        )
    declared, alias = candidates[0]
    if not declared.public:
        raise refuse(
            f"the subquery is correlated with {column.sql(DEFAULT_DIALECT)} of the private "
            f"table {declared.name}",
            "a value per private row would be a release per row; a correlated subquery is "
            "answered per value of a public table's column (a dimension such as part or nation).",
            "correlate it with a column of a public table joined in the outer query, or ask per "
            "group with GROUP BY in a query of its own.",
        )
    return declared.name, alias


def _conditions_on(
    outer_sql: str, alias: str, table: str, catalog: Catalog, inner: set[str]
) -> list[exp.Expr]:
    """The outer query's WHERE conjuncts that read only ``table`` (named ``alias``): the keys
    asked for are the values of its rows that pass them. A conjunct naming a column the subquery's
    tables also hold, or holding a subquery, is left out (it only narrows the keys).
    """
    tree = parse(outer_sql)
    where = tree.args.get("where") if isinstance(tree, exp.Select) else None
    declared = catalog.table(table)
    if where is None or declared is None:
        return []
    other_columns = {
        c.name
        for t in _outer_tables(outer_sql)
        if t.alias_or_name != alias and (d := catalog.table(t.name)) is not None
        for c in d.columns
    }

    def on_table(column: exp.Column) -> bool:
        if column.table:
            return column.table == alias
        name = column.name
        return declared.column(name) is not None and name not in inner and name not in other_columns

    kept = []
    for conjunct in _conjuncts(where.this):
        columns = list(conjunct.find_all(exp.Column))
        nested = conjunct.find(exp.Select) is not None
        if columns and not nested and all(on_table(c) for c in columns):
            kept.append(conjunct)
    return kept


class _Refuse:
    """Builds a located refusal of a correlated subquery, pointing at the whole subquery."""

    def __init__(self, sql: str, sub: Subquery) -> None:
        self.sql, self.sub = sql, sub

    def __call__(self, what: str, why: str, fix: str | None = None) -> QueryError:
        return QueryError(
            f"{what}.",
            clause=self.sub.clause,
            sql=self.sql,
            span=span_at(self.sql, self.sub.start, self.sql[self.sub.start : self.sub.end + 1]),
            why=why,
            fix=fix
            or "equate one of the subquery's columns with a column of a public table of the "
            "outer query, in the subquery's WHERE, and refer to the outer query nowhere else.",
        )
