"""Exact clipped aggregates from the engine, checked against an independent pandas computation.

Noise is switched off through the test-only hook in ``tests/support/exact.py``; everything else —
validation, the DP plan, the generated SQL run in DuckDB, post-processing — is the production path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.support.exact import exact_answer

from dalenius.core.catalog import load_catalog
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger


@pytest.fixture(scope="module")
def session(adult_catalog_path: Path) -> Iterator[Session]:
    catalog = load_catalog(adult_catalog_path)
    with Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog)) as s:
        yield s


@pytest.fixture(scope="module")
def df(shared_data: Path) -> pd.DataFrame:
    return pd.read_csv(shared_data / "adult.csv")


AGE = (17, 80)
HOURS = (1.5, 60.25)
GAIN = (0, 99999)
LOSS = (0, 5000)


def one(session: Session, sql: str) -> dict[str, object]:
    answer = exact_answer(session, sql)
    assert len(answer.rows) == 1
    return dict(zip(answer.columns, answer.rows[0], strict=True))


def test_count_with_where(session: Session, df: pd.DataFrame) -> None:
    got = one(session, "SELECT COUNT(*) FROM adult WHERE age >= 40")
    assert got["COUNT(*)"] == int((df.age >= 40).sum())


def test_count_column_skips_nulls(session: Session, df: pd.DataFrame) -> None:
    got = one(session, "SELECT COUNT(occupation) AS n, COUNT(*) AS total FROM adult")
    assert got["n"] == int(df.occupation.notna().sum())
    assert got["total"] == len(df)


def test_sum_int_is_clipped(session: Session, df: pd.DataFrame) -> None:
    got = one(session, "SELECT SUM(age) FROM adult WHERE sex = 'Female'")
    expected = df.loc[df.sex == "Female", "age"].clip(*AGE).sum()
    assert got["SUM(age)"] == int(expected)
    assert expected < df.loc[df.sex == "Female", "age"].sum(), "clipping must bite in this test"


def test_float_sum_and_avg(session: Session, df: pd.DataFrame) -> None:
    got = one(session, "SELECT SUM(capital_gain) AS g, AVG(hours_per_week) AS h FROM adult")
    assert got["g"] == pytest.approx(df.capital_gain.clip(*GAIN).sum(), rel=1e-12)
    assert got["h"] == pytest.approx(df.hours_per_week.clip(*HOURS).mean(), rel=1e-12)


def test_avg_and_sum_share_measurements(session: Session, df: pd.DataFrame) -> None:
    got = one(
        session, "SELECT SUM(capital_loss), AVG(capital_loss) FROM adult WHERE race = 'Black'"
    )
    part = df.loc[df.race == "Black", "capital_loss"].clip(*LOSS)
    assert got["SUM(capital_loss)"] == int(part.sum())
    assert got["AVG(capital_loss)"] == pytest.approx(part.mean(), rel=1e-12)


def test_group_by_public_keys_returns_every_key(session: Session, df: pd.DataFrame) -> None:
    answer = exact_answer(
        session, "SELECT education, COUNT(*), AVG(age) FROM adult GROUP BY education"
    )
    keys = [row[0] for row in answer.rows]
    assert len(keys) == 16 and keys[0] == "Preschool"
    grouped = df.assign(age=df.age.clip(*AGE)).groupby("education").age
    for key, count, avg in answer.rows:
        assert count == int(grouped.size()[key])
        assert avg == pytest.approx(grouped.mean()[key], rel=1e-12)


def test_two_keys_include_empty_groups(session: Session, df: pd.DataFrame) -> None:
    answer = exact_answer(
        session,
        "SELECT sex, race, COUNT(*) AS n, SUM(capital_loss) AS l FROM adult GROUP BY sex, race",
    )
    assert len(answer.rows) == 3 * 5
    table = {(s, r): (n, lo) for s, r, n, lo in answer.rows}
    assert all(table[("Unknown", r)] == (0, 0) for r in ["Black", "White", "Other"])
    expected = (
        df.assign(l=df.capital_loss.clip(*LOSS))
        .groupby(["sex", "race"])
        .agg(n=("age", "size"), l=("l", "sum"))
    )
    for (s, r), row in expected.iterrows():
        assert table[(s, r)] == (int(row.n), int(row.l))


def test_int_keys(session: Session, df: pd.DataFrame) -> None:
    answer = exact_answer(
        session, "SELECT education_num, COUNT(*) FROM adult GROUP BY education_num"
    )
    counts = df.groupby("education_num").size()
    assert [(k, n) for k, n in answer.rows] == [(k, int(counts.get(k, 0))) for k in range(1, 17)]


def test_rich_predicate(session: Session, df: pd.DataFrame) -> None:
    sql = (
        "SELECT COUNT(*) FROM adult WHERE native_country LIKE 'United%' AND workclass IS NOT NULL "
        "AND age BETWEEN 25 AND 45 AND race NOT IN ('White') AND (hours_per_week > 40 OR sex = 'Female')"
    )
    mask = (
        df.native_country.fillna("").str.startswith("United")
        & df.workclass.notna()
        & df.age.between(25, 45)
        & (df.race != "White")
        & ((df.hours_per_week > 40) | (df.sex == "Female"))
    )
    assert one(session, sql)["COUNT(*)"] == int(mask.sum())


def test_division_by_zero_is_null_not_an_error(session: Session) -> None:
    assert one(session, "SELECT COUNT(*) FROM adult WHERE age / (age - age) > 1")["COUNT(*)"] == 0
    assert one(session, "SELECT COUNT(*) FROM adult WHERE age % (age - age) = 0")["COUNT(*)"] == 0


def test_huge_arithmetic_cannot_overflow(session: Session, df: pd.DataFrame) -> None:
    sql = "SELECT COUNT(*) FROM adult WHERE age * 9223372036854775807 * 100 > 0"
    assert one(session, sql)["COUNT(*)"] == len(df)


def test_empty_selection(session: Session) -> None:
    got = one(
        session, "SELECT COUNT(*) AS n, SUM(age) AS s, AVG(age) AS a FROM adult WHERE age > 1000"
    )
    assert got["n"] == 0 and got["s"] == 0
    assert got["a"] == pytest.approx(np.mean(AGE))  # no rows: the midpoint, by the documented rule


def test_nulls_and_malformed_values_are_skipped_not_clipped(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("n,x,k\n5,1.5,a\n,2.5,a\n7,,b\nn/a,nan,b\n-3,-1e9,\n")
    (tmp_path / "t.toml").write_text(
        '[tables.t]\nsource = { csv = "t.csv" }\nprivacy_unit = "row"\n'
        "[tables.t.columns]\n"
        'n = { type = "int", bounds = [0, 10] }\n'
        'x = { type = "float", bounds = [0, 2] }\n'
        'k = { type = "str", keys = ["a", "b"] }\n'
    )
    catalog = load_catalog(tmp_path / "t.toml")
    with Session(catalog, ledger=open_ledger(None), executor=DuckDBExecutor(catalog)) as s:
        got = one(s, "SELECT COUNT(n) AS cn, SUM(n) AS sn, AVG(n) AS an, COUNT(*) AS c FROM t")
        # n holds 5, NULL, 7, 'n/a' (read as NULL), -3 (clipped to 0).
        assert got == {"cn": 3, "sn": 12, "an": pytest.approx(4.0), "c": 5}
        got = one(s, "SELECT SUM(x) AS sx, COUNT(x) AS cx FROM t")
        # x holds 1.5, 2.5 (clipped to 2), NULL, NaN (read as NULL), -1e9 (clipped to 0).
        assert got == {"sx": pytest.approx(3.5), "cx": 3}
        answer = exact_answer(s, "SELECT k, COUNT(*) FROM t GROUP BY k")
        assert answer.rows == (("a", 2), ("b", 2))  # the row with a NULL key is in no group
