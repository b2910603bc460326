"""Exact aggregates do not depend on the order of the rows or on how Spark partitions them.

Float columns are summed as fixed-point integers, so a different summation order (another row
order, another partitioning, parallel threads) cannot change a single bit of the result.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.conformance.cases import Case
from tests.conformance.conftest import SPARK_TEST_CONF
from tests.conformance.engines import session_for, spark_variant
from tests.conformance.test_conformance import measured

from dalenius.core.catalog import Catalog
from dalenius.engine.session import Session
from dalenius.executors.spark import SparkExecutor

ORDER_SENSITIVE = [
    Case(
        "SELECT SUM(capital_gain), AVG(hours_per_week), VAR_POP(hours_per_week), "
        "MEDIAN(hours_per_week) FROM adult",
        "adult",
    ),
    Case(
        "SELECT education, AVG(hours_per_week), SUM(capital_gain) FROM adult GROUP BY education",
        "adult",
    ),
]
"""Float sums, averages, variances and quantiles: the aggregates a float sum's order could move."""


@pytest.mark.parametrize(
    "engine",
    [
        "duckdb",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("spark", marks=pytest.mark.spark),
    ],
)
def test_shuffled_rows_give_the_same_bits(
    engine: str, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    sessions = sessions_on(engine)
    for case in ORDER_SENSITIVE:
        assert measured(sessions["adult"], case) == measured(sessions["adult_shuffled"], case)


@pytest.mark.spark
def test_spark_partition_counts_give_the_same_bits(
    catalogs: dict[str, Catalog], duckdb_sessions: dict[str, Session]
) -> None:
    variant = spark_variant(catalogs["adult"])
    results = []
    for partitions in (1, 7):
        executor = SparkExecutor(variant, partitions=partitions, conf=SPARK_TEST_CONF)
        with session_for(variant, executor) as session:
            results.append([measured(session, case) for case in ORDER_SENSITIVE])
    reference = [measured(duckdb_sessions["adult"], case) for case in ORDER_SENSITIVE]
    assert results[0] == results[1] == reference
