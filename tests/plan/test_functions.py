"""The registry of scalar functions (dalenius.plan.functions): every entry is complete, and each
consumer (binder, type checker, bounds, evaluation, SQL writer) reads it rather than a list of
its own."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from sqlglot import exp, parse_one

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import QueryError
from dalenius.plan.derive import FieldInfo, bounds_of, type_of
from dalenius.plan.evaluate import evaluate
from dalenius.plan.expr import Col, Func, Lit
from dalenius.plan.functions import DIALECTS, FUNCTIONS, POST_FUNCTIONS, FunctionSpec
from dalenius.sql.bind import to_query
from dalenius.sql.emit import Compiler
from dalenius.sql.expressions import FUNCS, KNOWN_NAMES

SPECS = list(FUNCTIONS.values())

FIELDS = {
    "x": FieldInfo("float", (Fraction(-3, 2), Fraction(7, 2)), None, True),
    "s": FieldInfo("str", None, None, True),
    "d": FieldInfo("date", None, None, True),
}

DATE_PARTS = {"YEAR", "MONTH", "DAY"}
TEXT = {"LOWER", "UPPER", "LENGTH", "TRIM", "SUBSTRING"}


def call(spec: FunctionSpec) -> Func:
    """A call of ``spec`` with as many arguments as it needs, of the type it takes."""
    arg = "d" if spec.name in DATE_PARTS else "s" if spec.name in TEXT else "x"
    args = (Col(arg),) * max(spec.min_args, 2 if spec.max_args > 1 else 1)
    if spec.name == "ROUND":
        args = (Col("x"), Lit(1))
    if spec.name == "POWER":
        args = (Col("x"), Lit(2))
    if spec.name == "SUBSTRING":
        args = (Col("s"), Lit(2), Lit(3))
    return Func(spec.name, args)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_entry_is_complete(spec: FunctionSpec) -> None:
    assert FUNCTIONS[spec.name] is spec and spec.name.isupper()
    assert 1 <= spec.min_args <= spec.max_args
    assert callable(spec.result) and callable(spec.bounds)
    assert spec.evaluate is not None or spec.name in DATE_PARTS
    assert isinstance(getattr(exp, spec.sqlglot), type)
    assert set(spec.spelling) == set(DIALECTS) == {"duckdb", "postgres", "spark"}
    assert all(spec.spelling[d] for d in DIALECTS)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_each_engine_writes_the_registered_spelling(spec: FunctionSpec, dialect: str) -> None:
    sql = Compiler(FIELDS, dialect).expression(call(spec)).sql(dialect=dialect)
    assert spec.spelling[dialect] in sql, sql


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_the_binder_reads_each_function_as_written(spec: FunctionSpec) -> None:
    args = ", ".join(["a"] * max(spec.min_args, 2 if spec.max_args > 1 else 1))
    node = parse_one(f"SELECT {spec.name}({args})").expressions[0]
    assert FUNCS[type(node)] == spec.name
    assert spec.name in KNOWN_NAMES


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_type_bounds_and_value_come_from_the_entry(spec: FunctionSpec) -> None:
    expr = call(spec)
    strict = type_of(expr, FIELDS, lambda what, fix: AssertionError(what))
    assert strict == type_of(expr, FIELDS) in ("int", "float", "str")
    bounds = bounds_of(expr, FIELDS)
    if strict == "str" or spec.name in DATE_PARTS | {"LENGTH", "LN"}:  # LN: x reaches 0
        assert bounds is None
    else:
        assert bounds is not None and bounds[0] <= bounds[1]
        # The value at either end of x's bounds lies within the derived bounds.
        for x in (-1.5, 3.5):
            value = evaluate(expr, {"x": x})
            if value is None:  # outside a post-only function's domain (SQRT(-1.5))
                continue
            assert bounds[0] <= Fraction(value) <= bounds[1]
    assert evaluate(Func(spec.name, (Lit(None),) * len(expr.args)), {}) is None


def test_post_processing_functions_are_the_entries_marked_post() -> None:
    assert tuple(s.name for s in SPECS if s.post) == POST_FUNCTIONS
    assert POST_FUNCTIONS == (
        "ROUND", "GREATEST", "LEAST", "ABS", "FLOOR", "CEIL", "COALESCE", "SQRT", "LN", "EXP",
        "POWER",
    )  # fmt: skip


def _interval(name: str, low: float, high: float, *args: object) -> object:
    fields = {"x": FieldInfo("float", (Fraction(low), Fraction(high)), None, True)}
    return bounds_of(Func(name, (Col("x"), *(Lit(a) for a in args))), fields)


@pytest.mark.parametrize(
    ("name", "low", "high", "args", "inside"),
    [
        ("ABS", -2, 3, (), (0, 3)),
        ("POWER", -2, 3, (2,), (0, 9)),
        ("POWER", -2, 3, (3,), (-8, 27)),
        ("SQRT", -2, 9, (), (0, 3)),
        ("EXP", -1, 2, (), (0.37, 7.38)),
        ("LN", 1, 100, (), (0, 4.6)),
        ("POWER", 0, 4, (0.5,), (0, 2)),
    ],
)
def test_an_interval_through_a_post_processing_function_holds_its_image(
    name: str, low: float, high: float, args: tuple[object, ...], inside: tuple[float, float]
) -> None:
    """Non-monotone functions (ABS, an even POWER) take the least value inside the interval; a
    value outside SQRT's domain is NULL, so only the part inside counts. Float ends are rounded
    outward."""
    bounds = _interval(name, low, high, *args)
    assert isinstance(bounds, tuple)
    assert bounds[0] <= Fraction(inside[0]) and Fraction(inside[1]) <= bounds[1]
    assert bounds[1] - bounds[0] <= Fraction(inside[1] - inside[0]) + Fraction(1, 10)
    for i in range(101):
        x = low + (high - low) * i / 100
        value = evaluate(Func(name, (Lit(x), *(Lit(a) for a in args))), {})
        assert value is None or bounds[0] <= Fraction(value) <= bounds[1], (x, value)


@pytest.mark.parametrize(
    ("name", "low", "high", "args"), [("LN", -1, 5, ()), ("POWER", -1, 1, (-1,))]
)
def test_an_unbounded_image_has_no_interval(
    name: str, low: float, high: float, args: tuple[object, ...]
) -> None:
    assert _interval(name, low, high, *args) is None


@pytest.mark.parametrize("name", ["SQRT", "LN", "EXP"])
def test_post_only_functions_are_refused_on_rows(name: str, adult_catalog_path: Path) -> None:
    catalog = load_catalog(adult_catalog_path)
    with pytest.raises(QueryError, match=f"{name} applies only to released aggregates"):
        to_query(f"SELECT SUM({name}(age)) FROM adult", catalog)
    assert to_query(f"SELECT {name}(AVG(age)) FROM adult", catalog).query.outputs


def test_a_strict_type_refusal_names_the_function() -> None:
    with pytest.raises(AssertionError, match="LOWER needs text"):
        type_of(Func("LOWER", (Col("x"),)), FIELDS, lambda what, fix: AssertionError(what))
    with pytest.raises(AssertionError, match="YEAR needs a date"):
        type_of(Func("YEAR", (Col("s"),)), FIELDS, lambda what, fix: AssertionError(what))
