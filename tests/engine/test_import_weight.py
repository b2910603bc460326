"""A process that answers queries does not load pandas or pyarrow: they are imported where a
DataFrame is asked for (frames, synthetic data, the attack lab, the anonymity tools), so the
session's import holds what planning and releasing need and nothing more (bench/peak.py measures
the peak memory this keeps down)."""

from __future__ import annotations

import subprocess
import sys


def test_the_session_and_the_duckdb_executor_load_no_dataframe_library() -> None:
    code = (
        "import sys\n"
        "import dalenius, dalenius.engine.session, dalenius.executors.duckdb, dalenius.cli.main\n"
        "print(sorted(m for m in ('pandas', 'pyarrow', 'scipy', 'matplotlib') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
