"""Neighbour outcomes: the tables, special values and queries of the totality tests.

Every accepted query must be a total function of the data: whatever one row holds, the outcome
*kind* (a value, or a refusal decided from the query and the catalog) and the shape of the answer
are those of the table without that row. The special values are written into every typed column
of the added row, as text in a CSV file, so each reaches every column type through the loader.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.exact import exact_answer

from dalenius.core.errors import UserError
from dalenius.engine.session import Session

DBL_MAX = "1.7976931348623157e308"
INT64_MAX = "9223372036854775807"
INT64_MIN = "-9223372036854775808"

CATALOG = f"""
[dataset]
name = "totality"

[tables.t]
source = {{ csv = "t.csv" }}
privacy_unit = "row"

[tables.t.columns]
g = {{ type = "str", keys = ["a", "b"] }}
s = {{ type = "str" }}
n = {{ type = "int", bounds = [-1000, 1000] }}
w = {{ type = "int", bounds = [{INT64_MIN}, {INT64_MAX}] }}
c = {{ type = "int", bounds = [0, 9] }}
x = {{ type = "float", bounds = [0, 100] }}
y = {{ type = "float", bounds = [-1e18, 1e18] }}
h = {{ type = "float", bounds = [-{DBL_MAX}, {DBL_MAX}] }}
z = {{ type = "float", bounds = [0, 1e-300] }}
e = {{ type = "float", bounds = [0, 2.2e-308] }}
b = {{ type = "bool" }}
d = {{ type = "date" }}
"""

COLUMNS = ("g", "s", "n", "w", "c", "x", "y", "h", "z", "e", "b", "d")


def ordinary(i: int) -> list[str]:
    """An ordinary row (test data, deterministic)."""
    return [
        "ab"[i % 2],
        f"name{i % 5}",
        str(i * 37 % 1000 - 500),
        str(i * 1_000_003),
        str(i % 10),
        f"{i * 3.25 % 100:.2f}",
        f"{i * 1.5e10:.6g}",
        f"{(i - 12) * 1.5e300:.6g}",
        f"{i % 7}e-301",
        f"{i % 3}e-309",
        "true" if i % 3 else "false",
        f"2020-0{1 + i % 9}-1{i % 10}",
    ]


SPECIAL = {
    "nan": "nan",
    "-nan": "-NaN",
    "inf": "inf",
    "-inf": "-Infinity",
    "+0.0": "0.0",
    "-0.0": "-0.0",
    "subnormal": "4.9e-324",
    "-subnormal": "-4.9e-324",
    "dbl_max": DBL_MAX,
    "-dbl_max": "-" + DBL_MAX,
    "overflow": "1e999",
    "near_2^53": "9007199254740993",
    "1e300": "1e300",
    "int64_max": INT64_MAX,
    "int64_min": INT64_MIN,
    "empty": "",
    "malformed_number": "12abc",
    "date_like": "2021-02-30",
}
"""Special values written as text into every column of the added row."""

RAW_ROWS: dict[str, bytes] = {
    "10mb_string": (
        "a," + "x" * 10_000_000 + ",1,1,1,1,1,1,1e-301,1e-309,true,2020-01-01\n"
    ).encode(),
    "invalid_utf8": b"a,\xff\xfe\xc3(,1,1,1,1,1,1,0,0,true,2020-01-01\n",
    "too_many_fields": b"a,s,1,1,1,1,1,1,0,0,true,2020-01-01,extra\n",
    "too_few_fields": b"a,s,1\n",
    "unclosed_quote": b'a,"open,1,1,1,1,1,1,0,0,true,2020-01-01\n',
}
"""Added rows given as raw CSV lines: a 10 MB field, bytes that are not UTF-8, broken lines."""

BASE_ROWS = 24


def write_table(folder: Path, rows: list[bytes]) -> Path:
    """A catalog over ``t.csv`` holding ``rows`` (raw CSV lines) after the header."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "t.csv").open("wb") as handle:
        handle.write((",".join(COLUMNS) + "\n").encode())
        for row in rows:
            handle.write(row)
    (folder / "t.toml").write_text(CATALOG)
    return folder / "t.toml"


def line(values: list[str]) -> bytes:
    return (",".join(values) + "\n").encode()


def base_rows() -> list[bytes]:
    return [line(ordinary(i)) for i in range(BASE_ROWS)]


def special_row(name: str) -> bytes:
    if name in RAW_ROWS:
        return RAW_ROWS[name]
    value = SPECIAL[name]
    return line(["a", *([value] * (len(COLUMNS) - 1))])


COMPACT = (
    "SELECT COUNT(*), COUNT(x), SUM(x), AVG(n), SUM(y), AVG(z), SUM(e), AVG(c) FROM t",
    "SELECT VARIANCE(x), STDDEV(z), VAR_POP(n), STDDEV_SAMP(e) FROM t",
    "SELECT MEDIAN(y), MIN(n), MAX(z), QUANTILE(n, 0.9), MEDIAN(e) FROM t",
    "SELECT g, COUNT(*), AVG(x), SUM(y), MEDIAN(n) FROM t GROUP BY g",
    "SELECT ROUND(c, -1) AS r, COUNT(*), SUM(x * n), SUM(ROUND(n, -1)) FROM t GROUP BY r",
    "SELECT COUNT(*) FROM t WHERE ROUND(w, -1) > 0 OR w * w > 1 OR y * y > 1 OR ROUND(y, 2) > 1",
    "SELECT COUNT(*) FROM t WHERE w % 7 = 0 OR y % 3 > 1 OR FLOOR(y) > 0 OR -w > 0 OR w / 3 > 0",
    "SELECT COUNT(*) FROM t WHERE LENGTH(s || g) > 3 OR UPPER(s) LIKE 'N%' OR YEAR(d) > 2000",
)
"""A few queries touching every column and the riskiest forms (run for every special value)."""

QUERIES = (
    *COMPACT,
    # Aggregates over every column type.
    "SELECT COUNT(s), COUNT(d), COUNT(b), COUNT(w), COUNT(y) FROM t",
    "SELECT SUM(n), SUM(c), AVG(x), AVG(y), SUM(z), AVG(e) FROM t",
    "SELECT VARIANCE(y) FROM t",
    "SELECT SUM(w), AVG(w) FROM t",
    "SELECT MEDIAN(x), MIN(y), MAX(y), MIN(e), MAX(c), MEDIAN(z) FROM t",
    # Expressions inside aggregates.
    "SELECT SUM(x / (c + 1)), SUM(ABS(n - 900)), SUM(ROUND(x, 1)), AVG(CEIL(x / 3)) FROM t",
    "SELECT SUM(FLOOR(z * 1e300)), SUM(LEAST(x, 50) + GREATEST(c, 2)), AVG(COALESCE(x, 0)) FROM t",
    "SELECT SUM(CASE WHEN y > 0 THEN 1 ELSE 0 END), SUM(CASE WHEN LENGTH(s) > 3 THEN x END),"
    " AVG(ROUND(c, -1)), SUM(CASE WHEN YEAR(d) > 2000 THEN c END) FROM t",
    # Expressions in WHERE, on the values as loaded (not clipped).
    "SELECT COUNT(*) FROM t WHERE ROUND(w, -15) <> 0 AND ROUND(n, -2) >= 0",
    "SELECT COUNT(*) FROM t WHERE w + w < 0 OR w - 1 < 0 OR w % -1 = 0 OR ABS(w) > 5",
    "SELECT COUNT(*) FROM t WHERE h / 1e-300 > 1 OR h - h = 0 OR CEIL(z * 1e308) > 0",
    "SELECT COUNT(*) FROM t WHERE h * h > 1 OR ROUND(h, 2) > 1 OR h % 3 > 1 OR FLOOR(h) > 0",
    "SELECT MEDIAN(h), SUM(h) FROM t",
    "SELECT COUNT(*) FROM t WHERE x BETWEEN 10 AND 20 OR x IN (1, 2) OR x IS NULL OR n % 7 = 1",
    "SELECT COUNT(*) FROM t WHERE s LIKE 'name%' OR LOWER(s) = 'x' OR UPPER(TRIM(s)) = 'X'",
    "SELECT COUNT(*) FROM t WHERE MONTH(d) < 13 AND DAY(d) > 0 AND NOT b",
    "SELECT COUNT(*) FROM t WHERE COALESCE(y, 0) > 0 AND LEAST(w, 0) < 1",
    # Expressions as GROUP BY keys (public domains), post-processing.
    "SELECT CASE WHEN x > 50 THEN 'hi' ELSE 'lo' END AS band, COUNT(*), SUM(x) FROM t GROUP BY band",
    "SELECT c % 3 AS m, b, COUNT(*) FROM t GROUP BY m, b",
    "SELECT g, COUNT(*) AS k FROM t GROUP BY g HAVING AVG(y) > 0 ORDER BY k DESC LIMIT 1",
    "SELECT ROUND(AVG(y), 2) AS a, SUM(y) * 1e300 AS m, GREATEST(COUNT(*) - 5, 0) FROM t",
)
"""Every aggregate and expression form of the SQL surface, over every column type."""

PRIVATE_QUERIES = (
    "SELECT ROUND(w, -1) AS r, COUNT(*) FROM t GROUP BY r",
    "SELECT s, COUNT(*), AVG(x) FROM t GROUP BY s",
    "SELECT y, COUNT(*) FROM t GROUP BY y",
    "SELECT d, COUNT(*) FROM t GROUP BY d",
)
"""GROUP BY keys without public lists: groups selected privately (a delta is spent)."""


@dataclass(frozen=True)
class Outcome:
    """What an analyst sees of one query, apart from the values: its kind and shape."""

    kind: str
    detail: str
    columns: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    rows: int | None = None


def outcome(session: Session, sql: str) -> Outcome:
    """Run ``sql`` without noise; a refusal is recorded by type and message, anything else fails."""
    private = sql in PRIVATE_QUERIES
    delta = "1e-6" if private else None
    try:
        answer = exact_answer(session, sql, 1, delta)
    except UserError as exc:
        return Outcome("refusal", f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # any other failure is the defect under test
        return Outcome("error", f"{type(exc).__name__}: {exc}")
    # Private groups are selected with noise and HAVING filters released values: their row count
    # is part of the (private) answer, not of its shape.
    rows = None if private or "HAVING" in sql else len(answer.rows)
    return Outcome("value", "", answer.columns, answer.kinds, rows)


def outcomes(session: Session, queries: tuple[str, ...]) -> dict[str, Outcome]:
    return {sql: outcome(session, sql) for sql in queries}


def differences(reference: dict[str, Outcome], other: dict[str, Outcome], label: str) -> list[str]:
    """Queries whose outcome kind or shape differs, or that failed (never allowed)."""
    out = []
    for sql, expected in reference.items():
        got = other[sql]
        if expected.kind == "error" or got.kind == "error":
            out.append(f"{label}: {sql}: error {expected.detail or got.detail}"[:400])
        elif expected != got:
            out.append(f"{label}: {sql}: {expected} vs {got}"[:400])
    return out


def values_in_answers(session: Session, sql: str) -> Any:
    """The noise-free answer (for checks on what a released key looks like)."""
    return exact_answer(session, sql, 1)
