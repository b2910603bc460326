"""Joins of two private tables at equal loss: caps after the join, truncation, elastic sensitivity.

Two schemas, generated here (seeded test data, never noise):

* **orders** (person-level): customers with up to 40 orders of 1–7 lines each; ``orders`` capped at
  40 rows and ``lineitem`` at 280 per customer. The question, lines of urgent orders and their
  quantity, is asked three ways:
    - *caps after the join*: joined on the order and the customer (``AND l.custkey = o.custkey``),
      a join on the unit whose caps multiply (40 × 280 rows per customer);
    - *truncation*: joined on the order alone, the catalog declaring ``join_rows_per_key`` 1 on
      ``o.orderkey`` and 7 on ``l.orderkey`` (docs/mechanisms/join_truncation.md);
    - *elastic sensitivity* (FLEX: Johnson, Near & Song, VLDB 2018): the join's local sensitivity
      at distance ``d`` from the data's largest key frequencies ``mf`` after the per-customer caps,
      ``R_l·mf_o + R_o·mf_l + R_l·R_o·(2d + 1)``, smoothed (``β = ε/(2 ln(2/δ))``) and answered
      with Laplace noise of scale ``2S/ε``.
* **clinics** (row-level, each row a unit): 50,000 visits and 2,000 staff rows over 500 clinics
  of Zipf-distributed size; no unit to join on, so caps after the join do not apply; truncation
  at τ = 50 visits and 5 staff per clinic; elastic from the hottest clinic's frequencies.

Dalenius's two answers are its real releases (``Session.query`` on DuckDB, fresh each run); the
elastic one is **a simulation** for this benchmark only: its exact answer plus continuous Laplace
noise from a seeded numpy generator at the smooth sensitivity computed from the data. It prints,
per mechanism, the loss, the sensitivity (or smooth sensitivity) of each measurement, the bias
(the releases' median minus the plain join's answer: what truncation drops shows here) and the median absolute
error over ``--runs`` releases against the plain join's answer, and each mechanism's error
÷ truncation's.

    .venv/bin/python bench/joins.py [--runs 50] [--epsilon 1] [--delta 1e-6]
"""

from __future__ import annotations

import argparse
import math
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
    "SELECT COUNT(*), SUM(l.quantity) FROM lineitem l JOIN orders o ON l.orderkey = o.orderkey{on} "
    "WHERE o.priority = 'urgent'"
)
CLINICS_SQL = (
    "SELECT COUNT(*), SUM(v.cost) FROM visits v JOIN staff s ON v.clinic = s.clinic "
    "WHERE s.role = 'nurse'"
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


def smooth_sensitivity(
    per_row: float, rows: tuple[int, int], mf: tuple[int, int], epsilon: float, delta: float
) -> float:
    """FLEX's smooth elastic sensitivity of a two-table join (per measurement's ε and δ).

    ``ES(d) = per_row·(R_a·mf_b + R_b·mf_a + R_a·R_b·(2d + 1))`` bounds the local sensitivity at
    distance ``d`` (``d`` units away the key frequencies grow by ``d·R``); the smooth bound is
    ``max_d e^{−βd}·ES(d)`` with ``β = ε/(2 ln(2/δ))`` (Nissim, Raskhodnikova & Smith 2007).
    """
    beta = epsilon / (2 * math.log(2 / delta))
    (ra, rb), (ma, mb) = rows, mf
    best, d = 0.0, 0
    while True:
        value = math.exp(-beta * d) * per_row * (ra * mb + rb * ma + ra * rb * (2 * d + 1))
        if value < best and d > 1 / beta:
            return best
        best, d = max(best, value), d + 1


def released(s: Session, sql: str, epsilon: float, runs: int) -> tuple[np.ndarray, list[int]]:
    """The released values of ``runs`` fresh answers (one row, every column), and each
    measurement's sensitivity in grid units times the grid.
    """
    plan = s.prepare(sql, epsilon).plan
    sens = [m.sensitivity_units * m.granularity for m in plan.measurements]
    values = np.array([[float(v) for v in s.query(sql, epsilon).rows[0]] for _ in range(runs)])
    return values, [float(x) for x in sens]


def exact(con: duckdb.DuckDBPyConnection, sql: str) -> np.ndarray:
    return np.array([float(v) for v in con.execute(sql).fetchone()])


def report(
    name: str, rows: list[tuple[str, str, str, np.ndarray, np.ndarray]], truth: np.ndarray
) -> None:
    print(f"\n{name}: exact plain join COUNT = {truth[0]:,.0f}, SUM = {truth[1]:,.0f}")
    print(
        f"{'mechanism':<22} {'loss':<18} {'sensitivity (count, sum)':<28} {'median−exact':>13} {'median |err| count':>19} {'sum':>12} {'÷ trunc.':>9}"
    )
    base = next((r[4] for r in rows if r[0] == "truncation"), None)
    for mech, loss, sens, bias, errors in rows:
        ratio = f"{errors[0] / base[0]:.1f}" if base is not None and errors.size else "-"
        if not errors.size:
            print(f"{mech:<22} {loss:<18} {sens:<28} {'':>13} {'refused':>19}")
            continue
        print(
            f"{mech:<22} {loss:<18} {sens:<28} {bias[0]:>13,.0f} {errors[0]:>19,.0f} {errors[1]:>12,.0f} {ratio:>9}"
        )


def run_orders(folder: Path, args: argparse.Namespace) -> None:
    write_orders(folder, args.customers)
    truncated = session(
        folder, ORDERS_TOML.format(o_key=", join_rows_per_key = 1", l_key=", join_rows_per_key = 7")
    )
    plain = session(folder, ORDERS_TOML.format(o_key="", l_key=""))
    con = duckdb.connect()
    for t in ("orders", "lineitem"):
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_csv_auto('{folder / t}.csv')")
    truth = exact(con, ORDERS_SQL.format(on=""))
    rows = []
    for mech, s, on in (
        ("caps after the join", plain, " AND l.custkey = o.custkey"),
        ("truncation", truncated, ""),
    ):
        sql = ORDERS_SQL.format(on=on)
        values, sens = released(s, sql, args.epsilon, args.runs)
        bias = np.median(values, axis=0) - truth
        loss = f"ε={args.epsilon:g}"
        errors = np.median(np.abs(values - truth), axis=0)
        rows.append((mech, loss, f"{sens[0]:,.0f}, {sens[1]:,.0f}", bias, errors))
    mf_o = con.execute(
        "SELECT MAX(n) FROM (SELECT COUNT(*) n FROM orders GROUP BY orderkey)"
    ).fetchone()[0]
    mf_l = con.execute(
        "SELECT MAX(n) FROM (SELECT COUNT(*) n FROM lineitem GROUP BY orderkey)"
    ).fetchone()[0]
    rows.append(elastic(truth, (280, 40), (mf_l, mf_o), (1, 50), args))
    report(f"orders ({args.customers:,} customers)", rows, truth)


def elastic(
    truth: np.ndarray,
    caps: tuple[int, int],
    mf: tuple[int, int],
    reach: tuple[float, float],
    args: argparse.Namespace,
) -> tuple[str, str, str, np.ndarray, np.ndarray]:
    """The simulated FLEX release: each of the two measurements at ε/2, δ/2 (composition)."""
    rng = np.random.Generator(np.random.PCG64(3))  # a marked simulation, never a release
    e, d = args.epsilon / 2, args.delta / 2
    smooth = [smooth_sensitivity(r, caps, mf, e, d) for r in reach]
    noise = np.stack([rng.laplace(0, 2 * s / e, args.runs) for s in smooth], axis=1)
    errors = np.median(np.abs(noise), axis=0)
    return (
        "elastic (simulated)",
        f"ε={args.epsilon:g}, δ={args.delta:g}",
        f"{smooth[0]:,.0f}, {smooth[1]:,.0f}",
        np.zeros(2),
        errors,
    )


def run_clinics(folder: Path, args: argparse.Namespace) -> None:
    write_clinics(folder)
    s = session(folder, CLINICS_TOML)
    con = duckdb.connect()
    for t in ("visits", "staff"):
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_csv_auto('{folder / t}.csv')")
    truth = exact(con, CLINICS_SQL)
    values, sens = released(s, CLINICS_SQL, args.epsilon, args.runs)
    rows = [
        ("caps after the join", "-", "no unit to join on", np.zeros(2), np.array([])),
        (
            "truncation",
            f"ε={args.epsilon:g}",
            f"{sens[0]:,.0f}, {sens[1]:,.0f}",
            np.median(values, axis=0) - truth,
            np.median(np.abs(values - truth), axis=0),
        ),
    ]
    mf_v = con.execute(
        "SELECT MAX(n) FROM (SELECT COUNT(*) n FROM visits GROUP BY clinic)"
    ).fetchone()[0]
    mf_s = con.execute(
        "SELECT MAX(n) FROM (SELECT COUNT(*) n FROM staff GROUP BY clinic)"
    ).fetchone()[0]
    rows.append(elastic(truth, (1, 1), (mf_v, mf_s), (1, 100), args))
    report("clinics (row units, Zipf clinics)", rows, truth)


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
