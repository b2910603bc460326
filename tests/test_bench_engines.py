"""The engines benchmark runs from its documented command (at a tiny size, DuckDB only).

It asserts what the benchmark prints, never how fast anything was.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_benchmark(data: Path, rows: int, *args: str) -> subprocess.CompletedProcess[str]:
    """Run bench/engines.py on DuckDB, one repeat, at ``rows`` people under ``data``; it must pass."""
    command = [
        sys.executable,
        str(ROOT / "bench" / "engines.py"),
        *("--rows", str(rows), "--engines", "duckdb", "--repeats", "1", "--data", str(data)),
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return done


def test_the_benchmark_prints_every_query_its_parts_and_the_floors(tmp_path: Path) -> None:
    out = run_benchmark(tmp_path, 3000).stdout
    assert "duckdb — 3,000 people" in out
    for name in ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8"]:
        # name, Dalenius ms, raw ms, ratio, then the six parts: nine numbers.
        line = re.search(rf"^{name} +([-\d.]+ +){{8}}[-\d.]+$", out, re.MULTILINE)
        assert line, (name, out)
    floor = r"^floor Q3: .*: [\d.]+ ms = [\d.]+ x raw Q3; Dalenius Q3 = [\d.]+ x this floor$"
    assert re.search(floor, out, re.MULTILINE), out
    floor = r"^floor Q7: .*: [\d.]+ ms = [\d.]+ x raw Q7; Dalenius Q7 = [\d.]+ x this floor$"
    assert re.search(floor, out, re.MULTILINE), out


def test_the_benchmark_prints_each_querys_peak_memory_beside_raw(tmp_path: Path) -> None:
    done = run_benchmark(tmp_path, 2000, "--queries", "Q1", "Q7", "--memory")
    out = done.stdout
    number = r"[\d.]+"
    for name in ["Q1", "Q7"]:
        line = (
            rf"^memory {name}: raw peak \d+ MiB \(\+\d+ in the query\), Dalenius peak \d+ MiB "
            rf"\(\+\d+\); Dalenius / raw = {number} peak, ({number}|—) growth"
        )
        assert re.search(line, out, re.MULTILINE), (name, out)
    assert re.search(
        rf"^memory Q7: .*; its floor's peak \d+ MiB \(\+\d+\) = {number} x raw$", out, re.M
    )
    # Generation reported its progress on stderr; Q9-Q13 were not asked for, so no arrivals.
    assert "generated 2,000 / 2,000 people (100%)" in done.stderr
    assert not (tmp_path / "rows-2000" / "arrivals.parquet").exists()
