"""A unit reached through another table's key (``privacy_unit.through``) gives the same exact
answers on every engine, for the same hash key: each engine's view joins the unit in, and the
lines of a customer over the caps are ranked alike. The ``sales`` data has lines that reach no
order, orders without a customer and one order key held by two customers. With the order key
declared (``sales_keyed``), a join that equates it beside the customer reads the lines as
stored and takes each line's customer from the order it joins: the same cells again.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.conformance.engines import OTHER_ENGINES
from tests.support.exact import same_exact_units

from dalenius.engine.session import Session

QUERIES = [
    "SELECT COUNT(*), SUM(l_quantity) FROM lines",
    "SELECT l_flag, COUNT(*), SUM(l_quantity), AVG(l_price) FROM lines GROUP BY l_flag",
    "SELECT o_priority, COUNT(*), SUM(l_price) FROM lines "
    "JOIN orders ON l_orderkey = o_orderkey AND l_custkey = o_custkey GROUP BY o_priority",
]


JOINED = [
    QUERIES[2],
    "SELECT l_flag, COUNT(*), AVG(l_price) FROM orders "
    "JOIN lines ON o_custkey = l_custkey AND o_orderkey = l_orderkey "
    "WHERE o_priority = 'high' GROUP BY l_flag",
    "SELECT o_priority, COUNT(*) FROM orders WHERE EXISTS (SELECT * FROM lines "
    "WHERE l_orderkey = o_orderkey AND l_custkey = o_custkey AND l_quantity > 20) "
    "GROUP BY o_priority",
]


@pytest.mark.parametrize("engine", OTHER_ENGINES)
def test_every_engine_gives_the_same_exact_cells(
    engine: str, sessions_on: Callable[[str], dict[str, Session]]
) -> None:
    for sql in QUERIES:
        same_exact_units(sessions_on("duckdb")["sales"], sessions_on(engine)["sales"], sql)
    for sql in JOINED:
        duckdb = sessions_on("duckdb")["sales_keyed"]
        assert '"__stored_lines"' in duckdb.prepare(sql, 1).exact.main  # the order's customer
        same_exact_units(duckdb, sessions_on(engine)["sales_keyed"], sql)
