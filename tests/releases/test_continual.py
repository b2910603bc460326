"""Continual release: the tree and its combination, stable bounding and the exact neighbour bound
over many publications (rows arriving late included), node reuse, one lifetime charge, refusals,
failures after the gate, and the CLI.

Data are generated with seeded numpy generators (data only); the noise comes from the OS
generator. The distribution and coverage tests are in ``tests/statistical``.
"""

from __future__ import annotations

import functools
import itertools
import json
from dataclasses import replace
from datetime import date, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest

import dalenius
from dalenius.cli.main import main
from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.dialect import DUCKDB
from dalenius.core.errors import (
    BudgetExceededError,
    ConfigurationError,
    EvaluationFailed,
    ExecutionError,
    InvalidLossError,
    QueryError,
)
from dalenius.core.loss import PureDP
from dalenius.engine.policy import PolicyRefusal
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import ChargeRequest, open_ledger
from dalenius.plan.protocol import LossDefect
from dalenius.releases._dyadic import DyadicTree
from dalenius.releases.continual import (
    SeriesRequest,
    Step,
    Stored,
    plan_continual,
)
from dalenius.releases.continual_series import plan_series_step

START = date(2024, 1, 1)

CATALOG = """
[dataset]
name = "ev"
{floor}

[tables.events]
source = {{ csv = "events.csv" }}
privacy_unit = {{ column = "pid", max_rows = 3 }}

[tables.events.columns]
pid = "int"
day = "date"
amount = {{ type = "int", bounds = [-3, 5] }}
kind = {{ type = "str", keys = ["a", "b"] }}
"""


def events(seed: int = 3, units: int = 300, days: int = 20) -> pd.DataFrame:
    rng = np.random.default_rng(seed)  # data only
    rows = rng.integers(1, 8, size=units)
    pid = np.repeat(np.arange(units), rows)
    day = [START + timedelta(days=int(d)) for d in rng.integers(0, days, size=pid.size)]
    return pd.DataFrame(
        {
            "pid": pid,
            "day": [d.isoformat() for d in day],
            "amount": rng.integers(-6, 9, size=pid.size),
            "kind": rng.choice(["a", "b"], size=pid.size),
        }
    )


def write(folder: Path, frame: pd.DataFrame, *, floor: float | None = None) -> Path:
    frame.to_csv(folder / "events.csv", index=False)
    text = CATALOG.format(floor=f"min_epsilon = {floor}" if floor is not None else "")
    (folder / "ev.toml").write_text(text, encoding="utf-8")
    return folder / "ev.toml"


SERIES: dict[str, Any] = {
    "time": "day",
    "period": "day",
    "start": "2024-01-01",
    "horizon": 20,
    "max_rows": 4,
}


def publish(session: Session, as_of: str, **extra: Any) -> Any:
    return session.continual("events", **{**SERIES, "epsilon": 1, **extra}, as_of=as_of)


# -- the tree and its combination ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("horizon", "height"),
    [(1, None), (2, None), (3, None), (5, None), (8, None), (13, None), (13, 2)],
)
def test_the_combination_is_the_least_squares_estimate_of_the_measured_nodes(
    horizon: int, height: int | None
) -> None:
    tree = DyadicTree(horizon, height)
    assert tree.levels == (height or max(horizon - 1, 0).bit_length() + 1)
    assert tree.most_nodes_per_period() == tree.levels
    per_level = [int((tree.level == lv).sum()) for lv in range(tree.levels)]
    assert per_level[-1] == (1 if height is None else -(-horizon // 2)) and per_level[0] == horizon
    for closed in range(horizon + 1):
        a = tree.combination(closed)
        measured = np.flatnonzero(tree.measured(closed))
        design = np.zeros((measured.size, closed))
        for row, node in enumerate(measured):
            design[row, tree.start[node] : tree.end[node] + 1] = 1
        dense = np.zeros_like(a)
        if closed:
            dense[:, measured] = np.linalg.solve(design.T @ design, design.T)
        np.testing.assert_allclose(a, dense, atol=1e-12)
        exact = np.arange(1, closed + 1) * 7
        np.testing.assert_allclose(a @ tree.node_values(exact), exact)  # unbiased


def test_every_period_lies_in_exactly_one_node_of_each_level() -> None:
    tree = DyadicTree(11)
    for period in range(11):
        covering = (tree.start <= period) & (period <= tree.end)
        assert sorted(tree.level[covering].tolist()) == list(range(tree.levels))


# -- the exact neighbour bound over publications -------------------------------------------------


def random_stream(rng: np.random.Generator, horizon: int) -> pd.DataFrame:
    """Rows of a few units, each with a day and the day it reaches the table (some late)."""
    units = int(rng.integers(2, 7))
    counts = rng.integers(0, 7, size=units)
    pid = np.repeat(np.arange(units), counts)
    day = rng.integers(0, horizon, size=pid.size)
    late = np.where(rng.random(pid.size) < 0.3, rng.integers(1, horizon, size=pid.size), 0)
    return pd.DataFrame(
        {
            "pid": pid,
            "day": day,
            "arrival": day + 1 + late,
            "amount": rng.integers(-6, 9, size=pid.size),
        }
    )


@functools.cache
def tiny_catalog(max_rows: int) -> Catalog:
    return Catalog.from_dict(
        {
            "dataset": {"name": "tiny"},
            "tables": {
                "t": {
                    "source": pd.DataFrame({"pid": [0], "day": [START], "amount": [0]}),
                    "privacy_unit": {"column": "pid", "max_rows": max_rows},
                    "columns": {
                        "pid": "int",
                        "day": "date",
                        "amount": {"type": "int", "bounds": [-3, 5]},
                    },
                }
            },
        }
    )


def tiny_plan(
    horizon: int, max_rows: int, step: Step, previous: Stored | None, levels: int | None = None
) -> Any:
    request = SeriesRequest(
        "t", "day", "day", START.isoformat(), horizon, max_rows, "amount", levels
    )
    return plan_continual(
        tiny_catalog(max_rows),
        request,
        series="s",
        epsilon=Fraction(1),
        step=step,
        previous=previous,
    )


def exact_series(
    stream: pd.DataFrame,
    horizon: int,
    max_rows: int,
    publications: list[int],
    key: int,
    levels: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every node's exact count and sum, each taken when its publication measured it."""
    tree = DyadicTree(horizon, levels)
    counts = np.zeros(tree.size, dtype=np.int64)
    sums = np.zeros(tree.size, dtype=np.int64)
    measured = 0
    previous = None
    con = duckdb.connect()
    for k, closed in enumerate(publications):
        plan = tiny_plan(horizon, max_rows, Step(0, k == 0, measured, closed), previous, levels)
        visible = stream[stream.arrival <= closed]  # what the table holds when period closes
        con.execute("CREATE OR REPLACE TABLE t (pid BIGINT, day DATE, amount BIGINT)")
        if len(visible):
            con.executemany(
                "INSERT INTO t VALUES (?, ?, ?)",
                [
                    (int(p), START + timedelta(days=int(d)), int(a))
                    for p, d, a in zip(visible.pid, visible.day, visible.amount, strict=True)
                ],
            )
        statement = plan.statement(DUCKDB, key)
        rows = con.execute(statement).fetchall() if statement is not None else []
        node_counts, node_sums = plan.exact_nodes(rows)
        new = plan.new_nodes()
        counts[new], sums[new] = node_counts[new], node_sums[new]
        measured = closed
        previous = Stored(counts.copy(), sums.copy(), tree.measured(closed), key)
    con.close()
    return counts, sums


def test_removing_a_unit_moves_the_node_vector_by_at_most_r_times_l_over_publications() -> None:
    """Over random small streams with rows arriving late, published at random days: the exact
    node vectors of neighbouring streams (one unit removed) differ by at most R·L in L1 (counts)
    and R·L·B (clipped sums, B = 5), and the bound is reached.
    """
    rng = np.random.default_rng(8)  # data only
    reached = 0
    for trial in range(40):
        horizon = int(rng.choice([3, 5, 8]))
        max_rows = int(rng.integers(1, 4))
        stops = sorted(set(rng.integers(1, horizon + 1, size=3).tolist()) | {horizon})
        stream = random_stream(rng, horizon)
        unit = int(rng.integers(0, stream.pid.max() + 1)) if len(stream) else 0
        height = None if trial % 4 else int(rng.integers(1, DyadicTree(horizon).levels + 1))
        levels = DyadicTree(horizon, height).levels
        key = int(rng.integers(0, 2**40))
        full = exact_series(stream, horizon, max_rows, stops, key, height)
        less = exact_series(stream[stream.pid != unit], horizon, max_rows, stops, key, height)
        moved_counts = int(np.abs(full[0] - less[0]).sum())
        moved_sums = int(np.abs(full[1] - less[1]).sum())
        assert moved_counts <= max_rows * levels, (trial, moved_counts)
        assert moved_sums <= max_rows * levels * 5, (trial, moved_sums)
        reached += moved_counts == max_rows * levels
    assert reached > 0


def test_without_late_rows_publishing_in_steps_keeps_the_rows_of_one_publication_at_the_end() -> (
    None
):
    """Stable bounding: the nodes measured one publication at a time are the nodes of the whole
    horizon measured at once (no later publication changes which earlier rows were kept).
    """
    rng = np.random.default_rng(9)  # data only
    for _ in range(12):
        stream = random_stream(rng, 8)
        stream["arrival"] = stream["day"] + 1
        key = int(rng.integers(0, 2**40))
        stepwise = exact_series(stream, 8, 2, [1, 2, 5, 6, 8], key)
        at_once = exact_series(stream, 8, 2, [8], key)
        np.testing.assert_array_equal(stepwise[0], at_once[0])
        np.testing.assert_array_equal(stepwise[1], at_once[1])
        tree = DyadicTree(8)
        leaves = stepwise[0][tree.level == 0]
        np.testing.assert_array_equal(stepwise[0], tree.node_values(leaves))  # consistent tree


# -- the product through the session ------------------------------------------------------------


def session_on(folder: Path, frame: pd.DataFrame, budget: float = 3, **kw: Any) -> Session:
    return dalenius.connect(write(folder, frame, **kw), budget=budget, ledger="memory:")


def records(session: Session) -> list[dict[str, Any]]:
    return [json.loads(e.answer) for e in session.ledger.entries() if e.answer]


def test_later_publications_reuse_every_stored_node_and_charge_nothing(tmp_path: Path) -> None:
    session = session_on(tmp_path, events())
    first = publish(session, "2024-01-06")
    assert first.loss == PureDP(Fraction(1)) and not first.cached
    second = publish(session, "2024-01-12")
    third = publish(session, "2024-01-21")
    assert second.loss == PureDP(Fraction(0)) == third.loss
    assert session.remaining() == PureDP(Fraction(2))
    docs = records(session)
    assert [d["request"]["closed"] for d in docs] == [5, 11, 20]
    for before, after in itertools.pairwise(docs):
        for old, new in zip(before["counts"], after["counts"], strict=True):
            assert old is None or old == new  # a stored node never changes
        assert after["key"] == before["key"]
    assert all(v is not None for v in docs[-1]["counts"])
    frame = third.to_pandas()
    assert len(frame) == 20
    for column in ("count", "running_count"):
        assert (frame[f"{column}_low"] <= frame[column]).all()
        assert (frame[column] <= frame[f"{column}_high"]).all()
    np.testing.assert_allclose(frame["running_count"], np.cumsum(frame["count"]))


def test_rows_arriving_for_a_published_period_never_change_its_stored_node(tmp_path: Path) -> None:
    data = events()
    session = session_on(tmp_path, data)
    publish(session, "2024-01-06")
    late = data.head(200).assign(day="2024-01-02", pid=np.arange(10_000, 10_200))
    write(tmp_path, pd.concat([data, late]))
    again = dalenius.connect(tmp_path / "ev.toml", ledger=session.ledger)
    publish(again, "2024-01-08")
    docs = records(again)
    tree = DyadicTree(20)
    first = np.array([v if v is not None else 0 for v in docs[0]["counts"]])
    second = np.array([v if v is not None else 0 for v in docs[1]["counts"]])
    kept = tree.measured(5)
    np.testing.assert_array_equal(first[kept], second[kept])


def test_nothing_closed_since_shows_the_last_publication_again_for_free(tmp_path: Path) -> None:
    session = session_on(tmp_path, events())
    first = publish(session, "2024-01-06")
    again = publish(session, "2024-01-06")
    assert again.cached and again.entry_id == first.entry_id
    assert again.to_pandas().equals(first.to_pandas())
    assert len(session.ledger.entries()) == 1
    fetched = session.release(first.entry_id)
    assert fetched.to_pandas().equals(first.to_pandas())


def test_the_first_publication_is_refused_when_the_budget_cannot_cover_the_lifetime_loss(
    tmp_path: Path,
) -> None:
    session = session_on(tmp_path, events(), budget=0.5)
    with pytest.raises(BudgetExceededError):
        publish(session, "2024-01-06")
    assert not [e for e in session.ledger.entries() if e.status != "rolled_back"]
    assert session.remaining() == PureDP(Fraction(1, 2))


def test_a_budget_spent_to_the_last_epsilon_still_publishes_the_series_on(tmp_path: Path) -> None:
    session = session_on(tmp_path, events(), budget=1)
    publish(session, "2024-01-06")
    assert session.remaining() == PureDP(Fraction(0))
    with pytest.raises(BudgetExceededError):
        session.query('SELECT COUNT(*) FROM "events"', epsilon=0.1)
    later = publish(session, "2024-01-15")
    assert len(later.to_pandas()) == 14 and later.loss == PureDP(Fraction(0))


def test_the_floor_applies_to_the_lifetime_loss_not_to_later_publications(tmp_path: Path) -> None:
    session = session_on(tmp_path, events(), floor=0.5)
    with pytest.raises(PolicyRefusal, match=r"floor of 0\.5"):
        publish(session, "2024-01-06", epsilon=0.25)
    publish(session, "2024-01-06")
    assert publish(session, "2024-01-09").loss == PureDP(Fraction(0))


def test_a_later_publication_without_a_charged_first_one_is_a_defect(tmp_path: Path) -> None:
    session = session_on(tmp_path, events())
    first = publish(session, "2024-01-06")
    entries = session.ledger.entries()
    plan, _ = plan_series_step(
        session.catalog,
        SeriesRequest("events", **SERIES),
        "analyst",
        Fraction(1),
        entries,
        as_of="2024-01-09",
    )
    assert plan is not None and not plan.step.opening
    assert plan.privacy_map() == PureDP(Fraction(0))
    uncovered = replace(plan, covered=None)
    cheaper = replace(plan, covered=PureDP(Fraction(1, 2)))
    assert uncovered.privacy_map() == PureDP(Fraction(1)) == cheaper.privacy_map()
    # Stored nodes that are not exactly those measured before: never measured twice.
    assert plan.previous is not None
    overlap = replace(plan.previous, mask=DyadicTree(20).measured(7))
    assert replace(plan, previous=overlap).privacy_map() == PureDP(Fraction(1))
    with pytest.raises(LossDefect):
        session.spend(lambda _c: uncovered, text=uncovered.text, idempotency_key=plan.slot)
    assert session.remaining() == PureDP(Fraction(2)) and first.entry_id


def test_a_catalog_change_to_the_row_cap_starts_a_new_series(tmp_path: Path) -> None:
    """Every node of a tree is measured with one R (a unit's rows over R would otherwise reach
    more nodes of a level than the lifetime loss paid for): a new cap is a new series, charged.
    """
    session = session_on(tmp_path, events(), budget=3)
    arguments = {**SERIES, "max_rows": None, "epsilon": 1}
    first = session.continual("events", **arguments, as_of="2024-01-06")
    catalog = tmp_path / "ev.toml"
    catalog.write_text(catalog.read_text().replace("max_rows = 3", "max_rows = 5"))
    changed = dalenius.connect(catalog, ledger=session.ledger)
    second = changed.continual("events", **arguments, as_of="2024-01-09")
    assert first.release.max_rows == 3 and second.release.max_rows == 5
    assert second.loss == PureDP(Fraction(1)) and changed.remaining() == PureDP(Fraction(1))
    with pytest.raises(QueryError, match="catalog has changed"):
        changed.release(first.entry_id)


def test_a_constant_time_dataset_refuses_a_series_for_free(tmp_path: Path) -> None:
    """Constant-time mode needs a calibrated deadline per plan class; series have none yet
    (``dalenius calibrate`` does not measure them), so the refusal comes before any reserve."""
    path = write(tmp_path, events())
    text = path.read_text().replace('name = "ev"', 'name = "ev"\nconstant_time = true')
    path.write_text(
        text.replace("[tables.events.columns]", "max_row_count = 5000\n\n[tables.events.columns]")
    )
    session = dalenius.connect(path, budget=3, ledger="memory:")
    with pytest.raises(ConfigurationError, match="no calibrated deadline"):
        publish(session, "2024-01-06")
    assert session.remaining() == PureDP(Fraction(3))
    assert not [e for e in session.ledger.entries() if e.status != "rolled_back"]


def test_a_publication_in_progress_refuses_another_for_free(tmp_path: Path) -> None:
    session = session_on(tmp_path, events())
    publish(session, "2024-01-06")
    plan, _ = plan_series_step(
        session.catalog,
        SeriesRequest("events", **SERIES),
        "analyst",
        Fraction(1),
        session.ledger.entries(),
        as_of="2024-01-09",
    )
    assert plan is not None
    session.ledger.reserve(
        ChargeRequest(
            principal="analyst",
            dataset="ev",
            loss=PureDP(Fraction(0)),
            request_key="k",
            sql=plan.text,
            plan_hash=plan.fingerprint(),
            idempotency_key=plan.slot,
        ),
        charge=True,
    )
    with pytest.raises(QueryError, match="in progress"):
        publish(session, "2024-01-10")
    assert session.remaining() == PureDP(Fraction(2))


class FailingExecutor(DuckDBExecutor):
    """An engine that fails once it is asked for data (after the gate)."""

    def fetch(self, sql: str, reads: Any = ()) -> list[tuple[object, ...]]:
        raise ExecutionError("secret: 4711 rows")


def test_a_failure_after_the_gate_ends_the_generation_and_the_next_one_is_charged(
    tmp_path: Path,
) -> None:
    catalog = load_catalog(write(tmp_path, events()))
    ledger = open_ledger(None)
    ledger.set_budget("analyst", "ev", PureDP(Fraction(3)))
    session = Session(catalog, ledger=ledger, executor=DuckDBExecutor(catalog))
    failing = Session(catalog, ledger=ledger, executor=FailingExecutor(catalog))
    with pytest.raises(EvaluationFailed):
        publish(failing, "2024-01-06")  # the first publication: ε charged
    assert session.remaining() == PureDP(Fraction(2))
    publish(session, "2024-01-06")  # generation 1, charged again
    assert session.remaining() == PureDP(Fraction(1))
    with pytest.raises(EvaluationFailed):
        publish(failing, "2024-01-09")  # a later one: nothing charged, the generation ends
    assert session.remaining() == PureDP(Fraction(1))
    restarted = publish(session, "2024-01-09")  # generation 2: every node measured afresh
    assert restarted.loss == PureDP(Fraction(1)) and session.remaining() == PureDP(Fraction(0))
    keys = [e.idempotency_key for e in ledger.entries()]
    assert [k.rsplit(":", 2)[1:] for k in keys if k] == [
        ["g0", "open"],
        ["g1", "open"],
        ["g1", "5"],
        ["g2", "open"],
    ]
    assert ledger.entries()[-2].status == "failed" and "4711" not in ledger.entries()[-2].detail


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"period": "hour"}, "period"),
        ({"time": "kind"}, "date column"),
        ({"horizon": 5000}, "horizon"),
        ({"horizon": 0}, "horizon"),
        ({"period": "month", "start": "2024-01-03"}, "1st of a month"),
        ({"start": "yesterday"}, "not a date"),
        ({"value": "kind"}, "int column with bounds"),
        ({"max_rows": 0}, "max_rows"),
        ({"levels": 7}, "levels"),
        ({"as_of": "2999-01-01"}, "after today"),
    ],
)
def test_a_series_that_cannot_be_published_is_refused_before_any_data_is_read(
    tmp_path: Path, change: dict[str, Any], match: str
) -> None:
    session = session_on(tmp_path, events())
    arguments = {**SERIES, "epsilon": 1, "as_of": "2024-01-06", **change}
    with pytest.raises(QueryError, match=match):
        session.continual("events", **arguments)
    assert not session.ledger.entries()
    assert session.ledger.audit()[-1].outcome == "refused"


def test_a_row_level_table_counts_one_row_per_unit() -> None:
    frame = pd.DataFrame({"day": [START], "n": [1]})
    session = dalenius.connect(
        {
            "tables": {
                "t": {
                    "source": frame,
                    "privacy_unit": "row",
                    "columns": {"day": "date", "n": {"type": "int", "bounds": [0, 1]}},
                }
            }
        },
        budget=2,
        ledger="memory:",
    )
    with pytest.raises(QueryError, match="protects one row"):
        session.continual(
            "t", time="day", period="week", start=START, horizon=4, epsilon=1, max_rows=2
        )
    result = session.continual(
        "t", time="day", period="week", start=START, horizon=4, epsilon=1, as_of="2024-01-15"
    )
    assert result.release.max_rows == 1 and len(result.to_pandas()) == 2
    with pytest.raises(InvalidLossError):
        session.continual("t", time="day", period="week", start=START, horizon=4, epsilon=0)


def test_the_cli_publishes_a_monthly_series_with_sums_and_again_for_free(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = events(days=90)
    catalog = write(tmp_path, frame)
    ledger = tmp_path / "ledger.sqlite"
    base = [
        "continual",
        "--catalog",
        str(catalog),
        "--table",
        "events",
        "--time",
        "day",
        "--period",
        "month",
        "--start",
        "2024-01-01",
        "--horizon",
        "12",
        "--value",
        "amount",
        "--ledger",
        str(ledger),
        "--budget",
        "2",
        "--epsilon",
        "1",
    ]
    assert main([*base, "--as-of", "2024-03-01", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["closed"] == 2 and doc["loss"]["epsilon"] == 1 and doc["levels"] == 5
    assert all("running_sum" in p for p in doc["periods"])
    assert main([*base, "--as-of", "2024-04-02", "--csv", str(tmp_path / "s.csv")]) == 0
    out = capsys.readouterr().out
    assert "covered by the series' lifetime loss" in out and "Remaining: ε=1" in out
    assert len(pd.read_csv(tmp_path / "s.csv")) == 3
    assert main([*base, "--delta", "1e-6"]) != 0
