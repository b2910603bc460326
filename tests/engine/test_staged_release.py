"""A subquery used as a value (``WHERE age > (SELECT AVG(age) FROM adult)``) is released first,
with its share of ε, and the outer query answered with its released value as a constant: one
ledger entry whose loss is the sum, refusals decided before any data is read."""

from __future__ import annotations

import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest
from tests.support.exact import exact_answer
from tests.support.refusals import refused_free

import dalenius
from dalenius.core.errors import ConfigurationError, QueryError
from dalenius.core.loss import PureDP
from dalenius.engine.session import Session
from dalenius.engine.staged_release import StagedRelease

STAGED = (
    "SELECT sex, COUNT(*) AS n FROM adult "
    "WHERE age > (SELECT AVG(age) FROM adult WHERE age > 30) GROUP BY sex"
)


@pytest.fixture
def session(adult_catalog_path: Path) -> Iterator[Session]:
    with dalenius.connect(adult_catalog_path, ledger="memory:", budget=10_000) as s:
        yield s


def _released_constant(notes: tuple[str, ...]) -> float:
    note = next(n for n in notes if n.startswith("The subquery (SELECT AVG(age)"))
    found = re.search(
        r"spending ε=[^:]+: (-?[0-9.e+-]+) \(95% interval \[([^,]+), ([^\]]+)\]", note
    )
    assert found is not None, note
    value, low, high = (float(g) for g in found.groups())
    assert low <= value <= high
    return value


def test_the_subquery_is_released_first_and_its_value_used_as_a_constant(session: Session) -> None:
    result = session.query(STAGED, epsilon=1000)
    constant = _released_constant(result.notes)
    # The subquery's exact average over ages above 30, released with a small error at ε ≈ 667.
    exact_average = exact_answer(session, "SELECT AVG(age) FROM adult WHERE age > 30").rows[0][0]
    assert abs(constant - exact_average) < 0.05
    # The outer answer is the outer query's, with the released constant written in.
    exact = exact_answer(
        session, f"SELECT sex, COUNT(*) AS n FROM adult WHERE age > {constant!r} GROUP BY sex"
    )
    assert [r[0] for r in result.rows] == [r[0] for r in exact.rows]
    for released, true in zip(result.rows, exact.rows, strict=True):
        assert abs(released[1] - true[1]) <= 5
    assert result.loss == PureDP(Fraction(1000))
    # The value used is shown wherever the answer is: printed, and in a notebook.
    assert "note: The subquery (SELECT AVG(age) FROM adult WHERE age > 30)" in str(result)
    assert "note: The subquery (SELECT AVG(age) FROM adult WHERE age &gt; 30)" in (
        result._repr_html_()
    )


def test_one_ledger_entry_charges_the_sum_and_a_repeat_is_free(session: Session) -> None:
    before = session.remaining()
    first = session.query(STAGED, epsilon=1)
    assert session.remaining() == PureDP(before.epsilon - 1)  # type: ignore[union-attr]
    again = session.query(STAGED, epsilon=1)
    assert again.cached and again.rows == first.rows and again.notes == first.notes
    assert session.remaining() == PureDP(before.epsilon - 1)  # type: ignore[union-attr]
    committed = [e for e in session.ledger.entries("analyst", "adult") if e.sql == STAGED]
    assert len(committed) == 1


def test_epsilon_is_split_by_measurements_and_the_map_recomputes_the_sum(session: Session) -> None:
    staged = session._staged(STAGED, Fraction(3, 2), None, None)
    assert isinstance(staged, StagedRelease)
    (stage,) = staged.stages
    # AVG is two measurements (sum and count), the outer COUNT one: ε 1 and 1/2, exactly.
    assert stage.release.loss == PureDP(Fraction(1))
    assert staged.outer.loss == PureDP(Fraction(1, 2))
    assert staged.loss == PureDP(Fraction(3, 2))
    assert staged.privacy_map() == staged.loss


def test_the_outer_plan_does_not_depend_on_the_released_value(session: Session) -> None:
    """The outer query's loss and sensitivities are the same whatever constant is written in:
    what the outer release costs is fixed before the subquery's value is known.
    """
    staged = session._staged(STAGED, 1, None, None)
    assert isinstance(staged, StagedRelease)
    plans = [staged.replan([c]).plan for c in ("-1e300", "0", "45.5", "1e300", "NULL")]
    for plan in plans:
        assert plan.loss == staged.outer.plan.loss
        assert [(m.name, m.sensitivity) for m in plan.measurements] == [
            (m.name, m.sensitivity) for m in staged.outer.plan.measurements
        ]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT COUNT(*) FROM adult a WHERE age > (SELECT AVG(age) FROM adult b WHERE b.sex = a.sex)",
            "the subquery is correlated with a.sex of the private table adult",
        ),
        (
            "SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(age), COUNT(*) FROM adult)",
            "must give one value; this one gives 2 columns",
        ),
        (
            "SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(age) FROM adult GROUP BY sex)",
            "must give one value; this one gives a row per group (GROUP BY)",
        ),
        (
            "SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(nope) FROM adult)",
            "cannot be released on its own: unknown column 'nope'",
        ),
    ],
)
def test_a_subquery_that_cannot_be_released_alone_is_refused_free(
    session: Session, sql: str, message: str
) -> None:
    refused = refused_free(session, sql, message)
    # Located in the analyst's own text, inside the subquery.
    assert refused.span is not None and refused.span.column > sql.index("(SELECT")


def test_an_error_target_is_refused_with_a_fix(session: Session) -> None:
    with pytest.raises(ConfigurationError, match="give epsilon instead of a target"):
        session.query(STAGED, target_error=10)


def test_a_subquery_over_public_tables_is_answered_exactly_and_free(session: Session) -> None:
    sql = (
        "SELECT COUNT(*) FROM adult JOIN edu_levels ON adult.education = edu_levels.education "
        "WHERE years > (SELECT MAX(years) - 3 FROM edu_levels)"
    )
    assert session._staged(sql, 1, None, None) == sql.replace(
        "(SELECT MAX(years) - 3 FROM edu_levels)", "(13)"
    )
    result = session.query(sql, epsilon=1)
    assert result.loss == PureDP(Fraction(1))  # the outer query's alone
    assert result.notes[0].startswith("Each subquery used as a value reads public tables alone")
    assert result.notes[0].endswith("WHERE years > (13)")
    assert "WHERE years > (13)" in str(session.explain(sql, epsilon=1))


def test_explain_shows_each_stage_and_the_whole_loss(session: Session) -> None:
    shown = session.explain(STAGED, epsilon=1)
    text = str(shown)
    assert "filter:   age > (subquery 1)" in text
    assert "1.m0 subquery 1: SUM(age - 48.5)" in text
    assert "Total cost: ε=1 " in text
    assert shown.exact_sql.startswith("-- subquery 1, released first:")
    assert '"adult__age" > (subquery 1)' in shown.exact_sql
    # The gateway's plan (its shape and loss check) is the outer query's.
    plan = session.plan(STAGED, 1, shape_only=True)
    assert [o.name for o in plan.query.outputs] == ["sex", "n"]


def test_a_private_value_in_a_query_over_public_tables_is_refused(session: Session) -> None:
    sql = "SELECT COUNT(*) FROM edu_levels WHERE years > (SELECT AVG(age) / 5 FROM adult)"
    with pytest.raises(QueryError, match="used as a value in a query over public tables"):
        session.query(sql, epsilon=1)


def test_a_value_in_select_or_having_is_post_processing_named_as_written(session: Session) -> None:
    sql = "SELECT COUNT(*) - (SELECT COUNT(*) FROM adult WHERE age > 60) FROM adult"
    result = session.query(sql, epsilon=100)
    assert result.columns == ("COUNT(*) - (SELECT COUNT(*) FROM adult WHERE age > 60)",)
    assert session.plan(sql, 100, shape_only=True).query.outputs[0].name == result.columns[0]
    assert abs(result.rows[0][0] - (32561 - 2342)) <= 10  # adult's rows, those over 60
    having = "SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING COUNT(*) > (SELECT COUNT(*) / 3 FROM adult)"
    assert [r[0] for r in session.query(having, epsilon=100).rows] == ["Male"]


def test_a_value_outside_select_where_and_having_is_refused_free(session: Session) -> None:
    sql = "SELECT COUNT(*) FROM adult ORDER BY 1 LIMIT 1 + (SELECT COUNT(*) FROM adult)"
    before = session.remaining()
    with pytest.raises(QueryError, match="answered in SELECT, WHERE and HAVING, not in LIMIT"):
        session.query(sql, epsilon=1)
    assert session.remaining() == before


def test_a_value_inside_an_aggregate_is_refused_before_any_data_is_read(session: Session) -> None:
    sql = "SELECT SUM(age - (SELECT AVG(age) FROM adult)) FROM adult"
    before = session.remaining()
    with pytest.raises(QueryError, match="inside an aggregate's argument") as refused:
        session.query(sql, epsilon=1)
    assert refused.value.clause == "SELECT"
    assert session.remaining() == before


def test_a_value_inside_parentheses_of_a_condition_is_answered(session: Session) -> None:
    sql = "SELECT COUNT(*) FROM adult WHERE (age - (SELECT AVG(age) FROM adult)) > 3"
    result = session.query(sql, epsilon=10)
    assert result.loss == PureDP(Fraction(10))


NESTED = [
    # In a subquery of FROM, in a WITH, and in an EXISTS on the person's own rows.
    "SELECT COUNT(*) AS n FROM (SELECT * FROM adult WHERE age > (SELECT AVG(age) FROM adult)) t",
    "WITH old AS (SELECT * FROM adult WHERE age > (SELECT AVG(age) FROM adult)) "
    "SELECT COUNT(*) AS n FROM old",
]


@pytest.mark.parametrize("sql", NESTED)
def test_a_subquery_used_as_a_value_inside_another_subquery_is_released_first(
    session: Session, sql: str
) -> None:
    result = session.query(sql, epsilon=1000)
    constant = _released_constant(result.notes)
    exact = exact_answer(session, sql.replace("(SELECT AVG(age) FROM adult)", f"{constant!r}"))
    assert abs(result.rows[0][0] - exact.rows[0][0]) <= 5
    assert result.loss == PureDP(Fraction(1000))


def test_a_correlated_subquery_inside_another_subquery_is_refused_free(session: Session) -> None:
    sql = (
        "SELECT COUNT(*) FROM (SELECT * FROM adult a WHERE age > "
        "(SELECT AVG(age) FROM adult b WHERE b.sex = a.sex)) t"
    )
    refused = refused_free(
        session, sql, "inside another subquery refers to rows outside it (a.sex)"
    )
    assert refused.span is not None and refused.span.column == sql.index("(SELECT AVG") + 1
