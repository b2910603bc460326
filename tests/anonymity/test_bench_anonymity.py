"""The documented benchmark command runs (its census part, at a small size)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_census_part_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "anonymity.py"), "--skip-adult", "--census", "3000"],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    assert "check + Mondrian" in out
