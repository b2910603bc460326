"""Private bounds (``bounds = "private"``): the bins, the exact distribution of the chosen bounds
and its privacy on neighbouring histograms, and the release on the one spending path — chosen by
the first query that needs them, charged once per data version, shown by explain.
"""

from __future__ import annotations

import decimal
import json
import math
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from tests.support.seeded import SeededRandom

import dalenius
from dalenius.core.catalog import Catalog, PrivateBounds, load_catalog
from dalenius.core.errors import (
    BoundsNotChosen,
    CatalogError,
    ConfigurationError,
    PrivacyRefusal,
    QueryError,
)
from dalenius.core.loss import PureDP
from dalenius.mechanisms.laplace import IntegerLaplace
from dalenius.releases.bounds import (
    BoundsRequest,
    bin_edges,
    bin_range,
    choose,
    plan_bounds,
    threshold,
)

CATALOG = """
[dataset]
name = "shop"

[tables.orders]
source = {{ csv = "{csv}" }}
privacy_unit = {{ column = "pid", max_rows = 2 }}

[tables.orders.columns]
pid = {{ type = "int", nullable = false }}
amount = {{ type = "float", bounds = "private", bounds_epsilon = 0.5 }}
items = {{ type = "int", bounds = "private" }}
age = {{ type = "int", bounds = [0, 100] }}
"""


def _write(folder: Path, rows: int = 4000, seed: int = 5) -> Path:
    rng = np.random.Generator(np.random.PCG64(seed))  # test data only, never noise
    frame = pd.DataFrame(
        {
            "pid": np.arange(rows) // 2,
            "amount": (rng.pareto(3, rows) * 200).round(2),
            "items": rng.integers(1, 60, rows),
            "age": rng.integers(18, 90, rows),
        }
    )
    frame.loc[::50, "amount"] = None
    frame.to_csv(folder / "orders.csv", index=False)
    (folder / "shop.toml").write_text(CATALOG.format(csv="orders.csv"))
    return folder / "shop.toml"


# -- the bins ---------------------------------------------------------------------------------


def _python_bin(edges: tuple[Fraction, ...], value: Fraction) -> int:
    below = [i for i, e in enumerate(edges) if e <= value]
    return below[-1] if below else 0


@pytest.mark.parametrize("column_type", ["int", "float"])
def test_each_bins_range_holds_exactly_its_values(column_type: str) -> None:
    edges = bin_edges(column_type)
    assert list(edges) == sorted(edges) and len(set(edges)) == len(edges)
    for i in range(1, len(edges) - 1):
        low, high = bin_range(edges, i, column_type)
        assert _python_bin(edges, low) == i
        assert _python_bin(edges, high if column_type == "int" else high - Fraction(1, 2**70)) == i
        assert _python_bin(edges, high + (1 if column_type == "int" else 0)) == i + 1


def test_the_engine_puts_every_value_in_the_bin_python_does(tmp_path: Path) -> None:
    powers = [2**k for k in range(0, 63, 7)] + [2**-20, 2**-21, 2**-5]
    values = [0.0, 1.0, -1.0, 3.0, -3.0, 0.5, -0.5]
    for p in powers:
        values += [p, -p, p * 0.999999, -p * 0.999999, p * 1.5]
    frame = pd.DataFrame({"pid": range(len(values)), "x": values})
    catalog = Catalog.from_dict(
        {
            "tables": {
                "t": {
                    "source": frame,
                    "privacy_unit": {"column": "pid", "max_rows": 1},
                    "columns": {"pid": "int", "x": {"type": "float", "bounds": "private"}},
                }
            }
        }
    )
    plan = plan_bounds(catalog, BoundsRequest("t", "x", Fraction(1)))
    session = dalenius.connect(catalog, ledger="memory:", budget=1)
    for table in plan.tables:
        session.executor.prepare(table)
    rows = []
    plan.prepare(session.executor.dialect, 1)(
        lambda sql, reads=(): rows.extend(session.executor.fetch(sql)) or rows
    )
    got = {int(b): int(c) for b, c in rows}
    want: dict[int, int] = {}
    for v in values:
        i = _python_bin(plan.edges, Fraction(v))
        want[i] = want.get(i, 0) + 1
    assert got == want


def test_the_statement_computes_the_bin_once_beside_its_filter(tmp_path: Path) -> None:
    """The bin is a binary search over every edge, written as nested CASE: the bounded statement
    computes it once per row (and filters by it once) instead of writing it wherever it is read
    (eleven copies made a statement of 114 KB that Spark took half a minute to plan)."""
    catalog = load_catalog(_write(tmp_path, rows=40))
    plan = plan_bounds(catalog, BoundsRequest("orders", "amount", Fraction(1)))
    session = dalenius.connect(catalog, ledger="memory:", budget=1)
    for table in plan.tables:
        session.executor.prepare(table)
    statements: list[str] = []
    plan.prepare(session.executor.dialect, 1)(
        lambda sql, reads=(): statements.append(sql) or session.executor.fetch(sql)
    )
    top = f">= {int(max(plan.edges))}"  # each copy of the search compares with each edge once
    assert [sql.count(top) for sql in statements] == [2]


def test_the_threshold_lets_an_empty_bin_through_at_most_one_time_in_a_thousand() -> None:
    for bins, scale in [(127, Fraction(20)), (167, Fraction(1)), (45, Fraction(3, 2))]:
        tau = threshold(bins, scale)
        p = _p(scale)
        assert bins * p**tau / (1 + p) <= Decimal(1) / 1000
        assert tau == 1 or bins * p ** (tau - 1) / (1 + p) > Decimal(1) / 1000


# -- the exact distribution and its privacy ---------------------------------------------------


def _p(scale: Fraction) -> Decimal:
    """The discrete Laplace parameter e^(−1/scale), to 50 digits."""
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        return (-(Decimal(scale.denominator) / Decimal(scale.numerator))).exp()


def _prod(values: list[Decimal]) -> Decimal:
    return math.prod(values, start=Decimal(1))


def _tail(c: int, tau: int, p: Decimal) -> Decimal:
    """P(c + Z >= tau) for discrete Laplace Z with parameter p."""
    t = tau - c
    if t >= 1:
        return p**t / (1 + p)
    return 1 - p ** (1 - t) / (1 + p)


def _pmf(counts: list[int], tau: int, p: Decimal) -> dict[tuple[int, int] | None, Decimal]:
    """The exact probability of every output of :func:`choose` on ``counts`` + noise."""
    up = [_tail(c, tau, p) for c in counts]
    down = [1 - u for u in up]
    m = len(counts)
    out: dict[tuple[int, int] | None, Decimal] = {None: _prod(down)}
    for i in range(m):
        for j in range(i, m):
            outside = _prod(down[:i]) * _prod(down[j + 1 :])
            out[(i, j)] = up[i] * (up[j] if j > i else 1) * outside
    return out


def test_the_pmf_sums_to_one() -> None:
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        pmf = _pmf([0, 4, 9, 1, 0], 3, _p(Fraction(1)))
        assert abs(sum(pmf.values()) - 1) < Decimal(10) ** -40


@pytest.mark.parametrize("rows", [1, 2])
def test_neighbouring_histograms_change_every_outputs_probability_by_at_most_e_epsilon(
    rows: int,
) -> None:
    """Every histogram on 4 bins with counts up to 6, and every neighbour one unit of up to
    ``rows`` rows makes (adding its rows to at most ``rows`` bins): the exact output
    probabilities differ by at most a factor e^ε, at the plan's scale R/ε and threshold.
    """
    epsilon = Fraction(1, 2)
    scale = Fraction(rows) / epsilon
    p = _p(scale)
    tau = threshold(4, scale)
    rng = np.random.Generator(np.random.PCG64(3))  # which histograms to try, not noise
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        e_eps = Decimal(epsilon.numerator / epsilon.denominator).exp()
        worst = Decimal(0)
        for _ in range(60):
            base = [int(v) for v in rng.integers(0, 7, 4)]
            added = list(base)
            for b in rng.integers(0, 4, rows):
                added[int(b)] += 1
            a, b = _pmf(base, tau, p), _pmf(added, tau, p)
            for out in a:
                worst = max(worst, a[out] / b[out], b[out] / a[out])
    assert worst <= e_eps * (1 + Decimal(10) ** -30)
    assert worst > e_eps.sqrt()  # the check can fail: the bound is nearly reached


@pytest.mark.statistical
def test_the_sampler_draws_the_exact_distribution() -> None:
    """χ² of 20,000 draws of the real mechanism and :func:`choose` against the exact pmf; the
    false-alarm rate is 10⁻⁴ (a seeded source: reproducible).
    """
    counts = [0, 3, 5, 2, 0]
    mechanism = IntegerLaplace(1, Fraction(1))
    tau = 4
    pmf = _pmf(counts, tau, _p(Fraction(1)))
    outcomes = list(pmf)
    rng = SeededRandom(11)
    observed = dict.fromkeys(outcomes, 0)
    for _ in range(20_000):
        noisy = [int(v) for v in mechanism.release(np.array(counts), rng=rng)]
        observed[choose(noisy, tau)] += 1
    expected = np.array([float(pmf[o]) * 20_000 for o in outcomes])
    seen = np.array([observed[o] for o in outcomes])
    keep = expected >= 5
    rest_e, rest_o = expected[~keep].sum(), seen[~keep].sum()
    e = np.append(expected[keep], rest_e)
    o = np.append(seen[keep], rest_o)
    assert stats.chisquare(o, e * o.sum() / e.sum()).pvalue > 1e-4


# -- the release on the spending path ---------------------------------------------------------


def test_the_catalog_validates_private_bounds(tmp_path: Path) -> None:
    path = _write(tmp_path)
    catalog = load_catalog(path)
    assert catalog.private_bounds == (("orders", "amount"), ("orders", "items"))
    amount = catalog.table("orders").column("amount")  # type: ignore[union-attr]
    assert amount is not None and amount.bounds is None
    assert amount.private_bounds == PrivateBounds(Fraction(1, 2))
    for bad, said in [
        ('amount = { type = "str", bounds = "private" }', "numeric"),
        ('amount = { type = "float", bounds = "private", bounds_epsilon = 0 }', "bounds_epsilon"),
        ('amount = { type = "float", bounds = [0, 9], bounds_epsilon = 0.1 }', "private"),
        ('amount = { type = "float", bounds = "secret" }', "private"),
    ]:
        text = CATALOG.format(csv="orders.csv").replace(
            'amount = { type = "float", bounds = "private", bounds_epsilon = 0.5 }', bad
        )
        (tmp_path / "bad.toml").write_text(text)
        with pytest.raises(CatalogError, match=said):
            load_catalog(tmp_path / "bad.toml")


def test_explain_refuses_free_until_a_query_chooses_them_then_shows_them(tmp_path: Path) -> None:
    session = dalenius.connect(_write(tmp_path), ledger="memory:", budget=3)
    sql = "SELECT SUM(amount) FROM orders"
    with pytest.raises(BoundsNotChosen, match=r"orders\.amount \(ε = 0\.5\)") as refused:
        session.explain(sql, epsilon=1)
    assert refused.value.columns == (("orders", "amount"),)
    assert "dalenius bounds --table orders --column amount" in str(refused.value)
    assert session.ledger.entries() == []
    assert session.remaining() == PureDP(Fraction(3))

    result = session.query(sql, epsilon=1)
    assert any("orders.amount were chosen privately first" in n for n in result.notes)
    entries = session.ledger.entries()
    assert [e.sql for e in entries] == ["BOUNDS(amount) FROM orders", sql]
    assert result.remaining == PureDP(Fraction(3) - Fraction(1, 2) - 1)
    explained = session.explain(sql, epsilon=1)
    low, high = session.release(entries[0].id).release.bounds
    assert explained.clips == (f"Clip(amount, {float(low):g}, {float(high):g})",)
    assert any("chosen privately" in n and entries[0].id in n for n in explained.notes)

    # A second query on the column, and a query on the other column: only the new bounds cost.
    session.query("SELECT AVG(amount) FROM orders", epsilon=1)
    assert len(session.ledger.entries()) == 3
    session.query("SELECT SUM(items) FROM orders", epsilon=Fraction(1, 4))
    sqls = [e.sql for e in session.ledger.entries()]
    assert sqls[3:] == ["BOUNDS(items) FROM orders", "SELECT SUM(items) FROM orders"]
    assert session.ledger.entries()[3].loss == PureDP(Fraction(1, 20))  # the default share


def test_the_clip_is_the_chosen_bounds_and_every_value_is_in_its_interval(tmp_path: Path) -> None:
    session = dalenius.connect(_write(tmp_path), ledger="memory:", budget=5)
    chosen = session.choose_bounds("orders", "amount")
    assert chosen.release.bounds is not None
    low, high = chosen.release.bounds
    assert low <= 50 and high >= 256  # the bulk of a Pareto(3)·200 lies in between
    plan = session.plan("SELECT AVG(amount) FROM orders", epsilon=1)
    bounds = {m.bounds for m in plan.measurements if m.bounds is not None}
    assert bounds == {(low, high)}
    result = session.query("SELECT AVG(amount) FROM orders", epsilon=1)
    row = result.to_pandas().iloc[0]
    assert row.iloc[1] <= row.iloc[0] <= row.iloc[2]
    assert low <= row.iloc[0] <= high


def test_a_new_data_version_needs_a_new_choice(tmp_path: Path) -> None:
    path = _write(tmp_path)
    session = dalenius.connect(path, ledger=str(tmp_path / "l.sqlite"), budget=5)
    first = session.choose_bounds("orders", "amount")
    assert session.choose_bounds("orders", "amount").cached
    session.close()
    _write(tmp_path, rows=3000, seed=6)
    again = dalenius.connect(path, ledger=str(tmp_path / "l.sqlite"))
    with pytest.raises(BoundsNotChosen):
        again.explain("SELECT SUM(amount) FROM orders", epsilon=1)
    second = again.choose_bounds("orders", "amount")
    assert not second.cached and second.entry_id != first.entry_id


def test_a_later_session_finds_the_choice_in_the_ledger(tmp_path: Path) -> None:
    path, ledger = _write(tmp_path), str(tmp_path / "l.sqlite")
    first = dalenius.connect(path, ledger=ledger, budget=5)
    first.query("SELECT SUM(amount) FROM orders", epsilon=1)
    first.close()
    later = dalenius.connect(path, ledger=ledger)
    explained = later.explain("SELECT SUM(amount) FROM orders", epsilon=1)
    assert any("chosen privately" in n for n in explained.notes)
    other = dalenius.connect(path, ledger=ledger, analyst="bob", budget=1)
    with pytest.raises(BoundsNotChosen):  # another analyst's choice is not theirs to see
        other.explain("SELECT SUM(amount) FROM orders", epsilon=1)


def test_bounds_that_came_out_empty_refuse_the_query_with_what_to_do(tmp_path: Path) -> None:
    catalog = load_catalog(_write(tmp_path))
    empty = catalog.with_private_bounds(
        {("orders", "amount"): (PrivateBounds(Fraction(1, 2), "empty", "e1"), None)}
    )
    session = dalenius.connect(empty, ledger="memory:", budget=1)
    with pytest.raises(PrivacyRefusal, match="came out empty") as refused:
        session.query("SELECT SUM(amount) FROM orders", epsilon=1)
    assert not isinstance(refused.value, BoundsNotChosen)
    assert "bounds_epsilon" in str(refused.value)
    plan = plan_bounds(catalog, BoundsRequest("orders", "amount", Fraction(1, 2)))
    assert plan.publish((0,) * len(plan.edges), 0.95).bounds is None


def test_refusals_name_the_column_and_spend_nothing(tmp_path: Path) -> None:
    session = dalenius.connect(_write(tmp_path), ledger="memory:", budget=1)
    with pytest.raises(ConfigurationError, match="does not declare"):
        session.choose_bounds("orders", "age")
    with pytest.raises(QueryError, match="not a numeric column"):
        session.choose_bounds("orders", "nope", epsilon=0.1)
    with pytest.raises(QueryError, match="no table"):
        session.choose_bounds("nope", "amount")
    assert session.remaining() == PureDP(Fraction(1))
    assert session.choose_bounds("orders", "age", epsilon=0.1).release.bounds is not None


def test_the_privacy_map_is_the_row_cap_over_epsilon(tmp_path: Path) -> None:
    catalog = load_catalog(_write(tmp_path))
    plan = plan_bounds(catalog, BoundsRequest("orders", "amount", Fraction(1, 2)))
    assert plan.mechanism.scale == Fraction(2) / Fraction(1, 2)
    assert plan.privacy_map() == PureDP(Fraction(1, 2))


def test_the_cli_chooses_and_prints_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dalenius.cli.main import main

    path, ledger = _write(tmp_path), str(tmp_path / "l.sqlite")
    args = ["--catalog", str(path), "--table", "orders", "--ledger", ledger]
    assert main(["bounds", *args, "--column", "amount", "--budget", "2"]) == 0
    out = capsys.readouterr().out
    assert "Bounds of orders.amount: [" in out and "Loss: ε=0.5" in out
    assert main(["bounds", *args, "--column", "amount", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cached"] is True and len(doc["bounds"]) == 2
    assert (
        main(
            [
                "explain",
                "--catalog",
                str(path),
                "--ledger",
                ledger,
                "--epsilon",
                "1",
                "SELECT SUM(amount) FROM orders",
            ]
        )
        == 0
    )
    assert "chosen privately" in capsys.readouterr().out
