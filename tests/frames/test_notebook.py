"""The documentation's frame notebook runs, start to end, on the current code (as the site's build
runs it), and the frame examples of docs/frames.md run on the demo census."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from tests.conftest import REPO

NOTEBOOK = REPO / "docs" / "notebooks" / "adult-frames.ipynb"
DOCS = REPO / "docs" / "frames.md"


@pytest.mark.slow
def test_the_adult_frames_notebook_runs(shared_data: Path) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook, timeout=300, resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 3  # the histogram, the income by level, the clipping sweep


@pytest.mark.slow
def test_the_frames_page_examples_run(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "dalenius.cli.main", "demo", "--people", "2000"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        env={**os.environ, "COLUMNS": "80"},
    )
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    assert len(blocks) >= 5
    for block in blocks:
        run = subprocess.run(
            [sys.executable, "-c", block], check=False, cwd=tmp_path, capture_output=True, text=True
        )
        assert run.returncode == 0, f"{block}\n{run.stderr}"
