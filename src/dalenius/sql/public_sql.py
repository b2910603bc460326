"""Queries over public tables alone: checked against an allow-list, then run as written.

A table the custodian declares public (``public = true``) belongs to no privacy unit, so an exact
answer computed from public tables alone reveals nothing the catalog protects: it is answered
exactly and free (:class:`~dalenius.core.errors.PublicQuery`). Such a query may use SQL the
private path does not plan — correlated subqueries, HAVING over a scalar subquery, ``NOT IN``,
``COUNT(DISTINCT ...)`` (TPC-H Q2, Q11, Q16) — so it is not planned but passed through to the
engine. The pass-through is confined: before any data is read, :func:`public_query` checks with an
allow-list that

* the statement is one SELECT (``WITH`` allowed, not ``RECURSIVE``; no set operations, ``VALUES``,
  ``LATERAL``, ``UNNEST``, windows, ``INTO``);
* every table it reads is a public catalog table written without a schema, or a ``WITH`` or
  subquery name, resolved scope by scope as the engine resolves names: no private table anywhere,
  no schema-qualified name, no table function (``read_csv(...)``, ``duckdb_tables()``), no file
  path (``FROM 'data.csv'``), no system catalog;
* every column resolves to a declared column of those tables (the only columns the engine's
  relations expose) or to an output of a ``WITH`` or subquery;
* every function is an aggregate or scalar function the binder accepts, every cast to a plain
  type (no ``regclass``).

The checked statement is rewritten with each table and column spelled as the catalog declares
them (quoted, so the engine resolves exactly the relation the executor made for the table), and
written in the engine's dialect when it runs.
"""

from __future__ import annotations

import re
from functools import partial

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope

from dalenius.core.catalog import Catalog, Table
from dalenius.core.dialect import Dialect
from dalenius.core.errors import PublicQuery, QueryError
from dalenius.sql.expressions import FUNCS
from dalenius.sql.parse import span_of

MAX_PUBLIC_ROWS = 100_000
"""The most rows an answer over public tables may have (a larger one is refused: aggregate it,
or add LIMIT). The limit keeps one request's answer, held in memory and sent whole, bounded."""

_STRUCTURE: tuple[type[exp.Expr], ...] = (
    exp.Select, exp.From, exp.Join, exp.Where, exp.Group, exp.Having, exp.Order, exp.Ordered,
    exp.Limit, exp.Offset, exp.Subquery, exp.With, exp.CTE, exp.Table, exp.TableAlias, exp.Alias,
    exp.Column, exp.Identifier, exp.Star, exp.Literal, exp.Null, exp.Boolean, exp.Paren,
    exp.Distinct, exp.DataType, exp.DataTypeParam, exp.Interval, exp.Var,
)  # fmt: skip
_OPERATORS: tuple[type[exp.Expr], ...] = (
    exp.And, exp.Or, exp.Not, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
    exp.NullSafeNEQ, exp.Is, exp.In, exp.Between, exp.Like, exp.ILike, exp.Escape, exp.Exists,
    exp.Any, exp.All, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.DPipe,
    exp.Case, exp.If, exp.Cast, exp.TryCast, exp.Extract,
)  # fmt: skip
_AGGREGATES: tuple[type[exp.Expr], ...] = (
    exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Median, exp.PercentileCont,
    exp.PercentileDisc, exp.WithinGroup, exp.Variance, exp.VariancePop, exp.Stddev,
    exp.StddevPop, exp.StddevSamp,
)  # fmt: skip
ALLOWED = frozenset((*_STRUCTURE, *_OPERATORS, *_AGGREGATES, *FUNCS))
"""Every node class a query over public tables may hold (exact classes: a subclass is not
admitted by its parent's entry)."""

_CASTS = frozenset(
    {
        exp.DType.TINYINT, exp.DType.SMALLINT, exp.DType.INT, exp.DType.BIGINT,
        exp.DType.FLOAT, exp.DType.DOUBLE, exp.DType.DECIMAL, exp.DType.VARCHAR,
        exp.DType.CHAR, exp.DType.TEXT, exp.DType.DATE, exp.DType.BOOLEAN,
    }
)  # fmt: skip
_SCHEMA_TYPES = {
    "int": "BIGINT",
    "float": "DOUBLE",
    "str": "VARCHAR",
    "bool": "BOOLEAN",
    "date": "DATE",
}
_FIX = "read only the public tables {tables}, their declared columns and the functions the SQL page lists."


def public_query(tree: exp.Expr, catalog: Catalog, sql: str, dialect: str) -> PublicQuery | None:
    """The query ``tree`` as a :class:`PublicQuery` if it reads public catalog tables and no
    private one; ``None`` if it reads a private table (or no catalog table), for the binder.

    Raises:
        QueryError: the query reads public tables but breaks the allow-list (named: the function,
            table or clause, why, and the fix), before any data is read.
    """
    names = {
        t.name.lower()
        for t in tree.find_all(exp.Table)
        if isinstance(t.this, exp.Identifier) and not t.args.get("db")
    }
    tables = [t for t in (catalog.table(n) for n in names) if t is not None]
    if not tables or any(not t.public for t in tables):
        return None
    return _Checker(catalog, sql, dialect).check(tree)


class _Checker:
    """The allow-list of one query over public tables, and its rewriting for the engine."""

    def __init__(self, catalog: Catalog, sql: str, dialect: str) -> None:
        self.catalog = catalog
        self.sql = sql
        self.dialect = dialect
        self.public = [t for t in catalog.tables if t.public]

    def error(
        self, what: str, node: exp.Expr | None, *, clause: str, why: str, fix: str = ""
    ) -> QueryError:
        return QueryError(
            what,
            clause=clause,
            sql=self.sql,
            span=span_of(node, self.sql) if node is not None else None,
            why=why,
            fix=fix or _FIX.format(tables=", ".join(t.name for t in self.public)),
        )

    def check(self, tree: exp.Expr) -> PublicQuery:
        """Check ``tree`` node by node, resolve its names, and describe its answer."""
        if not isinstance(tree, exp.Select):
            raise self.error(
                f"a query over public tables is one SELECT, not {type(tree).__name__.upper()}.",
                tree,
                clause="statement",
                why="only a single SELECT statement is passed through to the engine.",
                fix="ask each SELECT on its own.",
            )
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for node in tree.walk():
            self.allowed(node, ctes)
        qualified = self.qualified(tree)
        columns, types, kinds = _outputs(qualified, self.public, self.dialect)
        read = self.resolve(qualified)
        names = ", ".join(t.name for t in read)
        return PublicQuery(
            f"the query reads only public tables ({names}): it is answered exactly, by running "
            "it on them, and spends nothing.",
            columns=columns,
            types=types,
            kinds=kinds,
            tables=tuple(read),
            statement=partial(_written, _limited(qualified, MAX_PUBLIC_ROWS + 1)),
            max_rows=MAX_PUBLIC_ROWS,
            clause="FROM",
            sql=self.sql,
            why="public tables belong to no privacy unit: the custodian declared them public.",
            fix="run it (free).",
        )

    def allowed(self, node: exp.Expr, ctes: set[str]) -> None:
        """Refuse ``node`` unless the allow-list admits it (tables checked by name)."""
        if isinstance(node, exp.Table):
            self.table(node, ctes)
        elif type(node) not in ALLOWED:
            if isinstance(node, exp.Func):
                name = node.name if isinstance(node, exp.Anonymous) else node.sql_name()
                raise self.error(
                    f"the function {name.upper()} is not allowed in a query over public tables.",
                    node,
                    clause=_clause(node),
                    why="a query over public tables runs on the engine as written, so it may call "
                    "only the aggregates and scalar functions the SQL page lists, which read "
                    "nothing but their arguments.",
                )
            raise self.error(
                f"{_shown(node)} is not supported in a query over public tables.",
                node,
                clause=_clause(node),
                why="a query over public tables runs on the engine as written, so it may use only "
                "the SELECT clauses, joins, subqueries, operators and functions of an allow-list.",
            )
        elif isinstance(node, exp.Var) and not isinstance(node.parent, exp.Extract | exp.Interval):
            raise self.error(
                f"{node.name} is not a column or a value.",
                node,
                clause=_clause(node),
                why="a bare word stands only for a date part (EXTRACT(YEAR FROM d), INTERVAL '3' MONTH).",
            )
        elif isinstance(node, exp.DataType) and node.this not in _CASTS:
            raise self.error(
                f"a cast to {node.sql(dialect=self.dialect)} is not allowed.",
                node,
                clause=_clause(node),
                why="casts are to numbers, text, dates and booleans only.",
            )
        elif isinstance(node, exp.With) and node.args.get("recursive"):
            raise self.error(
                "WITH RECURSIVE is not supported.",
                node,
                clause="WITH",
                why="a recursive query could run without end; a WITH query is read once.",
                fix="remove RECURSIVE.",
            )
        elif isinstance(node, exp.Column) and (node.args.get("db") or node.args.get("catalog")):
            raise self.error(
                f"the column {node.sql(dialect=self.dialect)} names a schema.",
                node,
                clause=_clause(node),
                why="columns are read only from the tables the query reads.",
            )

    def table(self, node: exp.Table, ctes: set[str]) -> None:
        """Refuse a table reference other than a public catalog table or a WITH name."""
        why = "a query over public tables reads only the catalog's public tables, by name."
        if not isinstance(node.this, exp.Identifier):
            inner = node.this
            name = (
                inner.name
                if isinstance(inner, exp.Anonymous)
                else getattr(inner, "sql_name", lambda: "?")()
            )
            raise self.error(
                f"the table function {name.upper()}(...) is not allowed.",
                node,
                clause="FROM",
                why=why,
            )
        if node.args.get("db") or node.args.get("catalog"):
            raise self.error(
                f"the schema-qualified name {node.sql(dialect=self.dialect)} is not allowed.",
                node,
                clause="FROM",
                why=why,
            )
        extra = [k for k, v in node.args.items() if v and k not in ("this", "alias")]
        if extra:
            raise self.error(
                f"{node.sql(dialect=self.dialect)}: {extra[0].upper()} is not supported on a table.",
                node,
                clause="FROM",
                why=why,
            )
        name = node.name.lower()
        table = self.catalog.table(name)
        if name in ctes and table is not None:
            raise self.error(
                f"the WITH name {node.name!r} hides the catalog's table of that name.",
                node,
                clause="WITH",
                why="a name must say which relation it reads.",
                fix="give the WITH query another name.",
            )
        if name in ctes:
            return
        if table is None or not table.public:
            raise self.error(f"unknown table {node.name!r}.", node, clause="FROM", why=why)

    def qualified(self, tree: exp.Expr) -> exp.Select:
        """``tree`` with every column qualified by its source, checked against the declared
        columns of the public tables (sqlglot's qualifier, which resolves names scope by scope).
        """
        try:
            out = qualify(
                tree.copy(),
                schema=_schema(self.public),
                dialect=self.dialect,
                quote_identifiers=False,
                validate_qualify_columns=True,
            )
        except SqlglotError as exc:
            what = str(exc).split(". Line")[0].rstrip(".")
            named = re.match(r"Column '([^']+)'", what)
            node = next(
                (c for c in tree.find_all(exp.Column) if named and c.name == named.group(1)), None
            )
            raise self.error(
                f"unknown column {named.group(1)!r}." if named else what + ".",
                node,
                clause="SELECT",
                why="every column must be a declared column of a table the query reads, or an "
                "output of one of its subqueries.",
                fix="check the column names against the catalog (dalenius catalog, or the "
                "dataset's description).",
            ) from None
        assert isinstance(out, exp.Select)
        return out

    def resolve(self, tree: exp.Select) -> list[Table]:
        """The public tables ``tree`` reads, each reference (and each column read through it,
        correlated ones too) spelled as the catalog declares it; a reference that resolves to
        neither a public table nor a WITH query or subquery of its scope is refused.
        """
        read: dict[str, Table] = {}
        seen: set[int] = set()
        scopes = traverse_scope(tree)
        for scope in scopes:
            for name, source in scope.sources.items():
                if isinstance(source, Scope):
                    seen.update(id(t) for t in scope.tables if t.alias_or_name == name)
                    continue
                table = self.catalog.table(source.name) if isinstance(source, exp.Table) else None
                if table is None or not table.public:
                    raise self.error(
                        f"{name!r} is not a public table.",
                        None,
                        clause="FROM",
                        why="a query over public tables reads only the catalog's public tables.",
                    )
                read[table.name] = table
                seen.add(id(source))
        stray = [t for t in tree.find_all(exp.Table) if id(t) not in seen]
        if stray:
            raise self.error(
                f"{stray[0].name!r} is not a table of its scope.",
                None,
                clause="FROM",
                why="each name must resolve to a public table or a WITH query visible where it "
                "is read.",
            )
        for scope in scopes:
            _respell(scope, read)
        return list(read.values())


def _respell(scope: Scope, read: dict[str, Table]) -> None:
    """Spell the tables of ``scope`` and every column it reads from a table (through its own
    sources or, correlated, an enclosing scope's) as the catalog declares them, quoted.
    """
    for source in scope.sources.values():
        if isinstance(source, exp.Table):
            source.set("this", exp.to_identifier(_table(read, source.name).name, quoted=True))
    for column in scope.columns:
        holder: Scope | None = scope
        while holder is not None and column.table not in holder.sources:
            holder = holder.parent
        found = holder.sources[column.table] if holder is not None else None
        if not isinstance(found, exp.Table):
            continue
        declared = {c.name.lower(): c.name for c in _table(read, found.name).columns}
        if column.name.lower() in declared:
            column.set("this", exp.to_identifier(declared[column.name.lower()], quoted=True))


def _schema(public: list[Table]) -> dict[str, object]:
    """The public tables' declared columns, typed, as sqlglot's qualifier reads a schema."""
    return {t.name: {c.name: _SCHEMA_TYPES[c.type] for c in t.columns} for t in public}


def _table(read: dict[str, Table], name: str) -> Table:
    return next(t for key, t in read.items() if key.lower() == name.lower())


def _outputs(
    tree: exp.Select, public: list[Table], dialect: str
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Each output's name, catalog type and kind (``key``: a value as read; ``count`` or
    ``exact``: an aggregate whose interval is itself), known before any data is read.
    """
    typed = annotate_types(tree.copy(), schema=_schema(public), dialect=dialect)
    assert isinstance(typed, exp.Select)
    names, types, kinds = [], [], []
    for item in typed.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        names.append(_name(item, node, dialect))
        kind = _type(item.type)
        types.append(kind)
        aggregate = node.find(exp.AggFunc) is not None and kind in ("int", "float")
        kinds.append("count" if isinstance(node, exp.Count) else "exact" if aggregate else "key")
    return tuple(names), tuple(types), tuple(kinds)


def _name(item: exp.Expr, node: exp.Expr, dialect: str) -> str:
    """An output's name: its alias as written, its column, else its expression's text."""
    if isinstance(item, exp.Alias) and not item.alias.startswith("_col_"):
        return item.alias
    if isinstance(node, exp.Column):
        return node.name
    plain = node.copy()
    for column in plain.find_all(exp.Column):
        column.set("table", None)
    return plain.sql(dialect=dialect)


def _type(data: exp.DataType | None) -> str:
    """A sqlglot type as the catalog names types."""
    if data is None:
        return "str"
    if data.is_type(*exp.DataType.INTEGER_TYPES):
        return "int"
    if data.is_type(*exp.DataType.REAL_TYPES):
        return "float"
    if data.is_type(exp.DType.DATE):
        return "date"
    if data.is_type(exp.DType.BOOLEAN):
        return "bool"
    return "str"


def _limited(tree: exp.Select, rows: int) -> exp.Select:
    """``tree`` reading at most ``rows`` rows (its own LIMIT, if smaller, kept)."""
    limit = tree.args.get("limit")
    value = limit.expression if isinstance(limit, exp.Limit) else None
    if isinstance(value, exp.Literal) and value.is_int and int(value.this) <= rows:
        return tree
    return tree.limit(rows, copy=True)


def _written(tree: exp.Select, dialect: Dialect) -> str:
    """The checked statement in the engine's dialect."""
    return tree.sql(dialect=dialect.name)


def _clause(node: exp.Expr) -> str:
    """The clause ``node`` stands in (the nearest enclosing one), for the refusal's name."""
    for parent in (node, *_ancestors(node)):
        for kind, clause in (
            (exp.Where, "WHERE"), (exp.Group, "GROUP BY"), (exp.Having, "HAVING"),
            (exp.Order, "ORDER BY"), (exp.From, "FROM"), (exp.Join, "JOIN"), (exp.With, "WITH"),
        ):  # fmt: skip
            if isinstance(parent, kind):
                return clause
        if isinstance(parent, exp.Select):
            return "SELECT"
    return "statement"


def _ancestors(node: exp.Expr) -> list[exp.Expr]:
    out = []
    parent = node.parent
    while parent is not None:
        out.append(parent)
        parent = parent.parent
    return out


def _shown(node: exp.Expr) -> str:
    """A node as a refusal names it: its SQL keyword."""
    key = node.key.upper().replace("_", " ")
    return {
        "UNION": "UNION",
        "VALUES": "VALUES",
        "LATERAL": "LATERAL",
        "WINDOW": "a window (OVER)",
    }.get(key, key)
