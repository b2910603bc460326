"""``dalenius attack``: a thin shell over the attack lab, documented, refusing bad input early."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dalenius.attacks import lab
from dalenius.cli.main import main
from dalenius.core.errors import ConfigurationError

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_attack_json_reports_each_target(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "attack",
            "differencing",
            "--against",
            "raw",
            "--against",
            "naive",
            "--epsilon",
            "1",
            "--trials",
            "4",
            "--people",
            "40",
            "--json",
        ]
    )
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    first, second = doc["reports"]
    assert first["target"] == "raw" and first["success"]["rate"] == 1.0
    assert second["target"].startswith("naive") and second["bound"]["formula"] == "e^ε/(1+e^ε)"
    assert second["epsilon_spent"]["exact"] == "2/1"  # two answers at ε = 1, unaccounted


def test_attack_table_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "recon.png"
    code = main(
        [
            "attack",
            "reconstruction",
            "--against",
            "raw",
            "--people",
            "30",
            "--queries",
            "60",
            "--plot",
            str(png),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "reconstruction attack" in out and "plot written to" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_arguments_are_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["attack", "auxiliary", "--budget", "-1", "--against", "dalenius"]) == 2
    assert "budget" in capsys.readouterr().err
    with pytest.raises(ConfigurationError, match="no option asks"):
        lab.compare("differencing", asks=3)
    with pytest.raises(ConfigurationError, match="unknown attack"):
        lab.compare("telepathy")
    with pytest.raises(ConfigurationError, match="has no plot"):
        lab.compare("auxiliary", plot="x.png")


@pytest.mark.parametrize("name", sorted(lab.ATTACKS))
def test_every_attack_has_a_docs_page_linked_from_the_index(name: str) -> None:
    page = DOCS / "attacks" / f"{name}.md"
    assert page.exists(), f"docs/attacks/{name}.md is missing"
    assert f"({name}.md)" in (DOCS / "attacks" / "index.md").read_text()
    assert f"dalenius attack {name}" in page.read_text()
