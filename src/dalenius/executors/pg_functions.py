"""Floating-point arithmetic for PostgreSQL that gives IEEE results and never raises.

PostgreSQL raises on a double that overflows or underflows (``1e300 * 1e300``, ``1e-300 *
1e-300``), where DuckDB and Spark give ±∞ and 0 as IEEE 754 says. An error that depended on one
row's value would reveal it, so the SQL that :mod:`dalenius.sql.emit.dialects` writes for PostgreSQL
calls these functions, which the PostgreSQL executor creates in each session's ``pg_temp`` schema.

They never compute a value that could overflow or underflow: outside a safe zone they decide from
logarithms, with a margin of 1e-9 (relative) on the safe side, so a product or quotient within that
margin of the largest double is ∞, and within it of half the smallest subnormal is 0. ``%`` and
``ROUND`` of doubles, which PostgreSQL lacks, are computed in ``NUMERIC`` from the operands'
15-digit decimal forms, and converted back with ``dalenius_to_double``, which gives ±∞ and 0 where
a plain cast would raise.
"""

from __future__ import annotations

from dalenius.executors.convert import DOUBLE_OVERFLOW, DOUBLE_UNDERFLOW

_INF = "CAST('Infinity' AS float8)"
_NINF = "CAST('-Infinity' AS float8)"
_MIN_SUBNORMAL = "CAST(5e-324 AS float8)"
_OVER_LN = "709.782712892384"
"""ln(2**1024) − 1e-9: at or above it a product or quotient is taken to overflow."""
_UNDER_LN = "-745.1332191009412"
"""ln(2**-1075) + 1e-9: at or below it a product or quotient is taken to underflow."""
_SAFE_ZONE = (
    "abs(a) BETWEEN CAST(3.054936363499605e-151 AS float8) AND CAST(3.273390607896142e+150 AS float8) "
    "AND abs(b) BETWEEN CAST(3.054936363499605e-151 AS float8) AND CAST(3.273390607896142e+150 AS float8)"
)
"""Both operands within [2**-500, 2**500]: the result cannot overflow or underflow."""
_SIGNED_INF = f"CASE WHEN (a < 0) = (b < 0) THEN {_INF} ELSE {_NINF} END"
_SIGNED_ZERO = "CASE WHEN (a < 0) = (b < 0) THEN CAST(0 AS float8) ELSE CAST('-0' AS float8) END"
_FINITE = f"abs(a) < {_INF} AND abs(b) < {_INF}"
_LN_A = f"ln(GREATEST(abs(a), {_MIN_SUBNORMAL}))"
_LN_B = f"ln(GREATEST(abs(b), {_MIN_SUBNORMAL}))"


def _function(name: str, params: str, body: str, returns: str = "float8") -> str:
    # IMMUTABLE LANGUAGE sql functions are inlined by the planner. Every branch is safe to
    # evaluate whatever the arguments, because the planner may fold a branch with constant
    # arguments that the CASE would never reach.
    return (
        f"CREATE OR REPLACE FUNCTION pg_temp.{name}({params}) RETURNS {returns} "
        f"LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $dalenius$ SELECT {body} $dalenius$"
    )


FUNCTIONS: dict[str, str] = {
    "dalenius_to_double": _function(
        "dalenius_to_double",
        "n numeric",
        "CASE WHEN n IS NULL THEN NULL "
        "WHEN n = 'NaN' THEN CAST('NaN' AS float8) "
        f"WHEN abs(n) >= {DOUBLE_OVERFLOW} THEN CASE WHEN n < 0 THEN {_NINF} ELSE {_INF} END "
        f"WHEN abs(n) <= {DOUBLE_UNDERFLOW} THEN CAST(0 AS float8) "
        "ELSE CAST(n AS float8) END",
    ),
    "dalenius_add": _function(
        "dalenius_add",
        "a float8, b float8",
        "CASE WHEN a IS NULL OR b IS NULL THEN NULL "
        f"WHEN NOT ({_FINITE}) OR (a < 0) <> (b < 0) OR abs(a) < 1 OR abs(b) < 1 THEN a + b "
        # Both at least 1 and of one sign: halving is exact, and the halves' sum cannot overflow.
        "WHEN GREATEST(abs(a), 1) * 0.5 + GREATEST(abs(b), 1) * 0.5 "
        f"> CAST(8.988465674311579e+307 AS float8) THEN CASE WHEN a < 0 THEN {_NINF} ELSE {_INF} END "
        "ELSE a + b END",
    ),
    "dalenius_sub": _function("dalenius_sub", "a float8, b float8", "pg_temp.dalenius_add(a, -b)"),
    "dalenius_mul": _function(
        "dalenius_mul",
        "a float8, b float8",
        "CASE WHEN a IS NULL OR b IS NULL THEN NULL "
        f"WHEN NOT ({_FINITE}) OR a = 0 OR b = 0 OR ({_SAFE_ZONE}) THEN a * b "
        # One factor at most 1 and the other at least 1: the product lies between them.
        "WHEN (abs(a) <= 1) <> (abs(b) <= 1) OR abs(a) = 1 OR abs(b) = 1 THEN a * b "
        f"WHEN {_LN_A} + {_LN_B} >= {_OVER_LN} THEN {_SIGNED_INF} "
        f"WHEN {_LN_A} + {_LN_B} <= {_UNDER_LN} THEN {_SIGNED_ZERO} "
        "ELSE a * b END",
    ),
    "dalenius_div": _function(
        "dalenius_div",
        "a float8, b float8",
        "CASE WHEN a IS NULL OR b IS NULL OR b = 0 THEN NULL "
        f"WHEN NOT ({_FINITE}) OR a = 0 OR ({_SAFE_ZONE}) THEN a / NULLIF(b, 0) "
        # The quotient lies between a and 1.
        "WHEN (abs(b) >= 1 AND abs(a) >= abs(b)) OR (abs(b) <= 1 AND abs(a) <= abs(b)) "
        "THEN a / b "
        f"WHEN {_LN_A} - {_LN_B} >= {_OVER_LN} THEN {_SIGNED_INF} "
        f"WHEN {_LN_A} - {_LN_B} <= {_UNDER_LN} THEN {_SIGNED_ZERO} "
        "ELSE a / NULLIF(b, 0) END",
    ),
    "dalenius_mod": _function(
        "dalenius_mod",
        "a float8, b float8",
        "CASE WHEN a IS NULL OR b IS NULL OR b = 0 THEN NULL "
        f"WHEN a = 'NaN' OR b = 'NaN' OR abs(a) = {_INF} THEN CAST('NaN' AS float8) "
        f"WHEN abs(b) = {_INF} THEN a "
        "ELSE pg_temp.dalenius_to_double(mod(CAST(a AS numeric), CAST(b AS numeric))) END",
    ),
    "dalenius_round": _function(
        "dalenius_round",
        "x float8, d bigint",
        "CASE WHEN x IS NULL OR d IS NULL THEN NULL "
        f"WHEN NOT (abs(x) < {_INF}) THEN x "
        # A double's 15-digit decimal form has no digit beyond the 340th place.
        "ELSE pg_temp.dalenius_to_double(ROUND(CAST(x AS numeric), "
        "CAST(LEAST(GREATEST(d, -400), 400) AS integer))) END",
    ),
}
"""The ``pg_temp`` functions every session defines (those called by :mod:`dalenius.sql.emit.dialects`
plus ``dalenius_to_double``, the safe NUMERIC → double conversion), in creation order."""

for _name in ("dalenius_add", "dalenius_sub", "dalenius_mul", "dalenius_div", "dalenius_mod"):
    # The planner inlines a SQL function only if its arguments are cheap, since the body reads
    # each of them several times; with another call as an argument (a * b * c) it would run the
    # function through the slow SQL-function executor, row by row. These PL/pgSQL twins evaluate
    # their arguments once and inline the SQL function inside: about five times faster there.
    FUNCTIONS[f"{_name}_p"] = (
        f"CREATE OR REPLACE FUNCTION pg_temp.{_name}_p(a float8, b float8) RETURNS float8 "
        "LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS "
        f"$dalenius$ BEGIN RETURN pg_temp.{_name}(a, b); END $dalenius$"
    )
FUNCTIONS["dalenius_clip_p"] = (
    # The two-test clip of a computed double (sql/emit/numeric.py): written as a CASE it would
    # compute the double in each of its three places, each time through the PL/pgSQL twins of
    # the overflow-safe arithmetic; here the argument is computed once.
    "CREATE OR REPLACE FUNCTION pg_temp.dalenius_clip_p(x float8, lo float8, hi float8) "
    "RETURNS float8 LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS "
    "$dalenius$ BEGIN RETURN CASE WHEN x < lo THEN lo WHEN x > hi THEN hi ELSE x END; END "
    "$dalenius$"
)
FUNCTIONS["dalenius_round_p"] = (
    "CREATE OR REPLACE FUNCTION pg_temp.dalenius_round_p(x float8, d bigint) RETURNS float8 "
    "LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS "
    "$dalenius$ BEGIN RETURN pg_temp.dalenius_round(x, d); END $dalenius$"
)
