"""Private frames are typed for an analyst's type checker: mypy (strict) reads what each call
returns, and flags a misuse before anything runs."""

from __future__ import annotations

from pathlib import Path

from mypy import api

USER_CODE = """
import dalenius
from dalenius.frames import col, count, mean

session = dalenius.connect("census.toml", budget=1.0)
people = session.table("people")
frame = people.filter(col("age") >= 40).group_by("sex").agg(count(), mean("income"))
reveal_type(people)
reveal_type(col("age") == 3)
reveal_type(mean("income").target_error(5))
reveal_type(frame.schema)
reveal_type(frame.collect(epsilon=0.1))
reveal_type(frame.to_pandas(epsilon=0.1))
reveal_type(frame.explain(epsilon=0.1))
frame.collect(epsilon=0.1).no_such_attribute
people.group_by("sex").agg("income")
"""


def test_mypy_reads_the_frames_types(tmp_path: Path) -> None:
    script = tmp_path / "analysis.py"
    script.write_text(USER_CODE)
    out, _, _ = api.run(["--strict", "--no-error-summary", str(script)])
    lines = [line.split(": ", 1)[1] for line in out.splitlines() if ": " in line]
    assert lines[:7] == [
        'note: Revealed type is "dalenius.frames.frame.PrivateFrame"',
        'note: Revealed type is "dalenius.frames.expr.Expr"',
        'note: Revealed type is "dalenius.frames.agg.Agg"',
        'note: Revealed type is "dict[str, str]"',
        'note: Revealed type is "dalenius.engine.result.Result"',
        'note: Revealed type is "pandas.core.frame.DataFrame"',
        'note: Revealed type is "dalenius.plan.explain.Explanation"',
    ]
    errors = [line for line in lines[7:] if line.startswith("error")]
    assert len(errors) == 2
    assert "no_such_attribute" in errors[0]
    assert 'incompatible type "str"; expected "Agg"' in errors[1]
