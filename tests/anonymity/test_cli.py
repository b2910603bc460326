"""``dalenius anonymize`` and ``dalenius anonymity check`` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dalenius.cli.main import main

CONFIG = """
[data]
path = "people.csv"

[attributes]
identifiers = ["name"]
quasi_identifiers = ["age", "zip"]
sensitive = ["disease"]

[privacy]
k = 2
l = 2
suppression_limit = 0.2

[hierarchies.age]
type = "intervals"
widths = [10, 20]

[hierarchies.zip]
type = "mask"
masked = [1, 2]
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    pd.DataFrame(
        {
            "name": [f"p{i}" for i in range(10)],
            "age": [21, 23, 29, 35, 37, 38, 44, 47, 51, 88],
            "zip": [
                "13053",
                "13068",
                "13068",
                "13053",
                "14853",
                "14853",
                "14850",
                "14850",
                "13053",
                "99999",
            ],
            "disease": [
                "flu",
                "heart",
                "flu",
                "cancer",
                "flu",
                "heart",
                "flu",
                "cancer",
                "cancer",
                "flu",
            ],
        }
    ).to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "config.toml").write_text(CONFIG)
    return tmp_path


def test_anonymize_writes_a_release_without_identifiers(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = workdir / "release.parquet"
    assert main(["anonymize", str(workdir / "config.toml"), "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    release = pd.read_parquet(out)
    assert "name" not in release.columns
    assert report["released"]["k"] >= 2
    assert report["released"]["sensitive"][0]["distinct_l"] >= 2
    assert len(release) == report["rows_out"]


def test_the_lattice_bar_shows_on_a_terminal_only(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    assert main(["anonymize", str(workdir / "config.toml")]) == 0
    plain, err = capsys.readouterr()
    assert err == "" and "\x1b" not in plain
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("TERM", "xterm")  # rich draws no live bar on a dumb terminal
    assert main(["anonymize", str(workdir / "config.toml")]) == 0
    out, err = capsys.readouterr()

    def untimed(text: str) -> list[str]:
        return [line for line in text.splitlines() if "seconds" not in line]

    assert untimed(out) == untimed(plain)  # the same report; the bar went to stderr
    assert "searching the lattice" in err and "nodes settled" in err


def test_check_prints_k_and_risk(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["anonymity", "check", "--data", str(workdir / "people.csv"), "--qi", "age,zip", "--json"]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["check"]["k"] == 1
    assert out["risk"]["sample_uniques"] == 1.0


def test_check_shows_a_bar_on_a_terminal_only(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    argv = ["anonymity", "check", "--data", str(workdir / "people.csv"), "--qi", "age,zip"]
    assert main(argv) == 0
    plain, err = capsys.readouterr()
    assert err == "" and "\x1b" not in plain
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("TERM", "xterm")
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out == plain and "checking" in err and "table people.csv" in err


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("k = 2", "k = 11"), "at least 11 records, but the table has only 10"),
        (
            ("suppression_limit = 0.2", "suppression_limit = 1.5"),
            "suppression_limit must be a share in [0, 1]",
        ),
        (('sensitive = ["disease"]', 'sensitive = ["age"]'), "both quasi-identifier and sensitive"),
        (
            ('quasi_identifiers = ["age", "zip"]', 'quasi_identifiers = ["age", "zip", "zipcode"]'),
            "unknown quasi-identifier column 'zipcode'",
        ),
        (
            ("masked = [1, 2]", 'masked = [1, 2]\n[hierarchies.nope]\ntype = "identity"'),
            "not a quasi-identifier",
        ),
        (("l = 2", "l = 4"), "cannot be satisfied within the suppression limit"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(
    workdir: Path, capsys: pytest.CaptureFixture[str], change: tuple[str, str], message: str
) -> None:
    (workdir / "config.toml").write_text(CONFIG.replace(*change))
    out = workdir / "release.csv"
    assert main(["anonymize", str(workdir / "config.toml"), "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_hierarchy_that_misses_a_value_names_file_column_and_value(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = CONFIG.replace(
        'type = "mask"\nmasked = [1, 2]',
        'type = "tree"\nvalues = { "13053" = ["130**"], "13068" = ["130**"] }',
    )
    (workdir / "config.toml").write_text(config)
    assert main(["anonymize", str(workdir / "config.toml")]) == 2
    err = capsys.readouterr().err
    assert "config.toml" in err and "column 'zip'" in err and "value '14850'" in err


def test_unknown_output_format_is_refused_before_reading(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["anonymize", str(workdir / "config.toml"), "--out", str(workdir / "r.xlsx")]) == 2
    assert ".parquet or .csv" in capsys.readouterr().err
