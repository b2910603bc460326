"""An aggregation used as a value in a frame, as in Polars: ``col("age") > col("age").mean()``
is the mean of the rows the filter is applied to, released first (a subquery used as a value),
then the query that uses it — the same question, plan and ledger entry as the SQL written by
hand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import dalenius
from dalenius.core.errors import QueryError
from dalenius.engine.session import Session
from dalenius.frames import col, count


@pytest.fixture
def session(adult_catalog_path: Path) -> Iterator[Session]:
    with dalenius.connect(adult_catalog_path, budget=100) as s:
        yield s


def test_a_filter_by_the_frame_s_own_mean_is_the_sql_subquery(session: Session) -> None:
    adult = session.table("adult")
    older = adult.filter(col("sex") == "Female").filter(col("age") > col("age").mean())
    frame = older.agg(count())
    sql = (
        "SELECT COUNT(*) AS count FROM adult WHERE sex = 'Female' AND age > "
        "(SELECT AVG(age) FROM adult WHERE sex = 'Female')"
    )
    assert frame.to_sql() == sql
    shown = frame.explain(1)
    assert "age > (subquery 1)" in str(shown)
    result = frame.collect(epsilon=1)
    assert any(n.startswith("The subquery (SELECT AVG(age) FROM adult WHERE") for n in result.notes)
    again = session.query(sql, epsilon=1)
    assert again.cached and again.rows == result.rows


def test_a_derived_column_from_a_released_value_is_refused_when_aggregated(
    session: Session,
) -> None:
    adult = session.table("adult")
    centred = adult.with_columns(gap=col("age") - col("age").mean())
    frame = centred.agg(total=dalenius.frames.sum("gap"))
    with pytest.raises(QueryError, match="inside an aggregate's argument"):
        frame.collect(epsilon=1)
    # Compared in a filter, the same derived column is answered.
    answered = centred.filter(col("gap") > 10).agg(count()).collect(epsilon=1)
    assert answered.loss.epsilon == 1  # type: ignore[union-attr]


def test_an_unnamed_expression_aggregated_as_a_value_needs_no_name(session: Session) -> None:
    frame = session.table("adult").filter(col("age") > (col("age") + 1).mean()).agg(count())
    assert "(SELECT AVG(age + 1) FROM adult)" in frame.to_sql()
