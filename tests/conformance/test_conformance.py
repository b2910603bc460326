"""Every query of the conformance table gives bit-identical exact measurements on every engine.

DuckDB is the reference; PostgreSQL and Spark run the same catalogs over the same data (see
``engines.py``). Noise is off (``tests/support/exact.py``), so the comparison is between the exact
integers each engine computes: group keys, counts, fixed-point sums and histogram bins.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from tests.conformance import datasets
from tests.conformance.cases import CASES, Case, all_cases
from tests.support.exact import exact_data

from dalenius.core.catalog import Catalog
from dalenius.engine.session import Session
from dalenius.executors import convert
from dalenius.executors.duckdb import DuckDBExecutor


def measured(session: Session, case: Case) -> dict[str, Any]:
    """The exact measurements of ``case`` as plain Python values."""
    _, exact = exact_data(session, case.sql, 1, case.delta)
    return {
        "groups": [tuple(g) for g in exact.groups],
        "scalars": {k: v.tolist() for k, v in exact.scalars.items()},
        "histograms": {k: v.tolist() for k, v in exact.histograms.items()},
    }


def params() -> list[Any]:
    out = []
    for case in all_cases():
        for engine in case.engines:
            marks = [getattr(pytest.mark, engine)]
            if engine in case.gaps:
                marks.append(pytest.mark.xfail(strict=True, reason=case.gaps[engine]))
            out.append(pytest.param(case, engine, marks=marks, id=f"{engine}:{case.id}"))
    return out


@pytest.mark.parametrize(("case", "engine"), params())
def test_engine_matches_duckdb(
    case: Case,
    engine: str,
    duckdb_sessions: dict[str, Session],
    sessions_on: Callable[[str], dict[str, Session]],
) -> None:
    expected = measured(duckdb_sessions[case.catalog], case)
    got = measured(sessions_on(engine)[case.catalog], case)
    assert got == expected, case.sql


def test_the_table_covers_every_dataset_and_engine() -> None:
    assert {c.catalog for c in CASES} == {"adult", "pums", "visits", "messy", "odd"}
    assert all(set(c.engines) == {"postgres", "spark"} for c in CASES)
    assert len({c.id for c in all_cases()}) == len(all_cases()), "case ids must be unique"


def test_the_reference_reads_messy_text_as_the_grammar_says(
    duckdb_sessions: dict[str, Session],
) -> None:
    # Guards the comparison itself: if DuckDB read every messy value as NULL, the engines would
    # agree without converting anything. The grammar, in Python, is the independent oracle.
    session = duckdb_sessions["messy"]
    table = session.catalog.table("t")
    assert table is not None
    session.executor.prepare(table)
    rows = session.executor.fetch(
        'SELECT COUNT("n"), COUNT("x"), COUNT("flag"), COUNT("d") FROM "t"'
    )
    texts = datasets.MESSY_TEXT
    flags = [datasets.MESSY_FLAGS[i % len(datasets.MESSY_FLAGS)] for i in range(len(texts))]
    dates = [datasets.MESSY_DATES[i % len(datasets.MESSY_DATES)] for i in range(len(texts))]
    assert rows == [
        (
            sum(_int_ok(t) for t in texts),
            sum(_float_ok(t) for t in texts),
            sum(f.lower() in convert.TRUE_TEXT + convert.FALSE_TEXT for f in flags),
            sum(_date_ok(d) for d in dates),
        )
    ]


def _int_ok(text: str) -> bool:
    if not re.match(convert.INT_TEXT, text):
        return False
    value = Decimal(text.strip()).to_integral_value(rounding=ROUND_HALF_UP)
    return convert.BIGINT_MIN <= value <= convert.BIGINT_MAX


def _float_ok(text: str) -> bool:
    # NaN is read as NULL (the totality rule), so it is not counted.
    patterns = (convert.INT_TEXT, convert.POS_INF_TEXT, convert.NEG_INF_TEXT)
    return any(re.match(p, text) for p in patterns)


def _date_ok(text: str) -> bool:
    match = re.match(convert.DATE_TEXT, text)
    if not match:
        return False
    try:
        day = datetime.date(*(int(g) for g in match.groups()))
    except ValueError:
        return False
    return day.year >= 1


def test_the_reference_reads_the_odd_file_as_the_rules_say(catalogs: dict[str, Catalog]) -> None:
    # Guards the comparison: the lines of n = 4 (too many fields), 5 (too few), 6 (NUL) and
    # 7 (not UTF-8) are skipped; the others, odd as they are, are read.
    catalog = catalogs["odd"]
    with DuckDBExecutor(catalog) as engine:
        engine.prepare(catalog.tables[0])
        rows = engine.fetch('SELECT "n", "k", "note" FROM "t" ORDER BY "n"')
        skipped = engine.skipped_rows(catalog.tables[0])
    assert [r[0] for r in rows] == [1, 2, 3, 8, 9, 10]
    assert rows[1][2] == "line\r\nbreak" and rows[3][2] == "quoted, comma" and rows[4][2] is None
    assert skipped == {"too many fields": 1, "too few fields": 1, "NUL byte": 1, "invalid UTF-8": 1}
