"""Joins of two private tables at equal loss: caps after the join, truncation, elastic sensitivity.

Two schemas, generated here (seeded test data, never noise):

* **orders** (person-level): customers with up to 40 orders of 1–7 lines each; ``orders`` capped at
  40 rows and ``lineitem`` at 280 per customer. The question, how many lines urgent orders have,
  is asked three ways:
    - *caps after the join*: joined on the order and the customer (``AND l.custkey = o.custkey``),
      a join on the unit whose caps multiply (40 × 280 rows per customer);
    - *truncation*: joined on the order alone, the catalog declaring ``join_rows_per_key`` 1 on
      ``o.orderkey`` and 7 on ``l.orderkey`` (docs/mechanisms/join_truncation.md);
    - *elastic sensitivity* (FLEX: Johnson, Near & Song, VLDB 2018), the catalog declaring nothing:
      noise calibrated to the data's largest key frequencies after the per-customer caps,
      smoothed (docs/mechanisms/join_truncation.md).
* **clinics** (row-level, each row a unit): 50,000 visits and 2,000 staff rows over 500 clinics
  of Zipf-distributed size; no unit to join on, so caps after the join do not apply; truncation
  at τ = 50 visits and 5 staff per clinic; elastic with nothing declared.

Every answer is a real release (``Session.query`` on DuckDB, fresh each run). It prints, per
mechanism, the loss, the count's sensitivity (elastic: its floor, the scale being computed from the
data), the releases' median minus the plain join's exact count (what truncation drops shows here),
the median absolute error over ``--runs`` releases against that count, and each error ÷
truncation's. Elastic sensitivity answers counts only (as FLEX does), so the question is a count.

    .venv/bin/python bench/joins.py [--runs 50] [--epsilon 1] [--delta 1e-6]
"""

from __future__ import annotations

import argparse
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from dalenius.core.catalog import load_catalog
from dalenius.core.loss import ApproxDP
from dalenius.engine.session import ReleasePlan, Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

ORDERS_TOML = """
[dataset]
name = "orders"

[tables.orders]
source = {{ csv = "orders.csv" }}
privacy_unit = {{ column = "custkey", max_rows = 40 }}

[tables.orders.columns]
custkey = {{ type = "int" }}
orderkey = {{ type = "int"{o_key} }}
priority = {{ type = "str", keys = ["urgent", "normal"] }}

[tables.lineitem]
source = {{ csv = "lineitem.csv" }}
privacy_unit = {{ column = "custkey", max_rows = 280 }}

[tables.lineitem.columns]
custkey = {{ type = "int" }}
orderkey = {{ type = "int"{l_key} }}
quantity = {{ type = "int", bounds = [1, 50] }}
"""

CLINICS_TOML = """
[dataset]
name = "clinics"

[tables.visits]
source = { csv = "visits.csv" }
privacy_unit = "row"

[tables.visits.columns]
clinic = { type = "int", join_rows_per_key = 50 }
cost = { type = "int", bounds = [0, 100] }

[tables.staff]
source = { csv = "staff.csv" }
privacy_unit = "row"

[tables.staff.columns]
clinic = { type = "int", join_rows_per_key = 5 }
role = { type = "str", keys = ["nurse", "doctor"] }
"""

ORDERS_SQL = (
    "SELECT COUNT(*) FROM lineitem l JOIN orders o ON l.orderkey = o.orderkey{on} "
    "WHERE o.priority = 'urgent'"
)
CLINICS_SQL = (
    "SELECT COUNT(*) FROM visits v JOIN staff s ON v.clinic = s.clinic WHERE s.role = 'nurse'"
)
CLINICS_OPEN = CLINICS_TOML.replace(", join_rows_per_key = 50", "").replace(
    ", join_rows_per_key = 5", ""
)


class FreshSession(Session):
    """A session whose every release reads the data (never answered from the ledger's cache)."""

    count = 0

    def _request_key(self, plan: ReleasePlan[Any]) -> str:
        FreshSession.count += 1
        return f"{super()._request_key(plan)}:{FreshSession.count}"


def write_orders(folder: Path, customers: int) -> None:
    """Customers with Poisson(10) orders (1 to 40) of 1 to 7 lines; a fifth of orders urgent."""
    rng = np.random.Generator(np.random.PCG64(1))  # benchmark data, never noise
    n_orders = np.clip(rng.poisson(10, customers), 1, 40)
    custkey = np.repeat(np.arange(customers), n_orders)
    orders = pd.DataFrame(
        {
            "custkey": custkey,
            "orderkey": np.arange(len(custkey)),
            "priority": np.where(rng.random(len(custkey)) < 0.2, "urgent", "normal"),
        }
    )
    lines = rng.integers(1, 8, len(orders))
    lineitem = pd.DataFrame(
        {
            "custkey": np.repeat(orders.custkey.to_numpy(), lines),
            "orderkey": np.repeat(orders.orderkey.to_numpy(), lines),
            "quantity": rng.integers(1, 51, int(lines.sum())),
        }
    )
    orders.to_csv(folder / "orders.csv", index=False)
    lineitem.to_csv(folder / "lineitem.csv", index=False)


def write_clinics(folder: Path) -> None:
    """50,000 visits and 2,000 staff over 500 clinics of Zipf(1.3)-distributed popularity."""
    rng = np.random.Generator(np.random.PCG64(2))  # benchmark data, never noise
    weights = 1.0 / np.arange(1, 501) ** 1.3
    weights /= weights.sum()
    pd.DataFrame(
        {"clinic": rng.choice(500, 50_000, p=weights), "cost": rng.integers(0, 101, 50_000)}
    ).to_csv(folder / "visits.csv", index=False)
    pd.DataFrame(
        {
            "clinic": rng.choice(500, 2_000, p=weights),
            "role": rng.choice(["nurse", "doctor"], 2_000),
        }
    ).to_csv(folder / "staff.csv", index=False)


def session(folder: Path, toml: str) -> Session:
    path = folder / f"cat-{abs(hash(toml))}.toml"
    path.write_text(toml)
    catalog = load_catalog(path)
    ledger = open_ledger(None)
    ledger.set_budget("analyst", catalog.name, ApproxDP(Fraction(10**6), Fraction(1, 2)))
    return FreshSession(catalog, ledger=ledger, executor=DuckDBExecutor(catalog))


def released(
    s: Session, sql: str, args: argparse.Namespace, delta: float | None = None
) -> tuple[np.ndarray, str]:
    """``runs`` fresh releases of the count, and its sensitivity as explain gives it (for elastic
    sensitivity, the floor: the scale is computed from the data at each release).
    """
    plan = s.prepare(sql, args.epsilon, delta).plan
    m = plan.measurements[0]
    sens = (
        f"{m.sensitivity_units:,}"
        if plan.elastic is None
        else f"data (floor {m.sensitivity_units:,})"
    )
    values = np.array(
        [float(s.query(sql, args.epsilon, delta=delta).rows[0][0]) for _ in range(args.runs)]
    )
    return values, sens


def row(mech: str, loss: str, values: np.ndarray, sens: str, truth: float) -> tuple[Any, ...]:
    bias = float(np.median(values) - truth)
    error = float(np.median(np.abs(values - truth)))
    return mech, loss, sens, f"{bias:,.0f}", f"{error:,.0f}", error


def report(name: str, truth: float, rows: list[tuple[Any, ...]]) -> None:
    print(f"\n{name}: the plain join's exact count = {truth:,.0f}")
    print(
        f"{'mechanism':<22} {'loss':<16} {'sensitivity':<22} {'median−exact':>13} {'median |error|':>15} {'÷ truncation':>13}"
    )
    base = next(r[5] for r in rows if r[0] == "truncation")
    for mech, loss, sens, bias, error, value in rows:
        if value is None:
            print(f"{mech:<22} {loss:<16} {sens:<22} {'':>13} {'refused':>15}")
            continue
        print(f"{mech:<22} {loss:<16} {sens:<22} {bias:>13} {error:>15} {value / base:>13.3g}")


def views(folder: Path, tables: tuple[str, str]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for t in tables:
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_csv_auto('{folder / t}.csv')")
    return con


def run_orders(folder: Path, args: argparse.Namespace) -> None:
    write_orders(folder, args.customers)
    truncated = session(
        folder, ORDERS_TOML.format(o_key=", join_rows_per_key = 1", l_key=", join_rows_per_key = 7")
    )
    plain = session(folder, ORDERS_TOML.format(o_key="", l_key=""))
    truth = float(
        views(folder, ("orders", "lineitem")).execute(ORDERS_SQL.format(on="")).fetchone()[0]
    )
    loss, approx = f"ε={args.epsilon:g}", f"ε={args.epsilon:g}, δ={args.delta:g}"
    sql_unit = ORDERS_SQL.format(on=" AND l.custkey = o.custkey")
    rows = [
        row("caps after the join", loss, *released(plain, sql_unit, args), truth),
        row("truncation", loss, *released(truncated, ORDERS_SQL.format(on=""), args), truth),
        row("elastic", approx, *released(plain, ORDERS_SQL.format(on=""), args, args.delta), truth),
    ]
    report(f"orders ({args.customers:,} customers; R = 40 orders, 280 lines)", truth, rows)


def run_clinics(folder: Path, args: argparse.Namespace) -> None:
    write_clinics(folder)
    truth = float(views(folder, ("visits", "staff")).execute(CLINICS_SQL).fetchone()[0])
    loss, approx = f"ε={args.epsilon:g}", f"ε={args.epsilon:g}, δ={args.delta:g}"
    rows: list[tuple[Any, ...]] = [
        ("caps after the join", "-", "no unit to join on", "", "", None),
        row("truncation", loss, *released(session(folder, CLINICS_TOML), CLINICS_SQL, args), truth),
        row(
            "elastic",
            approx,
            *released(session(folder, CLINICS_OPEN), CLINICS_SQL, args, args.delta),
            truth,
        ),
    ]
    report("clinics (row units, Zipf clinics; τ = 50 visits, 5 staff)", truth, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--customers", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        run_orders(folder, args)
        run_clinics(folder, args)


if __name__ == "__main__":
    main()
