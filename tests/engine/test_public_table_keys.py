"""A GROUP BY column of an inner-joined public table takes that table's values as its key list:
every value is answered, empty ones included, with no private selection and no δ
(:mod:`dalenius.plan.rewrite.public_table_keys`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.conformance.datasets import SHOP_TOML
from tests.support.exact import exact_units_for

import dalenius
from dalenius.core.errors import PrivacyRefusal
from dalenius.engine import session as session_module
from dalenius.engine.session import Session
from dalenius.plan.expr import Col
from dalenius.sql.emit.statements import read_names

SUPPLIERS = {"s_suppkey": [1, 2, 3, 4, 5], "s_name": ["a", "b", "c", "d", None]}
"""Five suppliers; supplier 5 (no name) and supplier 4 sell nothing below."""

ORDERS = {
    "pid": [1, 1, 1, 1, 1, 1, 2, 2, 3, 4, 4, 5],
    "suppkey": [1, 2, 3, 1, 2, 3, 1, 1, 2, 3, 9, 2],  # supplier 9 is not in the public table
    "amount": [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 5.0, 6.0, 7.0, 8.0, 9.0, 3.0],
}
"""Person 1 has six orders with three suppliers, over the cap of 3 rows."""

BY_KEY = "SELECT s_suppkey, COUNT(*), SUM(amount) FROM orders JOIN supplier ON suppkey = s_suppkey GROUP BY s_suppkey"
BY_NAME = "SELECT s_name, COUNT(*) FROM orders JOIN supplier ON suppkey = s_suppkey GROUP BY s_name"


def _write(folder: Path, orders: dict[str, list[object]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(orders).to_csv(folder / "shop_orders.csv", index=False)
    pd.DataFrame(SUPPLIERS).to_csv(folder / "shop_supplier.csv", index=False)
    path = folder / "shop.toml"
    path.write_text(SHOP_TOML.format(folder=folder, max_rows=3))  # the conformance catalog
    return path


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return dalenius.connect(_write(tmp_path / "full", ORDERS), ledger="memory:", budget=10)


def test_every_value_of_the_public_column_is_answered_without_delta(session: Session) -> None:
    result = session.query(BY_KEY, epsilon=1)
    assert [row[0] for row in result.rows] == [1, 2, 3, 4, 5]  # 4 and 5 have no orders
    assert str(result.loss) == "ε=1"
    names = session.query(BY_NAME, epsilon=1)
    assert [row[0] for row in names.rows] == ["a", "b", "c", "d", None]
    explained = str(session.explain(BY_KEY, epsilon=1))
    assert "5 public keys" in explained
    assert "s_suppkey's 5 keys are the values of the public table supplier" in explained


def test_the_keys_are_the_values_of_the_public_rows_that_pass_the_conditions_on_them(
    session: Session,
) -> None:
    """A WHERE conjunct on the public table alone narrows its values to the rows it keeps; one
    that also reads the private table does not (its rows may pass it whatever the supplier)."""
    narrowed = BY_KEY.replace(
        " GROUP BY", " WHERE s_suppkey IN (2, 4, 5) AND s_name <> 'd' GROUP BY"
    )
    result = session.query(narrowed, epsilon=1)
    assert [row[0] for row in result.rows] == [2]  # 4 is 'd'; 5's name is NULL: <> is not true
    assert "s_suppkey's 1 keys are the values of the public table supplier" in str(
        session.explain(narrowed, epsilon=1)
    )
    # Supplier 2: two orders of person 1 (within the cap once filtered), one of 3, one of 5.
    assert dict(exact_units_for(session, narrowed, salt=5))["m0"] == [4]
    mixed = BY_KEY.replace(" GROUP BY", " WHERE s_suppkey < 3 OR amount > 55 GROUP BY")
    assert [row[0] for row in session.query(mixed, epsilon=1).rows] == [1, 2, 3, 4, 5]
    nobody = BY_KEY.replace(" GROUP BY", " WHERE s_name = 'zz' GROUP BY")
    assert session.query(nobody, epsilon=1).rows == ()


def test_the_exact_cells_are_the_bounded_rows_per_public_value(session: Session) -> None:
    """Persons within the cap keep every row; person 1 keeps 3 of 6, in any suppliers (no
    sensitivity here depends on the groups); supplier 9's order joins nothing."""
    units = exact_units_for(session, BY_KEY, salt=5)
    counts = np.array(units["m0"])
    others = pd.DataFrame(ORDERS).query("pid != 1 and suppkey != 9")
    expected = others.groupby("suppkey").size().reindex([1, 2, 3, 4, 5], fill_value=0).to_numpy()
    kept = counts - expected
    assert kept.min() >= 0 and kept.sum() == 3


def test_removing_a_person_moves_each_cell_by_at_most_the_charge(
    session: Session, tmp_path: Path
) -> None:
    plan = session.prepare(BY_KEY, 1).plan
    frame = pd.DataFrame(ORDERS)
    for pid in (1, 2, 4):
        rest = frame[frame.pid != pid]
        other = dalenius.connect(
            _write(tmp_path / f"without{pid}", rest.to_dict("list")), ledger="memory:", budget=1
        )
        for salt in (5, 2**40):
            a, b = (
                exact_units_for(session, BY_KEY, salt=salt),
                exact_units_for(other, BY_KEY, salt=salt),
            )
            for m in plan.measurements:
                l1 = int(np.abs(np.array(a[m.name]) - np.array(b[m.name])).sum())
                assert l1 <= m.sensitivity_units, (pid, m.describe(), l1)


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        (
            "SELECT s_name, COUNT(*) FROM orders LEFT JOIN supplier ON suppkey = s_suppkey "
            "GROUP BY s_name",
            "a LEFT JOIN's right side is NULL where nothing matched",
        ),
        ("SELECT suppkey, COUNT(*) FROM orders GROUP BY suppkey", "a private column"),
    ],
)
def test_other_keys_still_need_a_private_selection(session: Session, sql: str, why: str) -> None:
    with pytest.raises(PrivacyRefusal, match="needs a delta"):
        session.query(sql, epsilon=1)


def test_a_column_with_too_many_values_is_selected_privately(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_module, "MAX_PUBLIC_TABLE_KEYS", 4)
    with pytest.raises(
        PrivacyRefusal, match="the public table supplier holds more values of s_suppkey"
    ):
        session.query(BY_KEY, epsilon=1)
    assert "selected privately" in str(session.explain(BY_KEY, epsilon=1, delta=1e-6))


@pytest.mark.parametrize(
    "sql", [BY_KEY, BY_NAME, BY_KEY.replace(" GROUP BY s_suppkey", "").replace("s_suppkey, ", "")]
)
def test_a_kept_input_counted_per_unit_answers_as_the_bounded_rows_do(
    session: Session, sql: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a join the input is kept, units over the cap are found by counting their rows and
    the others are aggregated straight by group (sql.emit.bounding.bounded_aggregate): the same
    exact answer, bit for bit, as aggregating the bounded rows, for each hash key."""
    from dalenius.sql.emit import statements

    prepared = session.prepare(sql, 1)
    for table in prepared.tables:
        session.executor.prepare(table)
    plan, dialect = prepared.plan, session.executor.dialect
    for salt in (5, 77, 2**40):
        counted = statements.exact_queries(plan, dialect, salt=salt).main
        assert "__input AS MATERIALIZED" in counted and "COUNT(*) > 3 AS __over_caps" in counted
        with monkeypatch.context() as patch:
            patch.setattr(statements, "bounded_aggregate", lambda *a, **k: None)
            rows = statements.exact_queries(plan, dialect, salt=salt).main
        ours, reference = session.executor.fetch(counted), session.executor.fetch(rows)
        assert sorted(map(repr, ours)) == sorted(map(repr, reference)), (sql, salt)


def test_a_public_table_is_read_again_only_when_its_data_change(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The join's multiplicity and the keys read from ``supplier`` while planning are kept per
    data version: planning the query again reads nothing, a new version of the file reads the
    table again (and its new values are the keys)."""
    reads: list[str] = []
    fetch = session.executor.fetch

    def counted(sql: str) -> list[tuple[object, ...]]:
        if '"supplier"' in sql and "__" not in sql:  # a read made while planning
            reads.append(sql)
        return fetch(sql)

    monkeypatch.setattr(session.executor, "fetch", counted)
    session_module.PLANS.clear()
    session.prepare(BY_KEY, 1)
    assert len(reads) == 2  # the multiplicity and the keys
    session.prepare(BY_KEY, 1)
    session.prepare(BY_KEY, 2)
    assert len(reads) == 2
    folder = Path(session.catalog.table("supplier").source.location).parent  # type: ignore[union-attr]
    grown = pd.DataFrame(
        {"s_suppkey": [*SUPPLIERS["s_suppkey"], 6], "s_name": [*SUPPLIERS["s_name"], "f"]}
    )
    grown.to_csv(folder / "shop_supplier.csv", index=False)
    os.utime(folder / "shop_supplier.csv", (1, 1))  # a new modification time whatever the clock
    fresh = dalenius.connect(session.catalog, ledger="memory:", budget=1)
    assert fresh.prepare(BY_KEY, 1).plan.group_by[0].keys == (1, 2, 3, 4, 5, 6)


def test_the_names_a_plan_reads_leave_out_its_key_values(session: Session) -> None:
    """Column pruning reads the names a plan mentions; a public table's key list holds values
    (up to 100,000), which it skips, and the statement still reads every field it needs."""
    plan = session.prepare(BY_NAME, 1).plan
    names = read_names(plan)
    assert {"a", "b", "c", "d"}.isdisjoint(names)  # the supplier names, keys of s_name
    assert {k.expr.name for k in plan.group_by if isinstance(k.expr, Col)} <= names
    assert session.query(BY_NAME, epsilon=1).rows[0][0] == "a"
