r"""What the PostgreSQL listener needs from SQL text, decided before any data is read.

A PostgreSQL client sends statements the gateway must sort before answering: a simple query may
hold several statements; an extended query carries ``$1``-style parameters; and a client's
introspection (``\d`` in psql, a JDBC driver's ``getTables``) reads ``pg_catalog`` and
``information_schema``, which the gateway answers from the dataset's public catalog alone
(:mod:`dalenius.server.pgwire.catalog`), never from its data. This module holds the parts that
need the SQL parser (only :mod:`dalenius.sql` imports sqlglot):

- :func:`split_statements`: a simple query's statements, split at top-level semicolons by the
  tokenizer (a semicolon inside a string or a comment does not split);
- :func:`bind_parameters`: each ``$n`` replaced by a literal *node* of the parser's tree — a
  parameter's value is never spliced into the SQL text, so ``' OR 1=1 --`` stays a string;
- :func:`reads_catalog_only`: whether a statement reads only the system catalogs (or no table);
- :func:`shadow_sql`: such a statement rewritten for the shadow catalog's DuckDB.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import TokenType

from dalenius.core.errors import QueryError
from dalenius.sql.parse import DEFAULT_DIALECT


class Untyped(str):
    """A parameter sent as text without a type (node-postgres, JDBC's ``setObject``): as in
    PostgreSQL, the statement decides its type — compared with an ``int`` column, ``'30'`` is
    the number 30.
    """


Literal = None | bool | int | float | str | Decimal | datetime.date
"""A parameter's value, as the listener decoded it from its type and format."""

SYSTEM_SCHEMAS = frozenset({"pg_catalog", "information_schema"})
"""Schemas whose tables the shadow catalog answers."""

SHADOW_SCHEMA = "pgc"
"""The shadow catalog's schema holding its own ``pg_catalog`` tables (see the catalog module)."""

MAX_PARAMETERS = 65535
"""The protocol's limit: a Bind message counts its parameters in 16 bits."""

_PLACEHOLDER = re.compile(r"\$(\d+)")


def split_statements(sql: str) -> list[str]:
    """The statements of a simple query, without empty ones.

    Example:
        >>> split_statements("SET x = 1; SELECT ';' ; ")
        ['SET x = 1', "SELECT ';'"]
    """
    try:
        tokens = sqlglot.tokenize(sql, read="postgres")
    except (TokenError, ValueError):
        return [sql.strip()] if sql.strip() else []
    pieces, start = [], 0
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            pieces.append(sql[start : token.start])
            start = token.end + 1
    pieces.append(sql[start:])
    return [piece.strip() for piece in pieces if piece.strip()]


def parameter_count(sql: str) -> int:
    """The highest ``$n`` in ``sql`` outside strings and comments (0 without parameters).

    Example:
        >>> parameter_count("SELECT COUNT(*) FROM t WHERE a > $2 AND b = '$9'")
        2
    """
    try:
        tokens = sqlglot.tokenize(sql, read="postgres")
    except (TokenError, ValueError):
        return 0
    highest = 0
    for token in tokens:
        if token.token_type in (TokenType.PARAMETER, TokenType.PLACEHOLDER, TokenType.VAR):
            found = _PLACEHOLDER.fullmatch(token.text) or _PLACEHOLDER.fullmatch("$" + token.text)
            if found and (token.token_type != TokenType.VAR or _after_dollar(sql, token.start)):
                highest = max(highest, int(found.group(1)))
        elif token.token_type == TokenType.NUMBER and _after_dollar(sql, token.start):
            highest = max(highest, int(token.text))
    return highest


def _after_dollar(sql: str, start: int) -> bool:
    return start > 0 and sql[start - 1] == "$"


def _literal(value: Literal) -> exp.Expr:
    """The parser's node for one parameter value."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int | Decimal):
        return exp.Literal.number(str(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QueryError(
                f"a parameter's value {value!r} is not a finite number.",
                clause="parameters",
                fix="send a finite number.",
            )
        return exp.Literal.number(repr(value))
    if isinstance(value, datetime.date):
        return exp.Cast(this=exp.Literal.string(value.isoformat()), to=exp.DataType.build("DATE"))
    return exp.Literal.string(str(value))


_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.In, exp.Between)


def _typed(value: Untyped, node: exp.Expr, column_types: Mapping[str, str], number: int) -> Literal:
    """An untyped parameter read as the type of the column it is compared with."""
    parent = node.parent
    while isinstance(parent, exp.Paren | exp.Tuple):
        parent = parent.parent
    if not isinstance(parent, _COMPARISONS):
        return str(value)
    column = next((c for c in parent.find_all(exp.Column) if c.name.lower() in column_types), None)
    kind = column_types.get(column.name.lower()) if column is not None else None
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "bool":
            lowered = value.strip().lower()
            if lowered not in ("t", "true", "f", "false", "1", "0", "yes", "no", "on", "off"):
                raise ValueError(value)
            return lowered in ("t", "true", "1", "yes", "on")
        if kind == "date":
            return datetime.date.fromisoformat(value.strip())
    except ValueError:
        raise QueryError(
            f"the parameter ${number} ({str(value)[:40]!r}) is compared with the {kind} column "
            f"{column.name if column is not None else ''} but is not a {kind}.",
            clause="parameters",
            fix=f"send a {kind} value for ${number}.",
        ) from None
    return str(value)


def bind_parameters(
    sql: str, values: Sequence[Literal], column_types: Mapping[str, str] | None = None
) -> str:
    """``sql`` with each ``$n`` replaced by the literal ``values[n - 1]``, as a parsed node.

    Raises:
        QueryError: the statement cannot be parsed, or names a parameter without a value.

    Example:
        >>> bind_parameters("SELECT COUNT(*) FROM t WHERE sex = $1", ["' OR 1=1 --"])
        "SELECT COUNT(*) FROM t WHERE sex = ''' OR 1=1 --'"
    """
    if not values and not parameter_count(sql):
        return sql
    try:
        tree = sqlglot.parse_one(sql, read="postgres")
    except (ParseError, TokenError) as error:
        raise QueryError(
            "the statement with parameters cannot be parsed.",
            clause="parameters",
            sql=sql,
            why=str(error).splitlines()[0],
            fix="check the statement's syntax; parameters are written $1, $2, ….",
        ) from None

    types = {k.lower(): v for k, v in (column_types or {}).items()}

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Parameter | exp.Placeholder):
            text = node.sql(dialect="postgres")
            found = _PLACEHOLDER.fullmatch(text)
            if found is None:
                raise QueryError(
                    f"the placeholder {text} is not a numbered parameter.",
                    clause="parameters",
                    sql=sql,
                    fix="write parameters as $1, $2, … in the order of their values.",
                )
            number = int(found.group(1))
            if not 1 <= number <= len(values):
                raise QueryError(
                    f"the parameter ${number} has no value ({len(values)} were sent).",
                    clause="parameters",
                    sql=sql,
                    fix="send one value for each of $1 … $n.",
                )
            value = values[number - 1]
            if isinstance(value, Untyped):
                value = _typed(value, node, types, number)
            return _literal(value)
        return node

    return tree.transform(replace).sql(dialect=DEFAULT_DIALECT)


def _parsed(sql: str) -> exp.Expr | None:
    try:
        return sqlglot.parse_one(sql, read="postgres")
    except (ParseError, TokenError, ValueError, RecursionError):
        return None


def _cte_names(tree: exp.Expr) -> set[str]:
    return {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}


def reads_catalog_only(sql: str, dataset_tables: Sequence[str]) -> bool:
    """Whether ``sql`` is a read of the system catalogs only, or of no table at all.

    ``SELECT version()``, ``SELECT 1`` and ``SELECT … FROM pg_catalog.pg_class`` are; a
    statement naming one of the dataset's tables is not, nor anything that is not a query (those
    the listener's own statements or the private path answer).

    Example:
        >>> reads_catalog_only("SELECT relname FROM pg_catalog.pg_class", ["adult"])
        True
        >>> reads_catalog_only("SELECT COUNT(*) FROM adult", ["adult"])
        False
    """
    tree = _parsed(sql)
    if not isinstance(tree, exp.Query):
        return False
    private = {name.lower() for name in dataset_tables}
    ctes = _cte_names(tree)
    for table in tree.find_all(exp.Table):
        name, schema = table.name.lower(), table.db.lower()
        if schema in SYSTEM_SCHEMAS:
            continue
        if name in ctes and not schema:
            continue
        if not schema and name.startswith("pg_") and name not in private:
            continue
        if not name and isinstance(table.this, exp.Func):
            continue  # a table function such as unnest(...) or generate_series(...)
        return False
    return True


_REG_CASTS = {
    "regtype": "pgc_regtype",
    "regclass": "pgc_regclass",
    "regproc": "pgc_regproc",
    "regprocedure": "pgc_regproc",
    "regnamespace": "pgc_regnamespace",
    "regrole": "pgc_regrole",
}
_RENAMED = {"json_build_object": "json_object", "jsonb_build_object": "json_object"}
"""PostgreSQL functions DuckDB has under another name."""
_TEXT_TYPES = {"name", "char", '"char"', "bpchar", "regconfig", "pg_node_tree", "aclitem"}
_OPERATOR = re.compile(r"OPERATOR\s*\(\s*pg_catalog\s*\.\s*([~!<>=]+)\s*\)", re.IGNORECASE)
_COLLATE = re.compile(r'\s+COLLATE\s+(pg_catalog\s*\.\s*)?("default"|"C"|default|C)\b', re.I)


def shadow_sql(
    sql: str,
    tables: frozenset[str],
    session: Mapping[str, str] | None = None,
    settings: Mapping[str, str] | None = None,
) -> str:
    """A catalog statement rewritten for the shadow catalog's DuckDB.

    ``pg_catalog`` tables the shadow catalog holds (``tables``) are read from its own schema;
    function prefixes and collations are dropped; PostgreSQL's ``OPERATOR(pg_catalog.~)`` becomes
    ``~``; casts to the ``reg*`` types become the shadow catalog's lookup functions. The session's
    functions (``version()``, ``current_user`` … named in ``session``) and ``current_setting``
    (from ``settings``) become their values as literals.

    Example:
        >>> shadow_sql("SELECT oid FROM pg_catalog.pg_class WHERE relname ~ 'a'", frozenset({"pg_class"}))
        "SELECT oid FROM pgc.pg_class WHERE REGEXP_MATCHES(relname, 'a')"
    """
    text = _COLLATE.sub("", _OPERATOR.sub(r"\1", sql))
    tree = _parsed(text)
    if tree is None:
        raise QueryError(
            "the catalog query cannot be parsed.",
            clause="catalog",
            sql=sql,
            fix="the gateway answers catalog queries written in PostgreSQL's SQL.",
        )
    if isinstance(tree, exp.Select):
        _name_outputs(tree)
    rewrite = _ShadowRewrite(tables, _cte_names(tree), session or {}, settings or {})
    return tree.transform(rewrite).sql(dialect="duckdb")


class _ShadowRewrite:
    """The node-by-node rewrite of :func:`shadow_sql` (a callable for ``transform``)."""

    def __init__(
        self,
        tables: frozenset[str],
        ctes: set[str],
        session: Mapping[str, str],
        settings: Mapping[str, str],
    ) -> None:
        self.tables = tables
        self.ctes = ctes
        self.values = {k.lower(): v for k, v in session.items()}
        self.known = {k.lower(): v for k, v in settings.items()}

    def __call__(self, node: exp.Expr) -> exp.Expr:
        named = _function_name(node)
        if named in _RENAMED and isinstance(node, exp.Anonymous):
            node.set("this", _RENAMED[named])
            return node
        if named in self.values:
            return exp.Literal.string(self.values[named])
        if named == "current_setting" and isinstance(node, exp.Func):
            args = node.expressions or [node.this]
            first = args[0] if args else None
            if isinstance(first, exp.Literal) and first.is_string:
                return exp.Literal.string(self.known.get(first.this.lower(), ""))
        if isinstance(node, exp.Table | exp.Column):
            return self.relation(node)
        if _catalog_call(node):
            # A replacement's children are not visited by transform: rewrite them here.
            inner: exp.Expr = node.expression
            return inner.transform(self)
        if isinstance(node, exp.Cast):
            return self.cast(node)
        return node

    def relation(self, node: exp.Table | exp.Column) -> exp.Expr:
        """A catalog table (or a column qualified by one) read from the shadow schema."""
        shadow = exp.to_identifier(SHADOW_SCHEMA)
        if isinstance(node, exp.Column):
            if node.table.lower() in self.tables and str(node.db).lower() == "pg_catalog":
                node.set("db", shadow)
            return node
        if isinstance(node.this, exp.Func):
            node.set("db", None)  # pg_catalog.unnest(...) and other table functions
            return node
        name, schema = node.name.lower(), node.db.lower()
        if name in self.tables and (
            schema == "pg_catalog" or (not schema and name not in self.ctes)
        ):
            node.set("db", shadow)
        return node

    def cast(self, node: exp.Cast) -> exp.Expr:
        """Casts to PostgreSQL's own types, in DuckDB's."""
        written = node.to.sql(dialect="postgres").lower()
        target = written.removeprefix("pg_catalog.")
        if target in _REG_CASTS:
            inner = node.this.transform(self)
            return exp.Anonymous(this=_REG_CASTS[target], expressions=[inner])
        if target in _TEXT_TYPES:
            node.set("to", exp.DataType.build("VARCHAR"))
        elif target == "oid":
            node.set("to", exp.DataType.build("BIGINT"))
        elif written.startswith("pg_catalog."):
            node.set("to", exp.DataType.build(target, dialect="postgres"))
        return node


def _catalog_call(node: exp.Expr) -> bool:
    """Whether ``node`` is a call ``pg_catalog.f(...)`` (or ``information_schema.f``)."""
    return (
        isinstance(node, exp.Dot)
        and isinstance(node.this, exp.Identifier)
        and node.this.name.lower() in SYSTEM_SCHEMAS
        and isinstance(node.expression, exp.Func)
    )


def _name_outputs(select: exp.Select) -> None:
    """Give each unnamed output the name PostgreSQL gives it (``version``, ``count``,
    ``?column?``), before the rewrite replaces calls by literals that would lose it.
    """
    named: list[exp.Expr] = []
    for output in select.expressions:
        if isinstance(output, exp.Alias | exp.Star) or (
            isinstance(output, exp.Column) and _function_name(output) is None
        ):
            named.append(output)
            continue
        inner = output.this if isinstance(output, exp.Cast) else output
        name = _function_name(inner) or "?column?"
        if isinstance(inner, exp.Column):
            name = inner.name
        named.append(exp.alias_(output, name, quoted=True))
    select.set("expressions", named)


def _function_name(node: exp.Expr) -> str | None:
    """The lower-case name of a function call (or of ``current_user``-style keywords)."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.CurrentVersion):
        return "version"
    if isinstance(node, exp.CurrentUser):
        return "current_user"
    if isinstance(node, exp.CurrentSchema):
        return "current_schema"
    if isinstance(node, exp.Column) and not node.table:
        name = node.name.lower()
        if name in ("current_user", "session_user", "current_role", "current_catalog", "user"):
            return name
        return None
    if isinstance(node, exp.Func):
        return str(node.sql_name()).lower()
    return None
