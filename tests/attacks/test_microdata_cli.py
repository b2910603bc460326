"""``dalenius attack linking`` and ``dalenius attack homogeneity`` from the shell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dalenius.cli.main import main


def test_linking_prints_the_uniqueness_and_the_rates(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "attack",
            "linking",
            "--people",
            "1500",
            "--seed",
            "3",
            "--against",
            "raw",
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "unique on (zip, date_of_birth, sex)" in out and "the course: 87%" in out
    assert "raw (names dropped)" in out and "voters in the released file" in out


def test_linking_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "linking.png"
    argv = ["attack", "linking", "--people", "1500", "--seed", "3", "--against", "k-anonymous"]
    code = main([*argv, "--k", "3", "--plot", str(png), "--ks", "1,3", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    report = doc["reports"][0]
    assert report["bound"]["value"] == pytest.approx(1 / 3)
    assert report["measures"]["expected_rate"] <= 1 / 3
    assert [p["measures"]["smallest_class"] >= 1 for p in doc["plot"]["points"]] == [True, True]
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_homogeneity_on_the_course_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["attack", "homogeneity", "--data", "course", "--against", "k-anonymous"])
    out = capsys.readouterr().out
    assert code == 0
    assert "Cancer (certain)" in out and "Flu (certain)" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["attack", "linking", "--plot", "x.pdf"], "--plot writes a PNG"),
        (["attack", "linking", "--ks", "0,2", "--plot", "x.png"], "--ks must list"),
        (["attack", "homogeneity", "--negatives", "-1"], "--negatives must be"),
        (["attack", "homogeneity", "--data", "course", "--against", "dalenius"], "twelve"),
    ],
)
def test_bad_arguments_are_refused_before_any_data(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_syntactic_bound_is_labelled_by_its_model_not_as_dp(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """k-anonymity's 1/k and ℓ-diversity's "values left" are properties of one released file:
    the table heads the column "bound" and each cell names its model, never "DP bound"."""
    argv = ["attack", "linking", "--people", "1500", "--seed", "3", "--no-progress"]
    assert main([*argv, "--against", "raw", "--against", "k-anonymous", "--k", "5"]) == 0
    out = capsys.readouterr().out
    assert "DP bound ┃" not in out and "DP bound:" not in out
    assert "(k-anonymity 1/k)" in out and "≤ 20.0%" in out
    assert "k-anonymity bound: 1/k = 1/5" in out and "not a DP bound" in out
    assert main(["attack", "homogeneity", "--data", "course"]) == 0
    out = capsys.readouterr().out
    assert "DP bound ┃" not in out and "DP bound:" not in out
    assert "≤ 0.0% (ℓ-diversity" in out
    assert "ℓ-diversity: ≥ 2 values left — a property of the released file, not a DP bound" in out
