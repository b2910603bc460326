"""The plan cache: repeated queries are not planned again, and caching never changes an answer.

What may not be cached is checked too: a join with a public table reads that table, and the
hash key of contribution bounding is fresh for every query.
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.exact import exact_answer

import dalenius.engine.session as session_module
from dalenius.core.catalog import load_catalog
from dalenius.core.errors import QueryError
from dalenius.engine import plans
from dalenius.engine.plans import PlanCache, SaltedTemplate, learn
from dalenius.engine.session import Session, connect
from dalenius.sql.emit import exact_queries

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def adult(shared_data: Path) -> Session:
    return connect(FIXTURES / "adult.toml", budget=100)


@pytest.fixture
def pums(shared_data: Path) -> Session:
    return connect(FIXTURES / "pums.toml", budget=100)


def counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Count calls of ``session_module.<name>``."""
    calls: list[int] = []
    original = getattr(session_module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(session_module, name, counted)
    return calls


def test_lru_keeps_the_most_recent_entries() -> None:
    cache = PlanCache(size=2)
    catalog = load_catalog(FIXTURES / "adult.toml")
    built: list[str] = []

    def build(key: str) -> str:
        built.append(key)
        return key.upper()

    for key in ["a", "b", "a", "c", "a", "b"]:
        assert cache.get(catalog, key, lambda k=key: build(k)) == key.upper()
    # "b" was evicted by "c" (the least recently used then), so it is built twice.
    assert built == ["a", "b", "c", "b"]
    assert len(cache) == 2
    with pytest.raises(ValueError, match="at least one"):
        PlanCache(size=0)


def test_another_catalog_object_never_sees_the_plans_of_the_first() -> None:
    cache = PlanCache()
    first, second = load_catalog(FIXTURES / "adult.toml"), load_catalog(FIXTURES / "adult.toml")
    assert cache.get(first, "k", lambda: 1) == 1
    assert cache.get(second, "k", lambda: 2) == 2
    assert cache.get(first, "k", lambda: 3) == 1


def test_a_repeated_query_is_validated_and_planned_once(
    adult: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans.PLANS.clear()
    parsed, planned = counting(monkeypatch, "to_query"), counting(monkeypatch, "to_dp")
    sql = "SELECT sex, COUNT(*), AVG(age) FROM adult GROUP BY sex"
    first = adult.prepare(sql, 1)
    second = adult.prepare(sql, 1)
    assert (len(parsed), len(planned)) == (1, 1)
    assert second.plan is first.plan and second.exact == first.exact
    adult.prepare(sql, 0.5)  # another ε: another plan, same validated query
    assert (len(parsed), len(planned)) == (1, 2)
    assert adult.prepare(sql, 0.5).plan.loss == adult.prepare(sql, "0.5").plan.loss


def test_refusals_are_validated_and_raised_every_time(
    adult: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans.PLANS.clear()
    parsed = counting(monkeypatch, "to_query")
    for _ in range(2):
        with pytest.raises(QueryError, match="fnlwgt"):
            adult.prepare("SELECT SUM(fnlwgt) FROM adult", 1)
    assert len(parsed) == 2  # nothing was cached for the refused query


def test_a_join_with_a_public_table_reads_it_for_every_query(
    adult: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans.PLANS.clear()
    reads: list[str] = []
    original = Session._multiplicity

    def measured(self: Session, table: str, column: str) -> int:
        reads.append(table)
        return original(self, table, column)

    monkeypatch.setattr(Session, "_multiplicity", measured)
    sql = (
        "SELECT l.level, COUNT(*) FROM adult a JOIN edu_levels l "
        "ON a.education = l.education GROUP BY l.level"
    )
    adult.prepare(sql, 1)
    adult.prepare(sql, 1)
    assert reads == ["edu_levels", "edu_levels"]


def test_a_bounded_query_gets_a_fresh_hash_key_every_time(pums: Session) -> None:
    plans.PLANS.clear()
    sql = "SELECT sex, COUNT(*) FROM pums GROUP BY sex"
    texts = [pums.prepare(sql, 1).exact.main for _ in range(3)]
    keys = [re.findall(r"MD5\(CONCAT\('(\d+)\|'", text) for text in texts]
    assert all(k for k in keys)
    assert len({k[0] for k in keys}) == 3
    # Everything but the key is the same SQL.
    assert len({re.sub(r"MD5\(CONCAT\('\d+\|'", "MD5(CONCAT('", t) for t in texts}) == 1


def template_of(plan: Any, dialect: str, first: int, second: int) -> SaltedTemplate | None:
    """The template the cache learns from ``plan`` written with key ``first``, then ``second``."""
    candidate = learn(None, exact_queries(plan, dialect, salt=first), first)
    learned = learn(candidate, exact_queries(plan, dialect, salt=second), second)
    return learned if isinstance(learned, SaltedTemplate) else None


@pytest.mark.parametrize("dialect", ["duckdb", "postgres", "spark"])
def test_a_salted_template_writes_exactly_the_sql_of_each_key(pums: Session, dialect: str) -> None:
    sql = "SELECT sex, COUNT(*), AVG(income), MEDIAN(age) FROM pums GROUP BY sex"
    plan = pums.prepare(sql, 1).plan
    template = template_of(plan, dialect, 2**40 + 3, 12345)
    assert template is not None
    for salt in (0, 1, 99, 2**31, 2**40 + 3, 12345, 2**62 - 2):
        assert template.with_salt(salt) == exact_queries(plan, dialect, salt=salt)
    with pytest.raises(ValueError, match="hash key"):
        template.with_salt(plans.SALT_LIMIT)


LITERALS = (123456789, 7)
"""Literals of the query the property test writes: keys equal to them, or next to them, are
where a template read off the SQL could go wrong."""


@pytest.fixture(scope="module")
def literal_plan(shared_data: Path) -> Any:
    pums = connect(FIXTURES / "pums.toml", budget=100)
    sql = (
        "SELECT sex, COUNT(*), AVG(income) FROM pums "
        f"WHERE income <> {LITERALS[0]} AND age <> {LITERALS[1]} GROUP BY sex"
    )
    return pums.prepare(sql, 1).plan


def near_literals() -> st.SearchStrategy[int]:
    """Keys that collide with a literal of the query or the stand-in, or any key at all."""
    close = [v + d for v in (*LITERALS, plans._SENTINEL) for d in (-1, 0, 1)]
    return st.one_of(st.sampled_from(close), st.integers(0, plans.SALT_LIMIT - 1))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(first=near_literals(), second=near_literals(), salt=near_literals())
def test_a_proved_template_equals_the_sql_written_directly(
    literal_plan: Any, first: int, second: int, salt: int
) -> None:
    """Property: whatever the two keys it is learned from (colliding with the query's literals,
    the stand-in or each other), a template the cache accepts writes exactly the SQL of every key.
    """
    template = template_of(literal_plan, "duckdb", first, second)
    if template is not None:
        assert template.with_salt(salt) == exact_queries(literal_plan, "duckdb", salt=salt)
    # Two distinct long keys apart from the literals and the stand-in always give a template.
    collisions = {v + d for v in (*LITERALS, plans._SENTINEL) for d in (-1, 0, 1)}
    if first != second and min(first, second) >= 2**40 and not {first, second} & collisions:
        assert template is not None


def test_a_key_equal_to_a_literal_of_the_query_never_leaks_into_the_template(
    pums: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql = "SELECT sex, COUNT(*) FROM pums WHERE income <> 4242424242 GROUP BY sex"
    plan = pums.prepare(sql, 1).plan
    plans.PLANS.clear()

    def direct(salt: int) -> Any:
        return exact_queries(plan, pums.executor.dialect, salt=salt)

    # The first query's key is the literal: what is read off its SQL is wrong, and the second
    # query shows it; the second's candidate is right, and the third proves it.
    for salt in (4242424242, 999_999_999_991, 999_999_999_993):
        assert pums.prepare(sql, 1, salt=salt).exact == direct(salt)
    written = counting(monkeypatch, "exact_queries")
    for salt in (4242424242, 4242424241, 5):
        assert pums.prepare(sql, 1, salt=salt).exact == direct(salt)
    assert written == []  # from the proved template


def test_a_bounded_query_is_written_once_per_query_and_not_at_all_once_proved(
    pums: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans.PLANS.clear()
    written = counting(monkeypatch, "exact_queries")
    sql = "SELECT sex, COUNT(*), AVG(income) FROM pums GROUP BY sex"
    counts = []
    assert pums.plan(sql, 1).loss == pums.prepare(sql, 1).plan.loss
    assert written == []  # the plan alone: no SQL written
    for _ in range(4):
        pums.prepare(sql, 1).exact  # noqa: B018 (written when read)
        counts.append(len(written))
    assert counts == [1, 2, 2, 2]


def test_no_template_when_the_query_itself_holds_the_stand_in(
    pums: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans.PLANS.clear()
    sentinel = plans._SENTINEL
    sql = f"SELECT COUNT(*) FROM pums WHERE income <> {sentinel}"
    written = counting(monkeypatch, "exact_queries")
    for i in range(3):
        # ... the query is still answered, its SQL written afresh every time.
        assert str(sentinel) in pums.prepare(sql, 1).exact.main
        assert len(written) == i + 1
    key = ("plan", sql, Fraction(1), None, pums.executor.dialect, "salted")
    assert not isinstance(plans.PLANS.peek(pums.catalog, key), SaltedTemplate)


def test_cached_plans_give_the_same_answers(adult: Session) -> None:
    sql = "SELECT education, COUNT(*), AVG(hours_per_week) FROM adult GROUP BY education"
    plans.PLANS.clear()
    fresh = exact_answer(adult, sql)
    cached = exact_answer(adult, sql)
    assert fresh == cached
