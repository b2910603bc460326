"""A GROUP BY column of a public table joined to a private one (its values as the key list,
:mod:`dalenius.plan.rewrite.public_table_keys`) gives the same exact answers on every engine, for
the same hash key: the keys read from the public table, the units over their caps counted and
ranked in the kept input, the others summed by group.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.conformance.engines import OTHER_ENGINES
from tests.support.exact import same_exact_units

from dalenius.engine.session import Session

QUERIES = [
    "SELECT s_suppkey, COUNT(*), SUM(amount) FROM orders JOIN supplier ON suppkey = s_suppkey "
    "GROUP BY s_suppkey",
    "SELECT s_name, AVG(amount) FROM orders JOIN supplier ON suppkey = s_suppkey "
    "WHERE amount > 10 GROUP BY s_name",
    # Keys read from the supplier rows that pass the conditions on supplier alone.
    "SELECT s_suppkey, COUNT(*) FROM orders JOIN supplier ON suppkey = s_suppkey "
    "WHERE s_suppkey BETWEEN 2 AND 8 AND s_name <> 's4' AND amount > 10 GROUP BY s_suppkey",
]


def test_the_keys_are_the_public_table_s_values(
    sessions_on: Callable[[str], dict[str, Session]],
) -> None:
    session = sessions_on("duckdb")["shop"]
    plan = session.prepare(QUERIES[1], 1).plan
    (key,) = plan.group_by
    assert key.from_table == "supplier"
    named = sorted(f"s{k}" for k in [*range(1, 11), 12, 13] if k != 5)
    assert key.keys == (*named, None)
    assert plan.selection is None  # no private selection, no delta
    narrowed = session.prepare(QUERIES[2], 1).plan.group_by[0]
    assert narrowed.keys == (2, 3, 6, 7, 8)  # no supplier 5; 4 is named s4


@pytest.mark.parametrize("engine", OTHER_ENGINES)
def test_every_engine_gives_the_same_exact_cells(
    engine: str, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    for sql in QUERIES:
        same_exact_units(sessions_on("duckdb")["shop"], sessions_on(engine)["shop"], sql)
