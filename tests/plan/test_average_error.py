"""explain states an average's error bar before any data is read, as a function of the group's
size n; every released average's interval is within it."""

from __future__ import annotations

import re
from pathlib import Path

import dalenius

SQL = "SELECT education, COUNT(*) AS n, AVG(age) AS a FROM adult GROUP BY education"


def test_the_average_error_bar_is_stated_and_bounds_the_released_intervals(
    adult_catalog_path: Path,
) -> None:
    session = dalenius.connect(str(adult_catalog_path), budget=10, ledger="memory:")
    doc = session.explain(SQL, epsilon=1).to_dict()
    formula = next(o["computed_as"] for o in doc["outputs"] if o["name"] == "a")
    found = re.search(r"±\(([\d.]+) \+ ([\d.]+)·(\d+)\)/\(n − (\d+)\)", formula)
    assert found, formula
    hs, reach, hc = float(found.group(1)), float(found.group(2)), int(found.group(3))
    assert "at n = 1,000" in formula
    result = session.query(SQL, epsilon=1)
    checked = 0
    for (_, n, a), (_, _, low), (_, _, high) in zip(
        result.rows, result.lows, result.highs, strict=True
    ):
        if n - hc < 1:
            continue
        bound = (hs + reach * hc) / (n - hc)
        assert max(a - low, high - a) <= bound * (1 + 1e-9), (n, a, low, high, bound)
        checked += 1
    assert checked >= 10
