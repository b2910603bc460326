"""Checks on the SQL text and its syntax tree that run before the binder, in bounded time.

Two jobs, both decided from the text alone (never from data):

* **Size and shape before parsing.** sqlglot's parser is recursive: some 40 nested brackets
  exhaust Python's stack. The text is tokenized first (a linear scan that knows strings and
  comments) and refused if it is too long, has too many tokens, nests brackets or CASE too deeply,
  or holds more than one statement. A trailing comment after the final ``;`` is not a statement.
  Errors inside the tokenizer (an unterminated comment or string) are located here, since sqlglot
  reports no position for them.
* **Every argument of every accepted node is consumed or refused.** :data:`HANDLED` lists, for
  each syntax node the binder accepts, the arguments it reads. Any other argument that is set
  (``TABLESAMPLE`` on a table, ``NULLS FIRST`` flags the binder could not honour, ``GROUP BY
  ROLLUP`` ...) is refused here, naming the clause, so no modifier is ever dropped silently.
  Argument *values* the binder restricts (a join's kind, for instance) are checked by the binder.

Example:
    >>> len(check_text("SELECT COUNT(*) FROM t; -- done"))  # the comment is no statement
    8
    >>> sorted(HANDLED[exp.Between])
    ['high', 'low', 'symmetric', 'this']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from fractions import Fraction

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import Token, TokenType

from dalenius.core.errors import QueryError, SourceSpan

MAX_SQL_CHARS = 100_000
"""Longest query text accepted (characters)."""

MAX_TOKENS = 10_000
"""Most tokens (words, numbers, operators) in one query."""

_WRITTEN: ContextVar[tuple[int, int]] = ContextVar("written_in", default=(0, 0))
"""Characters and tokens the engine itself wrote into the text being checked (see
:func:`written_in`), allowed beyond :data:`MAX_SQL_CHARS` and :data:`MAX_TOKENS`."""


@contextmanager
def written_in(chars: int, tokens: int) -> Iterator[None]:
    """Allow ``chars`` more characters and ``tokens`` more tokens in the texts checked inside.

    The limits bound what an analyst may send; a text the engine writes from public values
    (a correlated subquery's released values, one ``CASE`` branch per key of a public table)
    grows with those values, and its size is bounded where it is written.
    """
    token = _WRITTEN.set((chars, tokens))
    try:
        yield
    finally:
        _WRITTEN.reset(token)


MAX_NESTING = 24
"""Deepest nesting of brackets and CASE ... END (sqlglot's recursive parser needs ~25 frames each)."""

MAX_MAGNITUDE = Fraction(10**18)
"""Largest magnitude of a contribution bound, or of an aggregated value by its derived bounds."""

MAX_TREE_DEPTH = 100
"""Deepest syntax tree accepted after parsing (a chain of 100 ORs, for instance)."""

# Arguments sqlglot's dialects set to describe their own spelling of an operation (NULL handling
# of ||, LEAST, COALESCE's aliases, COUNT's result type, typed division). Dalenius gives each
# operation the one semantics its documentation states, whichever dialect wrote it.
_DIALECT_FLAGS = frozenset({"typed", "safe", "ignore_nulls", "big_int", "is_nvl", "is_null"})

_BINARY = frozenset({"this", "expression"})
_UNARY = frozenset({"this"})

HANDLED: dict[type[exp.Expr], frozenset[str]] = {
    # statement structure
    exp.Select: frozenset(
        {
            "with_",
            "expressions",
            "distinct",
            "from_",
            "joins",
            "where",
            "group",
            "having",
            "order",
            "limit",
            "offset",
        }
    ),
    exp.With: frozenset({"expressions", "recursive"}),
    exp.CTE: frozenset({"this", "alias"}),
    exp.From: _UNARY,
    exp.Join: frozenset({"this", "on", "side", "kind", "using"}),
    exp.Table: frozenset({"this", "alias", "db", "catalog"}),
    exp.TableAlias: _UNARY,
    exp.Subquery: frozenset({"this", "alias"}),
    exp.Where: _UNARY,
    exp.Group: frozenset({"expressions"}),
    exp.Having: _UNARY,
    exp.Order: frozenset({"expressions"}),
    exp.Ordered: frozenset({"this", "desc", "nulls_first"}),
    exp.Limit: frozenset({"expression"}),
    exp.Offset: frozenset({"expression"}),
    exp.Alias: frozenset({"this", "alias"}),
    exp.Distinct: frozenset({"expressions"}),
    # names and constants
    exp.Column: frozenset({"this", "table"}),
    exp.Identifier: frozenset({"this", "quoted"}),
    exp.Star: frozenset(),
    exp.Literal: frozenset({"this", "is_string"}),
    exp.Boolean: _UNARY,
    exp.Null: frozenset(),
    exp.Var: _UNARY,
    exp.Paren: _UNARY,
    # operators
    **dict.fromkeys(
        (
            exp.EQ,
            exp.NEQ,
            exp.GT,
            exp.GTE,
            exp.LT,
            exp.LTE,
            exp.Add,
            exp.Sub,
            exp.Mul,
            exp.Div,
            exp.Mod,
            exp.IntDiv,
            exp.And,
            exp.Or,
            exp.DPipe,
            exp.Is,
        ),
        _BINARY,
    ),
    exp.Not: _UNARY,
    exp.Neg: _UNARY,
    exp.In: frozenset({"this", "expressions", "query", "unnest"}),
    exp.Exists: _UNARY,
    exp.Between: frozenset({"this", "low", "high", "symmetric"}),
    exp.Like: frozenset({"this", "expression", "negate"}),
    exp.ILike: frozenset({"this", "expression", "negate"}),
    exp.Case: frozenset({"this", "ifs", "default"}),
    exp.If: frozenset({"this", "true", "false"}),
    exp.Extract: _BINARY,
    # scalar functions
    **dict.fromkeys(
        (
            exp.Abs,
            exp.Lower,
            exp.Upper,
            exp.Length,
            exp.Trim,
            exp.Floor,
            exp.Ceil,
            exp.Year,
            exp.Month,
            exp.Day,
        ),
        _UNARY,
    ),
    exp.Coalesce: frozenset({"this", "expressions"}),
    exp.Least: frozenset({"this", "expressions"}),
    exp.Greatest: frozenset({"this", "expressions"}),
    exp.Round: frozenset({"this", "decimals"}),
    exp.Substring: frozenset({"this", "start", "length"}),
    exp.Interval: frozenset({"this", "unit"}),
    exp.Anonymous: frozenset({"this", "expressions"}),
    # aggregates
    exp.Count: _UNARY,
    **dict.fromkeys(
        (
            exp.Sum,
            exp.Avg,
            exp.Min,
            exp.Max,
            exp.Median,
            exp.VariancePop,
            exp.Variance,
            exp.StddevPop,
            exp.StddevSamp,
            exp.Stddev,
        ),
        _UNARY,
    ),
    exp.Quantile: frozenset({"this", "quantile"}),
    exp.PercentileCont: _BINARY,
    exp.PercentileDisc: _BINARY,
    exp.WithinGroup: _BINARY,
}
"""For each syntax node the binder accepts, the arguments it reads (or refuses itself)."""

# How the analyst spells a refused modifier, by (node, argument); else derived from the names.
_MODIFIER_NAMES: dict[tuple[type[exp.Expr], str], str] = {
    (exp.Table, "sample"): "TABLESAMPLE",
    (exp.Select, "sample"): "USING SAMPLE",
    (exp.Subquery, "sample"): "TABLESAMPLE",
    (exp.Select, "qualify"): "QUALIFY",
    (exp.Select, "windows"): "WINDOW",
    (exp.Select, "kind"): "SELECT AS",
    (exp.Select, "into"): "INTO",
    (exp.Select, "locks"): "FOR UPDATE",
    (exp.Select, "connect"): "CONNECT BY",
    (exp.Select, "laterals"): "LATERAL",
    (exp.Select, "pivots"): "PIVOT",
    (exp.Table, "pivots"): "PIVOT",
    (exp.Table, "laterals"): "LATERAL",
    (exp.Group, "rollup"): "GROUP BY ROLLUP",
    (exp.Group, "cube"): "GROUP BY CUBE",
    (exp.Group, "grouping_sets"): "GROUP BY GROUPING SETS",
    (exp.Group, "all"): "GROUP BY ALL",
    (exp.Group, "totals"): "WITH TOTALS",
    (exp.Limit, "limit_options"): "LIMIT ... WITH TIES / PERCENT",
    (exp.TableAlias, "columns"): "column names in an alias, t(a, b),",
    (exp.CTE, "materialized"): "MATERIALIZED",
    (exp.Star, "except_"): "* EXCLUDE",
    (exp.Star, "replace"): "* REPLACE",
    (exp.Star, "rename"): "* RENAME",
    (exp.Min, "count"): "MIN(x, n)",
    (exp.Order, "this"): "ORDER BY inside an aggregate",
    (exp.Distinct, "on"): "DISTINCT ON",
    (exp.Table, "only"): "FROM ONLY",
    (exp.Table, "when"): "AT/BEFORE (time travel)",
    (exp.Table, "version"): "FOR SYSTEM_TIME (time travel)",
    (exp.Table, "hints"): "table hints",
    (exp.Join, "global_"): "GLOBAL JOIN",
    (exp.Join, "match_condition"): "MATCH_CONDITION",
    (exp.Max, "count"): "MAX(x, n)",
}

# The clause an argument of a SELECT (or a FROM-subquery) stands in.
_CLAUSES = {
    "expressions": "SELECT",
    "distinct": "SELECT",
    "from_": "FROM",
    "joins": "JOIN",
    "where": "WHERE",
    "group": "GROUP BY",
    "having": "HAVING",
    "order": "ORDER BY",
    "limit": "LIMIT",
    "offset": "OFFSET",
    "with_": "WITH",
    "qualify": "QUALIFY",
    "windows": "WINDOW",
}

_OPENERS = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE, TokenType.CASE}
_CLOSERS = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.END}
_CLAUSE_WORDS = {
    "SELECT": "SELECT",
    "FROM": "FROM",
    "JOIN": "JOIN",
    "WHERE": "WHERE",
    "GROUP": "GROUP BY",
    "HAVING": "HAVING",
    "ORDER": "ORDER BY",
    "LIMIT": "LIMIT",
    "OFFSET": "OFFSET",
    "WITH": "WITH",
}


# -- the text -----------------------------------------------------------------------------------


def tokenize(sql: str, dialect: str = "duckdb") -> list[Token]:
    """The tokens of ``sql`` (sqlglot's tokenizer knows strings and comments); refuses oversized text.

    Raises:
        QueryError: text over :data:`MAX_SQL_CHARS`, an unterminated comment or string (located).
    """
    if len(sql) > MAX_SQL_CHARS + _WRITTEN.get()[0]:
        raise QueryError(
            f"the query is {len(sql):,} characters long; at most {MAX_SQL_CHARS:,} are accepted.",
            clause="statement",
            sql=sql,
            span=span_at(sql, 0, sql[:6]),
            fix="send a shorter query, e.g. IN lists instead of many ORs.",
        )
    try:
        return list(Dialect.get_or_raise(dialect).tokenize(sql))
    except TokenError:
        start, what = _unterminated(sql)
        raise QueryError(
            f"{what} is not closed.",
            clause=clause_before(sql, start, dialect),
            sql=sql,
            span=span_at(sql, start, sql[start : start + 2]),
            fix="close it ('*/' ends a comment; a quote ends a string) or remove it.",
        ) from None


def check_text(sql: str, dialect: str = "duckdb") -> list[Token]:
    """Refuse text too big or too deeply nested to parse safely, or holding several statements."""
    tokens = tokenize(sql, dialect)
    if len(tokens) > MAX_TOKENS + _WRITTEN.get()[1]:
        raise QueryError(
            f"the query has {len(tokens):,} tokens; at most {MAX_TOKENS:,} are accepted.",
            clause="statement",
            sql=sql,
            span=token_span(sql, tokens[MAX_TOKENS]),
            fix="send a shorter query.",
        )
    depth = 0
    for token in tokens:
        if token.token_type in _OPENERS:
            depth += 1
            if depth > MAX_NESTING:
                raise QueryError(
                    f"brackets and CASE expressions are nested more than {MAX_NESTING} deep.",
                    clause=clause_before(sql, token.start, dialect, tokens),
                    sql=sql,
                    span=token_span(sql, token),
                    why="deeper nesting cannot be parsed in bounded time and memory.",
                    fix="remove redundant brackets, or flatten nested CASE/subqueries.",
                )
        elif token.token_type in _CLOSERS:
            depth = max(depth - 1, 0)
    _one_statement(sql, tokens)
    return tokens


def _one_statement(sql: str, tokens: Sequence[Token]) -> None:
    for i, token in enumerate(tokens):
        if token.token_type != TokenType.SEMICOLON:
            continue
        rest = [t for t in tokens[i + 1 :] if t.token_type != TokenType.SEMICOLON]
        if rest:
            raise QueryError(
                "one statement at a time; a second statement starts here.",
                clause="statement",
                sql=sql,
                span=token_span(sql, rest[0]),
                fix="send each SELECT on its own; remove the ';' and what follows it.",
            )


def _unterminated(sql: str) -> tuple[int, str]:
    """Offset and kind of the comment or string the tokenizer found unterminated."""
    i, n = 0, len(sql)
    while i < n:
        two = sql[i : i + 2]
        if two == "--":
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif two == "/*":
            end = sql.find("*/", i + 2)
            if end < 0:
                return i, "a /* comment"
            i = end + 2
        elif sql[i] in "'\"`":
            quote, j = sql[i], i + 1
            while j < n and not (sql[j] == quote and sql[j + 1 : j + 2] != quote):
                j += 2 if sql[j] == quote or sql[j] == "\\" else 1
            if j >= n:
                kind = "a string" if quote == "'" else "a quoted name"
                return i, kind
            i = j + 1
        else:
            i += 1
    return max(n - 1, 0), "the text"


# -- positions ----------------------------------------------------------------------------------


def span_at(sql: str, start: int, text: str) -> SourceSpan:
    """The 1-based line and column of character ``start`` in ``sql``."""
    line = sql.count("\n", 0, start) + 1
    column = start - (sql.rfind("\n", 0, start) + 1) + 1
    return SourceSpan(line=line, column=column, text=text.splitlines()[0] if text else text)


def token_span(sql: str, token: Token) -> SourceSpan:
    """Where a token stands."""
    return span_at(sql, token.start, sql[token.start : token.end + 1])


def keyword_span(sql: str, words: Iterable[str], dialect: str = "duckdb") -> SourceSpan | None:
    """The first token spelling one of ``words`` (case-insensitive), outside strings and comments."""
    wanted = {w.upper() for w in words}
    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(sql)
    except TokenError:
        return None
    for token in tokens:
        if token.text.upper() in wanted and token.token_type != TokenType.STRING:
            return token_span(sql, token)
    return None


def clause_span(sql: str, clause: str | None) -> SourceSpan:
    """Where a clause's keyword stands (``GROUP`` for GROUP BY ...), else the query's start."""
    word = (clause or "").split(" ")[-1 if clause == "WITH DIFFERENTIAL_PRIVACY" else 0]
    found = keyword_span(sql, [word], _dialect_of(sql)) if word else None
    if found is not None:
        return found
    stripped = sql.lstrip()
    start = len(sql) - len(stripped)
    return span_at(sql, start, stripped.split(maxsplit=1)[0] if stripped else "")


def located(error: QueryError, sql: str) -> QueryError:
    """``error`` pointing at its clause in ``sql`` when it was raised without a position."""
    if error.span is not None:
        return error
    return error.relocated(sql, clause_span(sql, error.clause))


def _dialect_of(sql: str) -> str:
    return "bigquery" if "DIFFERENTIAL_PRIVACY" in sql.upper() else "duckdb"


def clause_before(
    sql: str, offset: int, dialect: str = "duckdb", tokens: Sequence[Token] | None = None
) -> str:
    """The clause keyword (SELECT, FROM, WHERE ...) last seen before character ``offset``."""
    if tokens is None:
        try:
            tokens = Dialect.get_or_raise(dialect).tokenize(sql[:offset])
        except TokenError:
            return "statement"
    clause = "statement"
    for token in tokens:
        if token.start >= offset:
            break
        word = token.text.upper()
        if word in _CLAUSE_WORDS and token.token_type != TokenType.STRING:
            clause = _CLAUSE_WORDS[word]
    return clause


def clause_at(tokens: Sequence[Token], index: int) -> str:
    """The clause token ``index`` stands in, in its own query: the last clause keyword before it
    at its own depth of parentheses, else at the depth enclosing it (``SUM(x - (SELECT …))`` is
    in SELECT); a subquery's own clauses, before it, do not count.
    """
    stack: list[str | None] = [None]
    for token in tokens[:index]:
        if token.token_type == TokenType.L_PAREN:
            stack.append(None)
        elif token.token_type == TokenType.R_PAREN:
            if len(stack) > 1:
                stack.pop()
        else:
            word = token.text.upper()
            if word in _CLAUSE_WORDS and token.token_type != TokenType.STRING:
                stack[-1] = _CLAUSE_WORDS[word]
    return next((c for c in reversed(stack) if c is not None), "statement")


# -- the tree -----------------------------------------------------------------------------------


def clause_of(node: exp.Expr) -> str:
    """The clause of the innermost SELECT that ``node`` stands in."""
    current = node
    while current.parent is not None:
        parent = current.parent
        if isinstance(parent, exp.Select | exp.Subquery) and current.arg_key in _CLAUSES:
            return _CLAUSES[current.arg_key]
        if isinstance(parent, exp.Join):
            return "JOIN"
        current = parent
    return "statement"


def modifier_name(node: exp.Expr, arg: str) -> str:
    """How an analyst would name argument ``arg`` of ``node`` (``TABLESAMPLE``, ``ROLLUP`` ...)."""
    value = node.args.get(arg)
    if isinstance(node, exp.Join) and arg == "method" and isinstance(value, str):
        return f"{value.upper()} JOIN"
    for cls in type(node).__mro__:
        if (cls, arg) in _MODIFIER_NAMES:
            return _MODIFIER_NAMES[(cls, arg)]
    owner = node.sql_name() if isinstance(node, exp.Func) else node.key.upper()
    return f"{arg.strip('_').replace('_', ' ').upper()} on {owner}"


def is_set(value: object) -> bool:
    """Whether an argument is given (``None``, ``False`` and empty lists are not)."""
    return value is not None and value is not False and value != []


Locate = Callable[[exp.Expr, str], SourceSpan | None]
"""Finds a node's span in the SQL (``parse.span_of``)."""


def check_tree(tree: exp.Expr, sql: str, locate: Locate | None = None) -> None:
    """Refuse a tree nested too deeply, or with an argument the binder would not consume."""
    depth_of: dict[int, int] = {id(tree): 1}
    for node in tree.walk(bfs=True):
        depth = depth_of.get(id(node), 1)
        if depth > MAX_TREE_DEPTH:
            clause = clause_of(node)
            raise QueryError(
                f"the expression is nested more than {MAX_TREE_DEPTH} levels deep.",
                clause=clause,
                sql=sql,
                span=clause_span(sql, clause),  # locating the deep node itself is costly
                why="deeper expressions cannot be planned in bounded time and memory.",
                fix="shorten it: write x IN (1, 2, 3) instead of many ORs, and split long conditions.",
            )
        for child in node.iter_expressions():
            depth_of[id(child)] = depth + 1
        handled = HANDLED.get(type(node))
        if handled is None:
            continue  # not accepted: the binder refuses it by name
        for arg, value in node.args.items():
            if arg in handled or arg in _DIALECT_FLAGS or not is_set(value):
                continue
            name = modifier_name(node, arg)
            top = isinstance(node, exp.Select | exp.Subquery)
            raise QueryError(
                f"{name} is not supported.",
                clause=_CLAUSES.get(arg, name) if top else clause_of(node),
                sql=sql,
                span=_where(node, sql, locate, name),
                why="Dalenius answers exactly the question written or refuses it; it cannot "
                "apply this modifier.",
                fix=f"remove {name}, or rewrite the query without it.",
            )


def _where(node: exp.Expr, sql: str, locate: Locate | None, name: str = "") -> SourceSpan | None:
    words = [w for w in re.findall(r"[A-Z]+", name) if w not in ("GROUP", "BY", "ON", "X", "N")]
    if words:
        found = keyword_span(sql, words)
        if found is not None:
            return found
    current: exp.Expr | None = node
    while current is not None:
        span = locate(current, sql) if locate is not None else None
        if span is not None:
            return span
        current = current.parent
    return None
