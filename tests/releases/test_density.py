"""Density releases end to end: neighbours, charging, refusals, records, and band coverage.

Data are generated with seeded numpy generators (data only); the noise comes from the OS
generator. Statistical tests state their false-alarm rate.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import dalenius
from dalenius.core.catalog import load_catalog
from dalenius.core.errors import BudgetExceededError, InvalidLossError, QueryError
from dalenius.core.loss import ZCDP, ApproxDP
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger.memory import MemoryLedger
from dalenius.releases.density import DensityRequest, plan_density

CATALOG = """
[dataset]
name = "clinic"

[tables.visits]
source = { csv = "visits.csv" }
privacy_unit = { column = "pid", max_rows = 3, max_groups = 1 }

[tables.visits.columns]
pid = { type = "int" }
age = { type = "int", bounds = [0, 99] }
weight = { type = "float", bounds = [30, 150] }
ward = { type = "str", keys = ["a", "b"] }

[tables.people]
source = { csv = "people.csv" }
privacy_unit = "row"

[tables.people.columns]
age = { type = "int", bounds = [0, 99] }
weight = { type = "float", bounds = [30, 150] }
"""


def write(tmp: Path, visits: pd.DataFrame, people: pd.DataFrame) -> Path:
    visits.to_csv(tmp / "visits.csv", index=False)
    people.to_csv(tmp / "people.csv", index=False)
    path = tmp / "clinic.toml"
    path.write_text(CATALOG, encoding="utf-8")
    return path


def data(seed: int = 5, persons: int = 400) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)  # data only
    rows = rng.integers(1, 6, size=persons)  # some persons exceed the cap of 3
    pid = np.repeat(np.arange(persons), rows)
    visits = pd.DataFrame(
        {
            "pid": pid,
            "age": rng.integers(0, 100, size=pid.size),
            "weight": rng.normal(75, 15, size=pid.size).round(2),
            "ward": rng.choice(["a", "b"], size=pid.size),
        }
    )
    people = pd.DataFrame(
        {"age": rng.integers(18, 90, size=3000), "weight": rng.normal(75, 12, size=3000)}
    )
    return visits, people


def plan_for(catalog_path: Path, request: DensityRequest):  # type: ignore[no-untyped-def]
    catalog = load_catalog(catalog_path)
    return plan_density(catalog, request, epsilon=Fraction(1), delta=Fraction(1, 10**6))


def exact_counts(catalog_path: Path, plan, salt: int = 3) -> tuple[int, np.ndarray]:  # type: ignore[no-untyped-def]
    """The plan's exact statements run on the data of ``catalog_path`` (same salt: same choice)."""
    sql = plan.counts.sql("duckdb", salt)
    with DuckDBExecutor(load_catalog(catalog_path)) as engine:
        for table in plan.counts.tables:
            engine.prepare(table)
        total = engine.fetch(sql.main)[0][0]
        counts = np.zeros(plan.counts.bins, dtype=np.int64)
        for row in engine.fetch(sql.histograms[0][1]):
            counts[int(row[-2])] += int(row[-1])
    return int(total), counts


@pytest.mark.parametrize("columns", [("age",), ("age", "weight")])
def test_removing_one_person_moves_the_exact_bin_counts_by_at_most_the_row_cap(
    tmp_path: Path, columns: tuple[str, ...]
) -> None:
    visits, people = data()
    request = DensityRequest("visits", columns, bandwidth=4.0, where="ward = 'a'")
    path = write(tmp_path, visits, people)
    plan = plan_for(path, request)
    base = exact_counts(path, plan)
    for pid in (0, 1, 7, 399):  # persons with 1 to 5 raw rows
        (tmp_path / "n").mkdir(exist_ok=True)
        neighbour = exact_counts(write(tmp_path / "n", visits[visits.pid != pid], people), plan)
        assert 0 <= base[0] - neighbour[0] <= 3
        assert int(np.abs(base[1] - neighbour[1]).sum()) <= 3


def test_a_release_is_charged_once_and_an_identical_one_is_free(tmp_path: Path) -> None:
    visits, people = data()
    session = dalenius.connect(
        write(tmp_path, visits, people), budget=ApproxDP(Fraction(2), Fraction(1, 10**5))
    )
    first = session.density("people", "age", bandwidth=3.0, epsilon=0.5, delta=1e-6)
    assert first.loss == ApproxDP(Fraction(1, 2), Fraction(1, 10**6))
    assert session.remaining() == ApproxDP(Fraction(3, 2), Fraction(9, 10**6))
    again = session.density("people", "age", bandwidth=3.0, epsilon=0.5, delta=1e-6)
    assert again.cached and np.array_equal(again.release.density, first.release.density)
    assert session.remaining() == ApproxDP(Fraction(3, 2), Fraction(9, 10**6))
    r = first.release
    assert np.all((r.low <= r.density) & (r.density <= r.high))
    assert np.all((r.band_low <= r.density) & (r.density <= r.band_high))
    assert np.all(r.band_high - r.band_low >= r.high - r.low - 1e-15)


def test_a_zcdp_dataset_pays_in_rho(tmp_path: Path) -> None:
    visits, people = data()
    session = dalenius.connect(write(tmp_path, visits, people), budget=ZCDP(Fraction(1)))
    result = session.density("visits", ["age", "weight"], bandwidth=5.0, rho=Fraction(1, 4))
    assert result.loss == ZCDP(Fraction(1, 4))
    assert result.release.density.shape == (40, 40)
    assert session.remaining() == ZCDP(Fraction(3, 4))


def test_refusals_name_the_problem_and_spend_nothing(tmp_path: Path) -> None:
    visits, people = data()
    ledger = MemoryLedger()
    session = dalenius.connect(
        write(tmp_path, visits, people),
        budget=ApproxDP(Fraction(1), Fraction(1, 10**5)),
        ledger=ledger,
    )
    before = session.remaining()
    with pytest.raises(QueryError, match="ward"):
        session.density("visits", "ward", bandwidth=1.0, epsilon=0.1, delta=1e-6)
    with pytest.raises(QueryError, match="nurse"):
        session.density("visits", "age", bandwidth=1.0, epsilon=0.1, delta=1e-6, where="nurse = 1")
    with pytest.raises(InvalidLossError, match="delta"):
        session.density("visits", "age", bandwidth=1.0, epsilon=0.1)
    with pytest.raises(QueryError, match="bandwidth"):
        session.density("visits", "age", bandwidth=-1.0, epsilon=0.1, delta=1e-6)
    with pytest.raises(BudgetExceededError):
        session.density("visits", "age", bandwidth=1.0, epsilon=3, delta=1e-6)
    assert session.remaining() == before
    assert not ledger.entries()
    assert [a.outcome for a in ledger.audit()].count("refused") >= 4


def exact_kde(values: np.ndarray, grid: np.ndarray, h: float) -> np.ndarray:
    diff = grid[:, None] - values[None, :]
    return np.exp(-diff * diff / (2 * h * h)).sum(axis=1) / (
        values.size * math.sqrt(2 * math.pi) * h
    )


@pytest.mark.statistical
@pytest.mark.parametrize(("column", "h"), [("age", 3.0), ("weight", 4.0)])
def test_the_bands_cover_the_exact_kernel_density(tmp_path: Path, column: str, h: float) -> None:
    """Over 150 releases the simultaneous band misses the exact curve (unbinned, from the raw
    data) in at most 5% of releases, the pointwise band at most 5% of points (binomial tests,
    false-alarm rate 1e-4 each)."""
    visits, people = data()
    path = write(tmp_path, visits, people)
    request = DensityRequest("people", (column,), bandwidth=h, points=60)
    plan = plan_density(
        load_catalog(path), request, epsilon=Fraction(1, 2), delta=Fraction(1, 10**6)
    )
    total, counts = exact_counts(path, plan)
    rows = [(i, int(c)) for i, c in enumerate(counts) if c]
    truth = exact_kde(
        np.clip(people[column].to_numpy(), 30 if column == "weight" else 0, 150),
        plan.axis_grids[0],
        h,
    )
    band_misses = point_misses = 0
    releases = 150
    for _ in range(releases):
        r = plan.finish(total, rows, 0.95)
        band_misses += int(((truth < r.band_low) | (truth > r.band_high)).any())
        point_misses += int(((truth < r.low) | (truth > r.high)).sum())
    assert stats.binomtest(band_misses, releases, 0.05, alternative="greater").pvalue > 1e-4
    assert stats.binomtest(point_misses, releases * 60, 0.05, alternative="greater").pvalue > 1e-4


def test_the_cli_releases_a_curve_with_csv_and_png(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from dalenius.cli.main import main

    visits, people = data()
    path = write(tmp_path, visits, people)
    args = ["density", "--catalog", str(path), "--table", "people", "--column", "age"]
    args += ["--bandwidth", "3", "--epsilon", "0.5", "--delta", "1e-6", "--budget", "1"]
    args += ["--budget-delta", "1e-5", "--ledger", str(tmp_path / "l.sqlite")]
    args += ["--csv", str(tmp_path / "c.csv"), "--png", str(tmp_path / "c.png"), "--json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["density"]) == 200 and doc["loss"]["epsilon"] == 0.5
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert len(pd.read_csv(tmp_path / "c.csv")) == 200
    refused = ["density", "--catalog", str(path), "--table", "people", "--column", "age"]
    refused += ["--bandwidth", "3", "--epsilon", "0.5", "--ledger", str(tmp_path / "l.sqlite")]
    assert main(refused) == 2
    assert "delta" in capsys.readouterr().err
