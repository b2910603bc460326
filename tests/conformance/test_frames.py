"""Private frames give the same exact aggregates on DuckDB, PostgreSQL and Spark.

A frame is an SQL query (``to_sql``), built here against each engine's session from the same
pipeline; the exact, noise-free measurements of every engine must equal DuckDB's, as for the SQL
conformance table (``test_conformance.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.conformance.test_conformance import measured

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
    when,
)

Pipeline = Callable[[Session], AggregateFrame]

PIPELINES: dict[str, tuple[str, Pipeline]] = {
    "filter-group": (
        "adult",
        lambda s: (
            s.table("adult")
            .filter(col("age") >= 40, col("race").is_in(["White", "Black"]))
            .group_by("sex")
            .agg(count(), mean("hours_per_week"), sum("capital_loss"))
        ),
    ),
    "derived-keys": (
        "adult",
        lambda s: (
            s.table("adult")
            .with_columns(
                decade=((col("age") // 10) * 10).clip(upper=60),
                schooling=(col("education_num") // 10) * 10,
            )
            .group_by("decade", "schooling")
            .agg(n=count(), sd=std("age"))
        ),
    ),
    "case-when": (
        "adult",
        lambda s: (
            s.table("adult")
            .group_by(band=when(col("age") < 30).then("young").otherwise("older"))
            .agg(rich=sum(when(col("income") == ">50K").then(1).otherwise(0)).alias("rich"))
        ),
    ),
    "ranks": (
        "adult",
        lambda s: (
            s.table("adult")
            .filter(~col("occupation").is_null())
            .agg(median("age"), quantile("hours_per_week", 0.9).alias("p90"), max("capital_gain"))
        ),
    ),
    "public-join": (
        "adult",
        lambda s: (
            s.table("adult")
            .join(s.table("edu_levels"), on="education")
            .group_by("level")
            .agg(count(), mean(col("hours_per_week") / 2).alias("half_hours"))
        ),
    ),
    "unit-join": (
        "pums",
        lambda s: (
            s.table("pums")
            .join(s.table("visits"), on="pid")
            .group_by("sex")
            .agg(count(), sum("income_right"), count_distinct("pid"))
        ),
    ),
}


def params() -> list[object]:
    return [
        pytest.param(name, engine, marks=getattr(pytest.mark, engine), id=f"{engine}:{name}")
        for name in PIPELINES
        for engine in ("postgres", "spark")
    ]


@pytest.mark.parametrize(("name", "engine"), params())
def test_frames_match_duckdb(
    name: str,
    engine: str,
    duckdb_sessions: dict[str, Session],
    sessions_on: Callable[[str], dict[str, Session]],
) -> None:
    catalog, pipeline = PIPELINES[name]
    reference = pipeline(duckdb_sessions[catalog])
    other = pipeline(sessions_on(engine)[catalog])
    assert other.to_sql() == reference.to_sql()
    expected = measured(duckdb_sessions[catalog], _Case(reference.to_sql()))
    assert expected["groups"] or expected["scalars"]
    assert measured(sessions_on(engine)[catalog], _Case(other.to_sql())) == expected


class _Case:
    """What ``measured`` reads of a conformance case: the SQL, without a delta."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.delta = None
