"""Dialect-specific SQL pieces: everything that differs between DuckDB, PostgreSQL and Spark.

The rest of :mod:`dalenius.sql.emit` writes portable SQL through sqlglot; what sqlglot cannot
translate with the same meaning everywhere lives here, written from the facts of each engine's
:class:`~dalenius.core.dialect.Dialect` object (never from its name):

* the keyed hash that ranks rows for contribution bounding: one MD5 of one canonical text, the
  same on every engine, built from each engine's own functions;
* exact integer sums: DuckDB's ``SUM(BIGINT)`` is a 128-bit ``HUGEINT`` and PostgreSQL's a
  ``NUMERIC``, both exact, but Spark's is a ``BIGINT`` that overflows, so Spark sums 21-bit
  slices and recombines them in ``DECIMAL(38, 0)``;
* floating-point arithmetic: DuckDB and Spark follow IEEE 754 (overflow gives ±∞, underflow 0),
  but PostgreSQL *raises* on overflow and underflow, so one extreme value would make the query
  fail, and whether it fails would reveal that value. On PostgreSQL, ``+ - * /`` on doubles call
  small SQL functions that give the IEEE result without raising; ``ROUND`` and ``%`` of doubles,
  which PostgreSQL lacks, go through ``NUMERIC``. The PostgreSQL executor creates the functions
  (:mod:`dalenius.executors.pg_functions`) in each session; a test checks that every function
  named in :data:`POSTGRES_FUNCTIONS` is defined there.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from sqlglot import exp

from dalenius.core.dialect import Dialect

_PG_BASE = (
    "dalenius_add",
    "dalenius_sub",
    "dalenius_mul",
    "dalenius_div",
    "dalenius_mod",
    "dalenius_round",
)
POSTGRES_FUNCTIONS = (*_PG_BASE, *(f"{name}_p" for name in _PG_BASE), "dalenius_clip_p")
"""Functions the PostgreSQL SQL calls in the session's ``pg_temp`` schema.

Each comes in two forms: a SQL function, which the planner inlines when its arguments are simple
(columns, literals, casts), and a PL/pgSQL twin (``_p``) for other arguments, which would stop the
inlining and leave the SQL function to PostgreSQL's much slower row-by-row SQL-function executor.
"""

_PG_ARITHMETIC = {
    "+": "dalenius_add",
    "-": "dalenius_sub",
    "*": "dalenius_mul",
    "/": "dalenius_div",
}
_BINARY: dict[str, type[exp.Binary]] = {"+": exp.Add, "-": exp.Sub, "*": exp.Mul, "/": exp.Div}


FLOAT_CLAMP = 2**40
"""A double is hashed by its multiple of 2^-20 (floored) after clamping to ±2^40: every product
then lies within ±2^60, exact in a double and in a BIGINT on every engine."""


def keyed_hash(dialect: Dialect, salt: int, columns: Sequence[tuple[exp.Expr, str]]) -> exp.Expr:
    r"""A keyed hash of ``columns`` (each with its type): ranks contribution bounding's rows.

    It makes the choice of a unit's kept groups and rows unpredictable and blind to their values,
    and it is **the same on every engine**: the MD5 of one text — the key, then each value in a
    canonical form, separated by ``|`` — compared as lowercase hex (in the C collation on
    PostgreSQL), so DuckDB, PostgreSQL and Spark keep the same rows of a unit over its caps and
    give the same exact answers. The forms: a BIGINT in decimal (an integer the engine computes
    in double arithmetic is a double here, ``kind`` ``"float"``); a text as its length in
    characters, ``:``, then itself (so no two lists of texts join to the same text); a boolean as
    ``1`` or ``0``; a date as its days since 1970-01-01; a double as the floor of its multiple of
    2^-20, after clamping to ±2^40 (:data:`FLOAT_CLAMP`; doubles closer than that share a form,
    so the ranking breaks their ties by the values themselves, see :func:`hash_ties`); NULL as
    ``N``, which no other form is.

    Example:
        >>> from dalenius.core.dialect import DUCKDB, POSTGRES
        >>> keyed_hash(DUCKDB, 7, [(exp.column("a"), "int")]).sql("duckdb")
        "MD5(CONCAT('7|', CASE WHEN a IS NULL THEN 'N' ELSE CAST(a AS TEXT) END))"
        >>> keyed_hash(POSTGRES, 7, [(exp.column("s"), "str")]).sql("postgres")
        'MD5(\'7|\' || CASE WHEN s IS NULL THEN \'N\' ELSE CAST(LENGTH(s) AS TEXT) || \':\' || s END) COLLATE "C"'
    """
    parts: list[exp.Expr] = []
    separator = f"{salt % (2**62)}|"
    for value, kind in columns:
        parts.append(exp.Literal.string(separator))
        parts.append(_canonical_text(value.copy(), kind, dialect))
        separator = "|"
    # Every part is text, never NULL: one CONCAT call and a chain of || give the same text.
    call = dialect.concat_call
    digest: exp.Expr = exp.MD5(this=exp.Concat(expressions=parts, safe=call, coalesce=call))
    if dialect.text_collation:
        digest = exp.Collate(
            this=digest, expression=exp.Identifier(this=dialect.text_collation, quoted=True)
        )
    return digest


def hash_ties(columns: Sequence[tuple[exp.Expr, str]]) -> list[exp.Expr]:
    """What breaks ties between rows of equal :func:`keyed_hash`: their doubles, in order.

    Doubles closer than 2^-20 (or both beyond ±2^40) share a hashed form; ordering them by value
    keeps the ranking the same on every engine (each orders doubles alike, NaN last, with NULLs
    placed last explicitly). Rows equal in every hashed column are interchangeable for the query.
    """
    return [value.copy() for value, kind in columns if kind == "float"]


@lru_cache(maxsize=8)
def _epoch_days(dialect: Dialect) -> exp.Expr:
    """The days from 1970-01-01 to the date column ``d`` (:attr:`Dialect.epoch_days`), parsed."""
    return exp.maybe_parse(dialect.epoch_days.format(dialect.quote("d")), dialect=dialect.name)


def _canonical_text(value: exp.Expr, kind: str, dialect: Dialect) -> exp.Expr:
    """``value`` as the text :func:`keyed_hash` hashes (``N`` for NULL)."""
    text = exp.DataType.build(dialect.text_type, dialect=dialect.name)

    def as_text(node: exp.Expr) -> exp.Expr:
        return exp.Cast(this=node, to=text.copy())

    double = exp.DataType.build(dialect.double_type, dialect=dialect.name)

    def floor_of_multiple(node: exp.Expr) -> exp.Expr:
        limit = [
            exp.cast(exp.Literal.number(v), double.copy()) for v in (-FLOAT_CLAMP, FLOAT_CLAMP)
        ]
        clamped = exp.Least(
            this=exp.Greatest(this=node, expressions=[limit[0]]), expressions=[limit[1]]
        )
        scaled = exp.Mul(this=clamped, expression=exp.cast(exp.Literal.number(2**20), double))
        return as_text(exp.cast(exp.Floor(this=scaled), exp.DataType.Type.BIGINT))

    form: exp.Expr
    if kind == "int":
        # A BIGINT (an integer the engine computed as a double is hashed as a double: its text
        # differs between engines, '3.0' against '3').
        form = as_text(value.copy())
    elif kind == "str":
        length = as_text(exp.Length(this=value.copy()))
        form = exp.Concat(expressions=[length, exp.Literal.string(":"), value.copy()])
    elif kind == "bool":
        form = exp.Case(
            ifs=[exp.If(this=value.copy(), true=exp.Literal.string("1"))],
            default=exp.Literal.string("0"),
        )
    elif kind == "date":
        days = _epoch_days(dialect).copy()
        placeholder = days.find(exp.Column)
        assert placeholder is not None
        placeholder.replace(value.copy())
        form = as_text(days)
    elif kind == "float":
        form = floor_of_multiple(value.copy())
    else:  # a NULL literal's type: always NULL
        return exp.Literal.string("N")
    return exp.Case(
        ifs=[exp.If(this=exp.Is(this=value, expression=exp.Null()), true=exp.Literal.string("N"))],
        default=form,
    )


_SLICE = 21
"""Bits per slice of a split BIGINT sum: a slice below 2^21 in size cannot overflow a BIGINT sum
below 2^42 rows."""


def exact_sum(
    value: exp.Expr, dialect: Dialect, *, bigint: bool = True, bound: int | None = None
) -> exp.Expr:
    """``SUM`` of an integer expression, exact in every engine whatever the number of rows.

    ``bigint`` says that ``value`` is a BIGINT in the SQL (not an integer-valued DOUBLE).
    ``bound``, if given, is a proven bound on ``|value|`` from the plan (a clipped value's bounds,
    a grid value's ``row_units``): it lets Spark sum fewer slices.

    Spark's ``SUM(BIGINT)`` is a BIGINT that overflows, and a ``DECIMAL(38, 0)`` sum is stored as
    a big integer per row, about twice as slow as the plain sum. A BIGINT is therefore split into
    three 21-bit slices (``x = a·2^42 + b·2^21 + c``, ``b`` and ``c`` in [0, 2^21)), each summed as a
    BIGINT, which cannot overflow below 2^42 rows, and recombined in ``DECIMAL(38, 0)``: as fast as
    the engine's own ``SUM`` and exact. A value known to lie within ``±2^21`` needs no split
    (its plain ``SUM`` cannot overflow below 2^42 rows either), one within ``±2^42`` two slices
    (``x = a·2^21 + c``, ``a`` within ``±2^21``); Spark then does one or two sums per row
    instead of three, and the total is widened to ``DECIMAL(38, 0)`` once per group.

    Example:
        >>> from dalenius.core.dialect import DUCKDB, SPARK
        >>> exact_sum(exp.column("n"), DUCKDB).sql("duckdb")
        'SUM(n)'
        >>> exact_sum(exp.column("n"), SPARK, bigint=False).sql("spark")
        'SUM(CAST(n AS DECIMAL(38, 0)))'
        >>> exact_sum(exp.column("n"), SPARK, bound=100).sql("spark")
        'CAST(SUM(n) AS DECIMAL(38, 0))'
    """
    if dialect.exact_bigint_sum:
        return exp.Sum(this=value)
    if not bigint:
        return exp.Sum(this=exp.cast(value, exp.DataType.build("DECIMAL(38, 0)")))
    wide_type = exp.DataType.build("DECIMAL(38, 0)")
    if bound is not None and bound < 2**_SLICE:
        return exp.cast(exp.Sum(this=value), wide_type)
    mask = exp.Literal.number(2**_SLICE - 1)

    def shifted(bits: int) -> exp.Expr:
        return exp.Anonymous(
            this="SHIFTRIGHT", expressions=[value.copy(), exp.Literal.number(bits)]
        )

    def scaled(total: exp.Expr, factor: int) -> exp.Expr:
        wide = exp.cast(total, exp.DataType.build("DECIMAL(38, 0)"))
        return exp.Mul(this=wide, expression=exp.Literal.number(factor))

    low = exp.Sum(this=exp.BitwiseAnd(this=value.copy(), expression=mask.copy()))
    if bound is not None and bound < 2 ** (2 * _SLICE):
        # x = (x >> 21)·2^21 + (x & mask): the arithmetic shift keeps the sign in the high part.
        return exp.Paren(
            this=exp.Add(this=scaled(exp.Sum(this=shifted(_SLICE)), 2**_SLICE), expression=low)
        )
    high = exp.Sum(this=shifted(2 * _SLICE))
    middle = exp.Sum(this=exp.BitwiseAnd(this=shifted(_SLICE), expression=mask.copy()))
    return exp.Paren(
        this=exp.Add(
            this=exp.Add(this=scaled(high, 2**42), expression=scaled(middle, 2**21)),
            expression=low,
        )
    )


def double_arithmetic(op: str, left: exp.Expr, right: exp.Expr, dialect: Dialect) -> exp.Expr:
    """``left op right`` on DOUBLE operands with IEEE results (±∞, 0) and never an error.

    Example:
        >>> from dalenius.core.dialect import DUCKDB, POSTGRES
        >>> a, b = exp.column("a"), exp.column("b")
        >>> double_arithmetic("*", a, b, DUCKDB).sql("duckdb")
        '(a * b)'
        >>> double_arithmetic("*", a, b, POSTGRES).sql("postgres")
        'pg_temp.dalenius_mul(a, b)'
    """
    if not dialect.ieee_doubles:
        return _pg_call(_PG_ARITHMETIC[op], left, right)
    return exp.Paren(this=_BINARY[op](this=left, expression=right))


def modulo(left: exp.Expr, right: exp.Expr, dialect: Dialect, *, floats: bool) -> exp.Expr:
    """``left % right`` (sign of the dividend); ``floats`` when either operand is a double.

    PostgreSQL has no ``%`` for doubles, and an integer-valued operand may be a DOUBLE in the
    generated SQL (arithmetic is computed in DOUBLE). Integers are therefore divided in
    ``NUMERIC``, exactly; doubles go through ``pg_temp.dalenius_mod``, which divides their 15-digit
    decimal forms in ``NUMERIC`` and can differ from DuckDB's and Spark's ``fmod`` in the last bits.

    Example:
        >>> from dalenius.core.dialect import POSTGRES
        >>> modulo(exp.column("a"), exp.column("b"), POSTGRES, floats=False).sql("postgres")
        'MOD(CAST(a AS DECIMAL), CAST(b AS DECIMAL))'
    """
    if not dialect.double_modulo:
        if floats:
            return _pg_call("dalenius_mod", exp.cast(left, exp.DataType.Type.DOUBLE), right)
        return exp.Anonymous(
            this="MOD",
            expressions=[
                exp.cast(left, exp.DataType.Type.DECIMAL),
                exp.cast(right, exp.DataType.Type.DECIMAL),
            ],
        )
    return exp.Paren(this=exp.Mod(this=left, expression=right))


def round_half(
    value: exp.Expr, decimals: exp.Expr | None, dialect: Dialect, *, floats: bool
) -> exp.Expr:
    """``ROUND(value, decimals)``: halves away from zero; ``floats`` when ``value`` is a double.

    PostgreSQL rounds doubles half to even and has no ``ROUND(double, int)``; there the value is
    rounded in ``NUMERIC`` from its 15-digit decimal form.
    """
    if not dialect.double_round and floats:
        digits = decimals if decimals is not None else exp.Literal.number(0)
        return _pg_call("dalenius_round", value, digits)
    return exp.Round(this=value, decimals=decimals)


def computed_double(value: exp.Expr, dialect: Dialect) -> bool:
    """Whether ``value`` is a double computed by a PL/pgSQL twin on PostgreSQL: a clip then
    computes it once (``pg_temp.dalenius_clip_p``) instead of in each of its three places.

    Example:
        >>> from dalenius.core.dialect import DUCKDB, POSTGRES
        >>> a, b = exp.column("a"), exp.column("b")
        >>> product = double_arithmetic("*", double_arithmetic("+", a, b, POSTGRES), b, POSTGRES)
        >>> computed_double(product, POSTGRES), computed_double(a, POSTGRES)
        (True, False)
    """
    if dialect.ieee_doubles or not isinstance(value, exp.Dot):
        return False
    call = value.expression
    return isinstance(call, exp.Anonymous) and call.name in {f"{n}_p" for n in _PG_BASE}


def clip_once(value: exp.Expr, low: exp.Expr, high: exp.Expr) -> exp.Expr:
    """``value`` clipped to ``[low, high]`` by ``pg_temp.dalenius_clip_p`` (see
    :func:`computed_double`): the two-test CASE, with ``value`` computed once.
    """
    return exp.Dot(
        this=exp.to_identifier("pg_temp"),
        expression=exp.Anonymous(this="dalenius_clip_p", expressions=[value, low, high]),
    )


def _pg_call(name: str, *args: exp.Expr) -> exp.Expr:
    if not all(_simple(a) for a in args):
        name += "_p"
    return exp.Dot(
        this=exp.to_identifier("pg_temp"),
        expression=exp.Anonymous(this=name, expressions=list(args)),
    )


def _simple(node: exp.Expr) -> bool:
    """Whether PostgreSQL may inline a function reading ``node`` several times (it is cheap).

    Example:
        >>> _simple(exp.cast(exp.column("a"), exp.DataType.Type.DOUBLE))
        True
        >>> from dalenius.core.dialect import POSTGRES
        >>> _simple(double_arithmetic("*", exp.column("a"), exp.column("b"), POSTGRES))
        False
    """
    if isinstance(node, exp.Column | exp.Literal | exp.Null | exp.Boolean):
        return True
    if isinstance(node, exp.Cast | exp.Neg | exp.Paren):
        return _simple(node.this)
    if isinstance(node, exp.Nullif | exp.LT | exp.GT):
        return _simple(node.this) and _simple(node.expression)
    if isinstance(node, exp.Case):
        # A clipped column: two comparisons, cheap enough for the planner to inline around it.
        parts = [node.args.get("default")]
        for branch in node.args.get("ifs", []):
            parts += [branch.this, branch.args.get("true")]
        return len(node.args.get("ifs", [])) <= 2 and all(
            p is not None and _simple(p) for p in parts
        )
    return False
