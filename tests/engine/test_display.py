"""Data out: to_pandas / to_arrow / to_polars agree, the notebook display escapes, plot() draws."""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.core.errors import ConfigurationError, MissingExtraError
from dalenius.core.loss import PureDP
from dalenius.engine.result import Result

pl = pytest.importorskip("polars")


def grouped(keys: tuple[str, ...] = ("Female", "Male"), *, cached: bool = False) -> Result:
    return Result(
        columns=("sex", "n", "h"),
        rows=tuple((k, 100 + i, 40.5 - i) for i, k in enumerate(keys)),
        lows=tuple((None, 90 + i, 39.0 - i) for i, _ in enumerate(keys)),
        highs=tuple((None, 110 + i, 42.0 - i) for i, _ in enumerate(keys)),
        kinds=("key", "count", "avg"),
        loss=PureDP(Fraction(1, 4)),
        remaining=PureDP(Fraction(3, 4)),
        confidence=0.95,
        cached=cached,
        entry_id="e1",
    )


def test_frames_out_have_value_low_high_columns_and_agree() -> None:
    result = grouped()
    pandas = result.to_pandas()
    arrow = result.to_arrow()
    polars = result.to_polars()
    expected = ["sex", "n", "n_low", "n_high", "h", "h_low", "h_high"]
    assert list(pandas.columns) == arrow.column_names == polars.columns == expected
    assert polars.to_dicts() == arrow.to_pylist() == pandas.to_dict("records")
    assert polars["n_low"].to_list() == [90, 91]


def test_to_polars_names_the_extra_when_polars_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "polars", None)
    with pytest.raises(MissingExtraError, match=r"dalenius\[polars\]"):
        grouped().to_polars()


def test_html_display_has_intervals_loss_and_remaining() -> None:
    html = grouped()._repr_html_()
    assert html.count("<tr>") == 3
    assert "[90, 110]" in html and "[39.00, 42.00]" in html
    assert "<b>spent:</b> ε=0.25" in html and "<b>remaining:</b> ε=0.75" in html
    assert "95% interval for the noise" in html
    assert "nothing (identical query" in grouped(cached=True)._repr_html_()


def test_html_display_escapes_keys_from_the_data() -> None:
    html = grouped(('<script>alert("x")</script>', "a & b"))._repr_html_()
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert "a &amp; b" in html


def test_plot_draws_bars_with_error_bars(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    keys = ("Bachelors", "HS-grad", "Masters", "Some-college")
    ax = grouped(keys).plot("h")
    bars = ax.patches
    assert [round(b.get_width(), 2) for b in bars] == [40.5, 39.5, 38.5, 37.5]
    assert [t.get_text() for t in ax.get_yticklabels()] == list(keys)
    assert ax.get_title(loc="left") == "h"
    (whiskers,) = [c for c in ax.containers if getattr(c, "has_xerr", False)]
    segments = whiskers.lines[2][0].get_segments()
    assert [(s[0][0], s[1][0]) for s in segments] == [
        (39.0, 42.0),
        (38.0, 41.0),
        (37.0, 40.0),
        (36.0, 39.0),
    ]
    assert "95% interval" in ax.get_xlabel()
    ax.figure.savefig(tmp_path / "bars.png")
    assert (tmp_path / "bars.png").stat().st_size > 1000


def test_plot_refusals_name_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    single = Result(
        columns=("n",),
        rows=((5,),),
        lows=((1,),),
        highs=((9,),),
        kinds=("count",),
        loss=PureDP(Fraction(1)),
        remaining=PureDP(Fraction(0)),
        confidence=0.9,
        cached=False,
        entry_id=None,
    )
    with pytest.raises(ConfigurationError, match="no GROUP BY key column"):
        single.plot()
    with pytest.raises(ConfigurationError, match="pass one of 'n', 'h'"):
        grouped().plot("sex")
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(MissingExtraError, match=r"dalenius\[plot\]"):
        grouped().plot()
