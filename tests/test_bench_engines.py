"""The engines benchmark runs from its documented command (at a tiny size, DuckDB only).

It asserts what the benchmark prints, never how fast anything was.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_benchmark_prints_every_query_its_parts_and_the_floors(tmp_path: Path) -> None:
    command = [
        sys.executable,
        str(ROOT / "bench" / "engines.py"),
        *("--rows", "3000", "--engines", "duckdb", "--repeats", "1", "--data", str(tmp_path)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "duckdb — 3,000 people" in out
    for name in ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8"]:
        # name, Dalenius ms, raw ms, ratio, then the six parts: nine numbers.
        line = re.search(rf"^{name} +([-\d.]+ +){{8}}[-\d.]+$", out, re.MULTILINE)
        assert line, (name, out)
    floor = r"^floor Q3: .*: [\d.]+ ms = [\d.]+ x raw Q3; Dalenius Q3 = [\d.]+ x this floor$"
    assert re.search(floor, out, re.MULTILINE), out
    floor = r"^floor Q7: .*: [\d.]+ ms = [\d.]+ x raw Q7; Dalenius Q7 = [\d.]+ x this floor$"
    assert re.search(floor, out, re.MULTILINE), out
