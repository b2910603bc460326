"""Hierarchy builders and their validation messages."""

from __future__ import annotations

import datetime

import pytest

from dalenius.anonymity import Hierarchy, HierarchyError
from dalenius.anonymity.config import hierarchy_from_dict


def test_builders() -> None:
    assert Hierarchy.mask([1, 2]).labeller("13053") == ("1305*", "130**", "*")
    assert Hierarchy.intervals([10], top=60).labeller(60) == (">=60", "*")
    assert Hierarchy.intervals([5, 10], bottom=20).labeller(18) == ("<20", "<20", "*")
    assert Hierarchy.dates(["month", "year", "decade"]).labeller(datetime.date(2018, 5, 11)) == (
        "2018-05",
        "2018",
        "2010s",
        "*",
    )
    h = Hierarchy.ordered(["a", "b", "c", "d", "e"], [2, 4])
    assert h.labeller("c") == ("c..d", "a..d", "*")
    assert h.labeller("e") == ("e", "e", "*")


def test_levels_spans_for_ncp() -> None:
    lv = Hierarchy.intervals([10]).apply("age", [20, 25, 29, 40])
    # [20, 30) covers 20..29 of the range 20..40
    assert lv.spans[1][0] == pytest.approx(9 / 20)
    assert lv.spans[2] == (1.0, 1.0, 1.0, 1.0)
    tree = Hierarchy.tree({"a": ["x"], "b": ["x"], "c": ["y"]}).apply("c", ["a", "b", "c"])
    assert tree.spans[1] == (0.5, 0.5, 0.0)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Hierarchy.intervals([5, 7]), "not a multiple of 5"),
        (lambda: Hierarchy.intervals([0]), "positive numbers"),
        (lambda: Hierarchy.mask([2, 1]), "increasing positive integers"),
        (lambda: Hierarchy.ordered(["a", "b"], [2, 3]), "not a multiple of 2"),
        (lambda: Hierarchy.dates(["year", "month"]), "fine to coarse"),
        (lambda: Hierarchy.tree({"a": ["x"], "b": ["x", "y"]}), "same number of levels"),
    ],
)
def test_malformed_hierarchies_are_refused(build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(HierarchyError, match=message):
        build()


def test_validation_names_column_value_and_file() -> None:
    h = hierarchy_from_dict("zip", {"type": "tree", "values": {"1": ["x"]}}, file="h.toml")
    with pytest.raises(HierarchyError) as err:
        h.apply("zip", ["1", "2"])
    assert "file h.toml" in str(err.value) and "column 'zip'" in str(err.value)
    assert "value '2'" in str(err.value)
    with pytest.raises(HierarchyError, match="not monotone"):
        Hierarchy.tree({"a": ["x", "p"], "b": ["x", "q"]}).apply("c", ["a", "b"])
    with pytest.raises(HierarchyError, match="needs numbers"):
        Hierarchy.intervals([10]).apply("c", ["a"])
    with pytest.raises(HierarchyError, match="unknown hierarchy type"):
        hierarchy_from_dict("c", {"type": "bins"})
    with pytest.raises(HierarchyError, match="missing values"):
        Hierarchy.tree({"a": ["x"]}).apply("c", ["a", None])
