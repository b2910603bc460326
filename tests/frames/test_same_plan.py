"""A frame and the SQL written by hand for the same question: one plan, one loss, one ledger entry.

Hypothesis draws random pipelines (filters, derived keys, groups, aggregations, a loss) and writes
each twice: as a frame, and as the SQL an analyst would type (unquoted, ``BETWEEN``-free, grouped
by name). Both must plan to the same fingerprint and loss, and whichever is asked second must be
answered from the first's ledger entry at no cost.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import dalenius
from dalenius.core.errors import UserError
from dalenius.engine.session import Session
from dalenius.frames import (
    AggregateFrame,
    col,
    count,
    count_distinct,
    max,
    mean,
    median,
    quantile,
    std,
    sum,
    var,
)
from dalenius.frames.agg import Agg
from dalenius.frames.expr import Expr


@dataclass(frozen=True)
class Piece:
    """One part of a pipeline, as a frame builds it and as SQL spells it."""

    frame: object
    sql: str


RACES = ["Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White"]


@st.composite
def conditions(draw: st.DrawFn) -> Piece:
    kind = draw(st.sampled_from(["age", "hours", "sex", "race", "schooling", "not", "null"]))
    if kind == "age":
        k = draw(st.integers(17, 80))
        return Piece(col("age") >= k, f"age >= {k}")
    if kind == "hours":
        h = draw(st.sampled_from([10, 20.5, 35, 40.25, 60]))
        return Piece(col("hours_per_week") < h, f"hours_per_week < {h}")
    if kind == "sex":
        s = draw(st.sampled_from(["Female", "Male"]))
        return Piece(col("sex") == s, f"sex = '{s}'")
    if kind == "race":
        races = draw(st.lists(st.sampled_from(RACES), min_size=1, max_size=3, unique=True))
        listed = ", ".join(f"'{r}'" for r in races)
        return Piece(col("race").is_in(races), f"race IN ({listed})")
    if kind == "schooling":
        a = draw(st.integers(1, 16))
        b = draw(st.integers(a, 16))
        return Piece(
            col("education_num").is_between(a, b),
            f"(education_num >= {a} AND education_num <= {b})",
        )
    if kind == "null":
        return Piece(col("occupation").is_null(), "occupation IS NULL")
    k = draw(st.integers(17, 80))
    return Piece(~(col("age") < k), f"NOT (age < {k})")


KEYS = {
    "sex": Piece(col("sex"), "sex"),
    "race": Piece(col("race"), "race"),
    "income": Piece(col("income"), "income"),
    "decade": Piece((col("age") // 10) * 10, "FLOOR(age * 1.0 / 10) * 10"),
    "young": Piece(col("age") < 30, "age < 30"),
    "level": Piece(col("level"), "edu_levels.level"),
}


@st.composite
def aggregations(draw: st.DrawFn) -> tuple[Agg, str]:
    kind = draw(
        st.sampled_from(
            ["count", "count_x", "distinct", "sum", "mean", "var", "std", "q", "median", "max"]
        )
    )
    column = draw(st.sampled_from(["age", "hours_per_week", "capital_loss"]))
    if kind == "count":
        return count(), "COUNT(*)"
    if kind == "count_x":
        return count("occupation"), "COUNT(occupation)"
    if kind == "distinct":
        return count_distinct("workclass"), "COUNT(DISTINCT workclass)"
    if kind == "q":
        q = draw(st.sampled_from([0.1, 0.25, 0.9]))
        return quantile(column, q), f"QUANTILE({column}, {q})"
    functions = {"sum": sum, "mean": mean, "var": var, "std": std, "median": median, "max": max}
    sql_names = {"sum": "SUM", "mean": "AVG", "var": "VAR_SAMP", "std": "STDDEV_SAMP"}
    sql_names |= {"median": "MEDIAN", "max": "MAX"}
    return functions[kind](column), f"{sql_names[kind]}({column})"


@dataclass(frozen=True)
class Pipeline:
    filters: list[Piece]
    keys: list[str]
    aggs: list[tuple[Agg, str]]
    epsilon: float | None  # None: per-aggregation targets instead
    targets: list[int]
    join: bool
    top: int | None


TARGETABLE = ("COUNT(*)", "COUNT(occupation)", "SUM(")


@st.composite
def pipelines(draw: st.DrawFn) -> Pipeline:
    filters = draw(st.lists(conditions(), max_size=3))
    join = draw(st.booleans())
    keys = draw(st.lists(st.sampled_from(sorted(set(KEYS) - {"level"})), max_size=2, unique=True))
    if join and draw(st.booleans()):
        keys = [*keys[:1], "level"]
    aggs = draw(st.lists(aggregations(), min_size=1, max_size=3))
    epsilon = draw(st.sampled_from([0.1, 0.25, 0.5, 1.0]))
    targets: list[int] = []
    if all(sql.startswith(TARGETABLE) for _, sql in aggs) and draw(st.booleans()):
        epsilon = None
        targets = [draw(st.sampled_from([30, 100, 5000, 10**5])) for _ in aggs]
    top = draw(st.none() | st.integers(0, 5)) if keys else None
    return Pipeline(filters, keys, aggs, epsilon, targets, join, top)


@pytest.fixture(scope="module")
def session(adult_catalog_path: Path) -> Iterator[Session]:
    with dalenius.connect(adult_catalog_path, budget=10**6) as s:
        yield s


def qualified(sql: str) -> str:
    """Hand-written SQL of the private table's columns, qualified as after a join."""
    for name in ("hours_per_week", "education_num", "capital_loss", "occupation", "workclass"):
        sql = re.sub(rf"\b{name}\b", f"adult.{name}", sql)
    for name in ("age", "sex", "race", "income"):
        sql = re.sub(rf"(?<![.'])\b{name}\b(?!')", f"adult.{name}", sql)
    return sql


def build(session: Session, p: Pipeline) -> tuple[AggregateFrame, str]:
    """The frame and the hand-written SQL of one pipeline."""
    frame = session.table("adult")
    spell = qualified if p.join else (lambda sql: sql)
    source = "adult"
    if p.join:
        frame = frame.join(session.table("edu_levels"), on="education")
        source += " JOIN edu_levels ON adult.education = edu_levels.education"
    if p.filters:
        predicates = [f.frame for f in p.filters]
        assert all(isinstance(f, Expr) for f in predicates)
        frame = frame.filter(*predicates)  # type: ignore[arg-type]
    named = [a.alias(f"a{i}") for i, (a, _) in enumerate(p.aggs)]
    if p.targets:
        named = [a.target_error(t) for a, t in zip(named, p.targets, strict=True)]
    selected = [f"{spell(sql)} AS a{i}" for i, (_, sql) in enumerate(p.aggs)]
    if p.keys:
        derived = {k: KEYS[k].frame for k in p.keys if k in ("decade", "young")}
        if derived:
            frame = frame.with_columns(**derived)  # type: ignore[arg-type]
        result = frame.group_by(*p.keys).agg(*named)
        selected = [f"{spell(KEYS[k].sql)} AS {k}" for k in p.keys] + selected
    else:
        result = frame.agg(*named)
    sql = f"SELECT {', '.join(selected)} FROM {source}"
    if p.filters:
        sql += " WHERE " + " AND ".join(f"({spell(f.sql)})" for f in p.filters)
    if p.keys:
        sql += " GROUP BY " + ", ".join(p.keys)
    if p.top is not None:
        result = result.sort("a0", descending=True).limit(p.top)
        sql += f" ORDER BY a0 DESC LIMIT {p.top}"
    return result, sql


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pipeline=pipelines(), frame_first=st.booleans())
def test_a_frame_and_its_sql_are_one_question(
    session: Session, pipeline: Pipeline, frame_first: bool
) -> None:
    frame, sql = build(session, pipeline)
    event("join" if pipeline.join else "one table")
    event("per-aggregation targets" if pipeline.targets else "epsilon")
    event("sorted and cut" if pipeline.top is not None else "all rows")
    eps = pipeline.epsilon
    targets = {f"a{i}": t for i, t in enumerate(pipeline.targets)} or None
    # The same refusal, whichever way it is asked (the frame's names its method call).
    refusals = []
    for ask in (
        lambda: frame.explain(eps),
        lambda: session.explain(sql, eps, target_error=targets),
    ):
        try:
            ask()
        except UserError as exc:
            refusals.append((type(exc), exc.what))
    if refusals:
        event("refused")
        assert len(refusals) == 2 and refusals[0] == refusals[1]
        return
    by_frame = session.plan(frame.to_sql(), eps, target_error=targets)
    by_sql = session.plan(sql, eps, target_error=targets)
    assert by_frame.fingerprint() == by_sql.fingerprint(), (frame.to_sql(), sql)
    assert by_frame.loss == by_sql.loss

    def ask_frame() -> dalenius.Result:
        return frame.collect(epsilon=eps)

    def ask_sql() -> dalenius.Result:
        return session.query(sql, epsilon=eps, target_error=targets)

    first_ask, second_ask = (ask_frame, ask_sql) if frame_first else (ask_sql, ask_frame)
    first = first_ask()
    left = session.remaining()
    second = second_ask()
    assert second.cached and second.entry_id == first.entry_id
    assert second.rows == first.rows and second.lows == first.lows
    assert session.remaining() == left
    assert first.loss == by_sql.loss
