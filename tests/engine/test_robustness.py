"""Nothing between reading exact values and drawing noise can fail on particular data, and what
is released has one canonical form whatever the other rows are (regressions of a privacy review)."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest
from tests.support.csv_catalog import csv_session
from tests.support.exact import exact_answer

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import PureDP
from dalenius.engine.postprocess import EXACT_LIMIT, _norm, exact_values
from dalenius.engine.session import Session, connect
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger


def session(tmp_path: Path, csv: str, columns: str, *, budget: int | None = None) -> Session:
    (tmp_path / "t.csv").write_text(csv)
    (tmp_path / "t.toml").write_text(
        f'[dataset]\nname = "t"\n[tables.t]\nsource = {{ csv = "t.csv" }}\nprivacy_unit = "row"\n[tables.t.columns]\n{columns}'
    )
    catalog = load_catalog(tmp_path / "t.toml")
    if budget is not None:
        return connect(catalog, budget=budget)
    return Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog))


def test_huge_exact_values_are_clamped_not_an_overflow(tmp_path: Path) -> None:
    s = session(tmp_path, "x\n1\n", 'x = { type = "int", bounds = [0, 10] }\n')
    plan = s.prepare("SELECT COUNT(*), SUM(x) FROM t", 1).plan
    exact = exact_values(plan, [(2**70, -(2**70))], {})
    assert [int(v[0]) for v in exact.scalars.values()] == [EXACT_LIMIT, -EXACT_LIMIT]


def test_an_uncalibratable_scale_is_refused_before_any_charge(tmp_path: Path) -> None:
    # A sum's grid is coarsened until its noise fits 2^40 steps (compile._coarsened); at this ε
    # not even one step per row does, so the plan is refused.
    s = session(
        tmp_path, "x\n1\n", 'x = { type = "int", bounds = [0, 4503599627370496] }\n', budget=1
    )
    with pytest.raises(ConfigurationError, match="noise scale"):
        s.query("SELECT SUM(x) FROM t", epsilon="1e-13")
    assert s.remaining() == PureDP(Fraction(1))
    assert [e.status for e in s.ledger.entries()] == []


def test_released_float_keys_have_one_form() -> None:
    assert str(_norm(-0.0, "float")) == "0.0"
    assert _norm(float("nan"), "float") is _norm(float("-nan"), "float")
    assert _norm(3.0, "int") == 3 and isinstance(_norm(3.0, "int"), int)


def test_left_join_makes_the_right_side_nullable(tmp_path: Path) -> None:
    session = csv_session(
        tmp_path,
        {"pub.csv": "k,region\n1,north\n", "t.csv": "k\n1\n2\n2\n"},
        '[tables.t]\nsource = { csv = "t.csv" }\nprivacy_unit = "row"\ncolumns = { k = { type = "int" } }\n'
        '[tables.pub]\nsource = { csv = "pub.csv" }\npublic = true\n'
        'columns = { k = { type = "int" }, region = { type = "str", nullable = false } }\n',
    )
    with session as s:
        answer = exact_answer(
            s, "SELECT COUNT(p.region), COUNT(*) FROM t LEFT JOIN pub p ON t.k = p.k"
        )
    assert answer.rows == ((1, 3),)


def test_modulo_by_minus_one_cannot_overflow(tmp_path: Path) -> None:
    s = session(tmp_path, f"x\n{-(2**63)}\n5\n", 'x = { type = "int" }\n')
    assert exact_answer(s, "SELECT COUNT(*) FROM t WHERE x % (x - x - 1) = 0").rows == ((2,),)
    assert not math.isnan(0.0)
