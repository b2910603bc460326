"""Cap suggestions (``dalenius catalog suggest``): noisy histograms of what each unit contributes,
their exact privacy on neighbours, the cap read off them, and the release on the one spending path.
"""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest

import dalenius
from dalenius.core.errors import ConfigurationError, QueryError
from dalenius.core.loss import PureDP
from dalenius.releases.contributions import (
    ContributionsRequest,
    bin_of,
    edges,
    plan_contributions,
    suggest,
)

CATALOG = """
[dataset]
name = "visits"

[tables.visits]
source = {{ csv = "{csv}" }}
privacy_unit = {{ column = "pid", max_rows = 2, max_groups = 1 }}

[tables.visits.columns]
pid = {{ type = "int", nullable = false }}
day = {{ type = "str", keys = ["mon", "tue", "wed", "thu", "fri"] }}

[tables.days]
source = {{ csv = "{csv}" }}
privacy_unit = "row"

[tables.days.columns]
day = {{ type = "str" }}
"""


def _write(folder: Path) -> Path:
    """900 units with 1 row, 60 with 3 rows on 3 days, 40 with 10 rows on 5 days."""
    rows = [(u, "mon") for u in range(900)]
    days = ["mon", "tue", "wed", "thu", "fri"]
    rows += [(900 + u, days[i]) for u in range(60) for i in range(3)]
    rows += [(960 + u, days[i % 5]) for u in range(40) for i in range(10)]
    pd.DataFrame(rows, columns=["pid", "day"]).to_csv(folder / "visits.csv", index=False)
    (folder / "visits.toml").write_text(CATALOG.format(csv="visits.csv"))
    return folder / "visits.toml"


def test_each_count_has_one_bin() -> None:
    tops = edges()
    assert [bin_of(n, tops) for n in (0, 1, 16, 17, 32, 33, 2**32, 2**40)] == [
        0,
        1,
        16,
        17,
        17,
        18,
        len(tops) - 1,
        len(tops) - 1,
    ]


def test_the_cap_covers_the_share_asked_and_ignores_bins_under_the_threshold() -> None:
    tops = list(range(6))
    counts = [0, 900, 3, 60, 2, 40]
    assert suggest("rows", counts, tops, Fraction(95, 100), 5).cap == 3
    assert suggest("rows", counts, tops, Fraction(99, 100), 5).cap == 5
    assert suggest("rows", counts, tops, Fraction(1, 2), 5).cap == 1
    assert suggest("rows", [1, 2, 3, 0, 0, 0], tops, Fraction(95, 100), 5).cap is None


def test_neighbouring_datasets_change_every_histograms_probability_by_at_most_e_epsilon() -> None:
    """Adding a unit adds 1 to one bin of each of k histograms. With discrete Laplace noise of
    scale k/ε on every bin, the exact log-ratio of the probability of any output is
    Σ (|o − c′| − |o − c|)/scale over the changed bins: enumerated over outputs, it never passes ε.
    """
    k, epsilon = 2, Fraction(1, 2)
    scale = Fraction(k) / epsilon
    base = [[3, 0, 1], [0, 2, 2]]
    for bins in itertools.product(range(3), repeat=k):
        added = [list(h) for h in base]
        for h, b in enumerate(bins):
            added[h][b] += 1
        worst = Fraction(0)
        for outputs in itertools.product(range(-2, 7), repeat=k):  # the output of the changed bins
            log_ratio = (
                sum(
                    Fraction(abs(o - added[h][b]) - abs(o - base[h][b]), 1)
                    for h, (o, b) in enumerate(zip(outputs, bins, strict=True))
                )
                / scale
            )
            worst = max(worst, abs(log_ratio))
        assert worst == epsilon  # reached, never passed


def test_the_caps_are_suggested_from_the_histograms(tmp_path: Path) -> None:
    session = dalenius.connect(_write(tmp_path), ledger="memory:", budget=100)
    # ε = 60 (scale 1/30): the noise is 0 except with probability below 10⁻¹², so the histograms
    # are the exact ones and the suggestion is checked exactly.
    result = session.suggest_caps("visits", epsilon=60, groups=["day"])
    rows, days = result.release.suggestions
    assert rows.cap == 3 and math.isclose(rows.beyond, 0.04)
    assert days.cap == 3 and math.isclose(days.beyond, 0.04)
    assert rows.counts[bin_of(1, edges())] == 900 and rows.counts[bin_of(10, edges())] == 40
    assert result.release.catalog_line() == (
        'privacy_unit = { column = "pid", max_rows = 3, max_groups = 3 }'
    )
    assert result.loss == PureDP(Fraction(60))
    looser = session.suggest_caps("visits", epsilon=60, groups=["day"], coverage=0.99)
    assert looser.cached and looser.release.suggestions[0].cap == 10  # free, same histograms
    assert "max_rows = 3" in str(result) and "Loss: ε=60" in str(result)


def test_the_privacy_map_counts_every_histogram(tmp_path: Path) -> None:
    catalog = dalenius.load_catalog(_write(tmp_path))
    plan = plan_contributions(catalog, ContributionsRequest("visits", ("day",), Fraction(1)))
    assert plan.mechanism.scale == 2
    assert plan.privacy_map() == PureDP(Fraction(1))


def test_refusals_name_the_problem_and_spend_nothing(tmp_path: Path) -> None:
    session = dalenius.connect(_write(tmp_path), ledger="memory:", budget=1)
    with pytest.raises(QueryError, match="one row"):
        session.suggest_caps("days", epsilon=0.1)
    with pytest.raises(QueryError, match="no column"):
        session.suggest_caps("visits", epsilon=0.1, groups=["nope"])
    with pytest.raises(QueryError, match="is the privacy unit"):
        session.suggest_caps("visits", epsilon=0.1, groups=["pid"])
    with pytest.raises(ConfigurationError, match="coverage"):
        session.suggest_caps("visits", epsilon=0.1, coverage=1)
    assert session.remaining() == PureDP(Fraction(1))


def test_the_cli_prints_the_catalog_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dalenius.cli.main import main

    path, ledger = _write(tmp_path), str(tmp_path / "l.sqlite")
    base = ["catalog", "suggest", str(path), "--table", "visits", "--ledger", ledger]
    assert main([*base, "--group", "day", "--epsilon", "60", "--budget", "100"]) == 0
    assert "max_rows = 3, max_groups = 3" in capsys.readouterr().out
    assert main([*base, "--group", "day", "--epsilon", "60", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cached"] is True and doc["suggestions"][0]["cap"] == 3
    assert main([*base]) != 0
    assert "--epsilon" in capsys.readouterr().err
