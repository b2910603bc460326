"""Private frames: the SQL they write, their schema before data, and errors naming the call."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import pytest

import dalenius
from dalenius.core.errors import ConfigurationError, PrivacyRefusal, QueryError
from dalenius.engine.session import Session
from dalenius.frames import (
    col,
    count,
    count_distinct,
    lit,
    max,
    mean,
    median,
    min,
    quantile,
    std,
    sum,
    var,
    when,
)


@pytest.fixture
def session(adult_catalog_path: Path) -> Iterator[Session]:
    with dalenius.connect(adult_catalog_path, budget=100) as s:
        yield s


# -- the SQL written ----------------------------------------------------------------------------


def test_a_grouped_frame_is_one_select(session: Session) -> None:
    frame = (
        session.table("adult").filter(col("age") >= 40).group_by("sex").agg(count(), mean("age"))
    )
    assert frame.to_sql() == (
        "SELECT sex AS sex, COUNT(*) AS count, AVG(age) AS mean_age "
        "FROM adult WHERE age >= 40 GROUP BY 1"
    )


def test_every_aggregation_writes_its_sql_aggregate(session: Session) -> None:
    frame = session.table("adult").agg(
        count("occupation"),
        count_distinct("occupation"),
        sum("age"),
        var("age"),
        std("age", ddof=0).alias("sd"),
        quantile("age", 0.9).alias("p90"),
        median("age"),
        min("age"),
        max("age"),
        col("hours_per_week").mean(),
    )
    select = frame.to_sql().split(" FROM ")[0]
    assert select == (
        "SELECT COUNT(occupation) AS count_occupation, "
        "COUNT(DISTINCT occupation) AS count_distinct_occupation, SUM(age) AS sum_age, "
        "VAR_SAMP(age) AS var_age, STDDEV_POP(age) AS sd, QUANTILE(age, 0.9) AS p90, "
        "MEDIAN(age) AS median_age, MIN(age) AS min_age, MAX(age) AS max_age, "
        "AVG(hours_per_week) AS mean_hours_per_week"
    )


def test_derived_columns_are_inlined_where_used(session: Session) -> None:
    frame = (
        session.table("adult")
        .with_columns(decade=(col("age") // 10) * 10)
        .filter(col("decade") >= 30)
        .group_by("decade")
        .agg(n=count())
    )
    decade = "FLOOR(age * 1.0 / 10) * 10"
    assert frame.to_sql() == (
        f"SELECT {decade} AS decade, COUNT(*) AS n FROM adult WHERE {decade} >= 30 GROUP BY 1"
    )


def test_python_division_semantics_are_kept(session: Session) -> None:
    """``/`` is true division and ``//`` rounds down, unlike SQL's integer division."""
    frame = session.table("adult").agg(mean(col("age") / 7).alias("m"))
    assert "AVG(age * 1.0 / 7)" in frame.to_sql()
    frame = session.table("adult").agg(mean(col("hours_per_week") // 2).alias("m"))
    assert "AVG(FLOOR(hours_per_week / 2))" in frame.to_sql()


def test_literals_cannot_break_out_of_their_quotes(session: Session) -> None:
    frame = session.table("adult").filter(col("sex") == "x' OR 1=1 --").agg(count())
    assert "WHERE sex = 'x'' OR 1=1 --'" in frame.to_sql()
    odd = session.table("adult").agg(count().alias('a"b'))
    assert 'COUNT(*) AS "a""b"' in odd.to_sql()
    # the binder reads the text back as one literal: the condition matches no row's sex
    result = odd.collect(epsilon=1)
    assert result.columns == ('a"b',)


def test_identifiers_are_quoted_only_when_needed(session: Session) -> None:
    frame = session.table("adult").agg(count().alias("order"), count("age").alias("Big N"))
    assert frame.to_sql() == 'SELECT COUNT(*) AS "order", COUNT(age) AS "Big N" FROM adult'
    assert frame.collect(epsilon=1).columns == ("order", "Big N")


def test_parentheses_follow_precedence(session: Session) -> None:
    frame = session.table("adult").filter(
        (col("age") > 30) | (col("sex") == "Male"),
        ~(col("age") < 40),
        col("age") - (col("age") - 1) > 0,
        -(-col("age")) > 5 - lit(-3),  # noqa: B002 (a negation of a negation, on purpose)
    )
    where = frame.agg(count()).to_sql().split(" WHERE ")[1]
    assert where == (
        "(age > 30 OR sex = 'Male') AND NOT age < 40 AND age - (age - 1) > 0 AND -(-age) > 5 - (-3)"
    )
    # the binder reads the same conditions from the text as from the fully bracketed form
    bracketed = (
        "SELECT COUNT(*) AS count FROM adult WHERE ((age > 30) OR (sex = 'Male')) AND "
        "(NOT (age < 40)) AND ((age - (age - 1)) > 0) AND ((-(-age)) > (5 - (-3)))"
    )
    ours = session.prepare(frame.agg(count()).to_sql(), 1).plan.fingerprint()
    assert ours == session.prepare(bracketed, 1).plan.fingerprint()


def test_dates_are_compared_through_their_parts(session: Session) -> None:
    with pytest.raises(QueryError, match=r"lit\(datetime.date\(2020, 1, 1\)\): a date cannot"):
        lit(datetime.date(2020, 1, 1))
    with pytest.raises(QueryError, match=r"col\(\"age\"\).year\(\): YEAR needs a date"):
        session.table("adult").filter(col("age").year() > 3)


def test_a_backslash_in_text_is_refused() -> None:
    with pytest.raises(QueryError, match="backslash"):
        lit("a\\")


def test_joins_qualify_every_column(session: Session) -> None:
    frame = (
        session.table("adult")
        .join(session.table("edu_levels"), on="education")
        .group_by("level")
        .agg(count())
    )
    assert frame.to_sql() == (
        "SELECT edu_levels.level AS level, COUNT(*) AS count FROM adult "
        "JOIN edu_levels ON adult.education = edu_levels.education GROUP BY 1"
    )


def test_sort_and_limit_post_process(session: Session) -> None:
    frame = session.table("adult").group_by("race").agg(n=count()).sort("n", descending=True)
    assert frame.limit(2).to_sql().endswith("GROUP BY 1 ORDER BY n DESC LIMIT 2")


def test_case_when(session: Session) -> None:
    band = when(col("age") < 30).then("young").when(col("age") < 60).then("mid").otherwise("old")
    frame = session.table("adult").group_by(band=band).agg(count())
    assert frame.to_sql().startswith(
        "SELECT CASE WHEN age < 30 THEN 'young' WHEN age < 60 THEN 'mid' ELSE 'old' END AS band"
    )


# -- the schema, before any data is read ----------------------------------------------------------


def test_the_schema_is_the_results(session: Session) -> None:
    frame = (
        session.table("adult")
        .with_columns(decade=(col("age") // 10) * 10, young=col("age") < 30)
        .group_by("decade", "young", "sex")
        .agg(count(), mean("hours_per_week"), median("age"), sum("capital_gain"), max("age"))
    )
    schema = frame.schema
    assert list(schema) == frame.columns
    pandas_types = {"int": "int64", "float": "float64", "bool": "bool", "str": "str"}
    result = frame.to_pandas(epsilon=1)
    assert list(result.columns) == list(schema)
    got = {name: str(t) for name, t in result.dtypes.items()}
    assert got == {name: pandas_types[t] for name, t in schema.items()}


def test_expressions_keep_their_columns_name_as_in_polars(session: Session) -> None:
    adult = session.table("adult")
    clipped = adult.with_columns(col("age").clip(20, 60), (col("hours_per_week") * 2))
    assert clipped.columns == adult.columns  # replaced in place, as Polars does
    frame = clipped.agg(mean("age"), mean(col("age") + 1).alias("older"))
    assert frame.to_sql() == (
        "SELECT AVG(GREATEST(LEAST(age, 60), 20)) AS mean_age, "
        "AVG(GREATEST(LEAST(age, 60), 20) + 1) AS older FROM adult"
    )


def test_row_frames_know_their_columns(session: Session) -> None:
    adult = session.table("adult")
    frame = adult.select("age", "sex", k=col("age") * 2.5)
    assert frame.schema == {"age": "int", "sex": "str", "k": "float"}
    joined = adult.join(session.table("edu_levels"), on="education")
    assert joined.columns[-2:] == ["level", "years"]


# -- errors name the method call -----------------------------------------------------------------


def test_a_misspelt_column_is_named_with_the_closest(session: Session) -> None:
    with pytest.raises(QueryError) as info:
        session.table("adult").group_by("sex").agg(mean("incme"))
    assert str(info.value).startswith(
        ".agg(mean(\"incme\")): no column 'incme' in table 'adult'; did you mean 'income'?"
    )


def test_a_misspelt_table_is_named_with_the_closest(session: Session) -> None:
    with pytest.raises(QueryError, match=r"table\(\"adlt\"\): .*did you mean 'adult'"):
        session.table("adlt")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda a: a.filter(col("sex") > 3),
            r'\.filter\(\(col\("sex"\) > 3\)\): .* a str with an int',
        ),
        (lambda a: a.filter(col("age") + 1), r"\.filter.*is a int, not a condition"),
        (lambda a: a.agg(mean("sex")), r'\.agg\(mean\("sex"\)\): mean needs a numeric column'),
        (lambda a: a.agg(quantile("age", 1.5)), r"quantile must be between 0 and 1"),
        (lambda a: a.agg(count(), count()), r"two output columns are named 'count'"),
        (lambda a: a.agg(mean(when(col("age") > 3).then(1))), r"needs a name"),
        (lambda a: a.group_by("sex").agg(count().alias("sex")), r"named 'sex'"),
        (lambda a: a.with_columns(when(col("age") > 3).then(1)), r"needs a name"),
        (lambda a: a.filter(col("sex") & col("age")), r"combines a value of type int"),
        (lambda a: a.join(a, on="age"), r"already in the frame"),
        (lambda a: a.agg(count()).sort("cnt"), r"no output column 'cnt'; did you mean 'count'"),
        (lambda a: a.agg(count()).limit(-1), r"\.limit\(-1\)"),
        (lambda a: a.collect(), r"releases aggregates, not rows"),
    ],
)
def test_refusals_name_the_call(session: Session, build, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        build(session.table("adult"))


def test_truth_value_of_an_expression_is_refused() -> None:
    with pytest.raises(TypeError, match=r"& \|"):
        bool(col("age") > 3)


def test_binder_refusals_name_the_method(session: Session) -> None:
    frame = session.table("adult").group_by("occupation").agg(count())
    with pytest.raises(PrivacyRefusal) as info:
        frame.collect(epsilon=1)
    error = info.value
    assert error.clause == '.group_by("occupation")'
    assert "needs a delta" in error.what and error.fix and "delta" in error.fix
    assert "SELECT" not in str(error)  # names the method call, not generated SQL
    assert session.remaining() == dalenius.PureDP(100)


def test_a_refused_join_names_the_join(session: Session) -> None:
    frame = (
        session.table("edu_levels")
        .join(session.table("adult"), on="education", how="left")
        .agg(count())
    )
    with pytest.raises(QueryError) as info:
        frame.explain(epsilon=1)
    assert info.value.clause == '.join(session.table("adult"), on="education", how="left")'
    assert "LEFT JOIN must keep the private table on the left" in info.value.what


def test_collect_needs_a_loss(session: Session) -> None:
    with pytest.raises(ConfigurationError, match=r"\.collect\(\) has no privacy loss"):
        session.table("adult").agg(count()).collect()


# -- the loss: per call, per aggregation, as a target -----------------------------------------


def test_explain_is_free_and_collect_spends_epsilon(session: Session) -> None:
    frame = session.table("adult").group_by("sex").agg(count())
    text = str(frame.explain(epsilon=0.25))
    assert "0.25" in text
    assert session.remaining() == dalenius.PureDP(100)
    result = frame.collect(epsilon=0.25)
    assert float(result.loss.epsilon) == 0.25
    assert float(session.remaining().epsilon) == 99.75
    assert result.to_polars().columns == result.to_pandas().columns.tolist()
    assert result.to_arrow().column_names == list(frame.schema)


def test_per_aggregation_targets_are_met(session: Session) -> None:
    frame = session.table("adult").agg(count().target_error(50), sum("age").target_error(5000))
    result = frame.collect()
    low, high = result.interval(0, "count")
    assert (high - low) / 2 <= 50
    low, high = result.interval(0, "sum_age")
    assert (high - low) / 2 <= 5000
    same = session.query(frame.to_sql(), target_error={"count": 50, "sum_age": 5000})
    assert same.cached and same.entry_id == result.entry_id


def test_a_call_target_covers_every_aggregate(session: Session) -> None:
    result = session.table("adult").group_by("sex").agg(count()).collect(target_error=30)
    assert result.accuracy is not None


def test_targets_and_epsilon_together_are_refused(session: Session) -> None:
    frame = session.table("adult").agg(count().target_error(50))
    with pytest.raises(ConfigurationError, match="error targets and the call gives epsilon"):
        frame.collect(epsilon=1)
    with pytest.raises(ConfigurationError, match="two targets for 'count'"):
        frame.collect(target_error={"count": 10})


def test_a_target_on_a_mean_is_the_planners_refusal_at_the_agg(session: Session) -> None:
    with pytest.raises(PrivacyRefusal) as info:
        session.table("adult").agg(mean("age").target_error(1)).collect()
    assert info.value.clause is not None and info.value.clause.startswith(".agg(")


def test_the_same_question_as_sql_is_free(session: Session) -> None:
    frame = session.table("adult").filter(col("age") >= 40).agg(n=count())
    first = frame.collect(epsilon=0.5)
    again = session.query("SELECT COUNT(*) AS n FROM adult WHERE age >= 40", epsilon=0.5)
    assert again.cached and again.entry_id == first.entry_id and again.rows == first.rows
    assert float(session.remaining().epsilon) == 99.5


def test_exports() -> None:
    assert dalenius.col is col
    assert isinstance(dalenius.PrivateFrame, type) and isinstance(dalenius.AggregateFrame, type)
