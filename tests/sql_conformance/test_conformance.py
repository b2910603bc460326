"""Run the SQL conformance table (``cases.py``) in noise-free test mode.

Answered queries are compared with an independent pandas computation of the clipped, bounded
answer; refused queries must fail before reading data, naming their clause, with a fix.
Quantiles are compared with the documented rule: the bin holding the ⌈t⌉-th smallest clipped
value, t being the target rank.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from tests.sql_conformance.cases import Answered, Refused, answered, refused
from tests.support.exact import exact_answer

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import PrivacyRefusal, QueryError
from dalenius.engine.noise import rank_target
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger
from dalenius.plan.expr import AggRef

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ANSWERED = answered()
REFUSED = refused()


def test_the_table_has_at_least_150_queries() -> None:
    assert len(ANSWERED) + len(REFUSED) >= 150
    assert len({c.name for c in ANSWERED + REFUSED}) == len(ANSWERED) + len(REFUSED)


@pytest.fixture(scope="module")
def sessions(shared_data: Path) -> Iterator[dict[str, Session]]:
    out = {}
    for name in ("adult", "pums"):
        catalog = load_catalog(FIXTURES / f"{name}.toml")
        out[name] = Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))
    yield out
    for s in out.values():
        s.close()


@pytest.fixture(scope="module")
def frames(shared_data: Path) -> dict[str, pd.DataFrame]:
    return {
        "adult": pd.read_csv(shared_data / "adult.csv"),
        "pums": pd.read_csv(shared_data / "pums_pid.csv"),
        "edu_levels": pd.read_csv(FIXTURES / "edu_levels.csv"),
        "educ_names": pd.read_csv(FIXTURES / "educ_names.csv"),
    }


@pytest.mark.parametrize("case", ANSWERED, ids=lambda c: c.name)
def test_answered(
    case: Answered, sessions: dict[str, Session], frames: dict[str, pd.DataFrame]
) -> None:
    session = sessions[case.dataset]
    answer = exact_answer(session, case.sql, 1, case.delta)
    plan = session.prepare(case.sql, 1, case.delta).plan
    expected = case.expected(frames[case.dataset], frames)
    n_keys = len(plan.query.group_by)
    got = {tuple(_plain(v) for v in row[:n_keys]) if n_keys else (): row for row in answer.rows}
    if case.ordered:
        keys = [tuple(_plain(v) for v in row[:1]) for row in answer.rows]
        assert keys == list(expected), case.sql
    assert set(got) == set(expected), case.sql
    for key, row in expected.items():
        actual = got[key]
        assert len(actual) == len(row), case.sql
        for col, (a, e) in enumerate(zip(actual, row, strict=True)):
            want = (
                _quantile(plan, col, e[1], e[2])
                if isinstance(e, tuple) and e and e[0] == "quantile"
                else e
            )
            _close(a, want, f"{case.sql} group {key} column {col}")


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c.name)
def test_refused(case: Refused, sessions: dict[str, Session]) -> None:
    session = sessions[case.dataset]
    with pytest.raises(QueryError) as info:
        session.prepare(case.sql, 1, case.delta)
    err = info.value
    assert err.clause == case.clause, str(err)
    assert case.fragment in str(err), str(err)
    assert err.fix, "every refusal proposes a fix"
    assert err.span is not None, f"every refusal points at a line and column: {err}"
    assert f"(line {err.span.line}, column {err.span.column})" in str(err)
    assert isinstance(err, PrivacyRefusal) is case.privacy, str(err)


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _close(actual: Any, expected: Any, where: str) -> None:
    # Float columns are summed as fixed-point integers: each row is rounded to a grid 2^30 times
    # finer than its range, so sums of floats agree with pandas to about 1e-9, not exactly.
    if isinstance(expected, float) or isinstance(actual, float):
        assert actual == pytest.approx(expected, rel=1e-7, abs=1e-6), where
    else:
        assert actual == expected, where


def _quantile(plan: Any, column: int, spec: tuple[str, Any], rows: pd.DataFrame) -> Any:
    """The documented exact quantile: the bin holding the ⌈t⌉-th smallest clipped value."""
    out = plan.query.outputs[column]
    assert isinstance(out.expr, AggRef)
    stat_index = out.expr.index
    stat = plan.statistics[stat_index]
    m = plan.measurement(stat.inputs[0])
    col, target = spec
    lo, hi = float(m.bounds[0]), float(m.bounds[1])
    values = np.sort(rows[col].dropna().clip(lo, hi).to_numpy())
    n = len(values)
    if target == "min":
        t = rank_target(stat, m)
    elif target == "max":
        t = n - rank_target(stat, m)
    else:
        t = target * n
    edges = [float(e) for e in m.edges]
    width = edges[1] - edges[0]
    if t <= 0 or n == 0:
        b = 0
    else:
        v = values[min(math.ceil(t), n) - 1]
        b = min(max(int((v - lo) // width), 0), len(edges) - 2)
    integer_bins = m.arg_type == "int" and width == 1
    return int(edges[b]) if integer_bins else (edges[b] + edges[b + 1]) / 2
