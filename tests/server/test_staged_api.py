"""A subquery used as a value, asked over HTTP and the PostgreSQL wire: released first, its value
in a note (a NOTICE on the wire), the whole query charged once, refusals free."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import httpx
import psycopg
import pytest
from tests.conformance.datasets import write_shop
from tests.server.pgwire_helpers import Wire, running_wire

from dalenius.core.loss import PureDP

STAGED = (
    "SELECT sex, COUNT(*) AS n FROM people WHERE age > (SELECT AVG(age) FROM people) GROUP BY sex"
)


@pytest.fixture
def wire(demo_catalog: Path) -> Iterator[Wire]:
    with running_wire(demo_catalog) as running:
        yield running


def _ask(wire: Wire, sql: str, action: str = "query") -> httpx.Response:
    """The analyst's ``action`` (query or explain) of ``sql`` at ε = 0.3 over HTTP."""
    site = wire.site
    return site.client.post(
        f"/v1/datasets/census/{action}",
        json={"sql": sql, "epsilon": 0.3},
        headers=site.as_(site.analyst),
    )


def test_http_releases_the_subquery_first_and_charges_once(wire: Wire) -> None:
    answer = _ask(wire, STAGED)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert [r[0]["value"] for r in body["rows"]] == ["Female", "Male"]
    assert any(n.startswith("The subquery (SELECT AVG(age) FROM people)") for n in body["notes"])
    assert wire.remaining() == PureDP(Fraction(1) - Fraction(3, 10))
    shown = _ask(wire, STAGED, "explain")
    assert shown.status_code == 200, shown.text
    assert "age > (subquery 1)" in str(shown.json())
    refused = _ask(wire, STAGED.replace("AVG(age)", "AVG(age), COUNT(*)"))
    assert refused.status_code == 400 and "must give one value" in refused.text
    assert wire.remaining() == PureDP(Fraction(1) - Fraction(3, 10))


def test_the_wire_answers_it_with_a_notice(wire: Wire) -> None:
    notices: list[str] = []
    with psycopg.connect(**wire.dsn(), autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        conn.execute("SET dalenius.epsilon = 0.25")
        rows = conn.execute(STAGED).fetchall()
        assert [r[0] for r in rows] == ["Female", "Male"]
        described = conn.execute(STAGED.replace("> (", "> %s + ("), (1,), prepare=True).fetchall()
        assert len(described) == 2
    assert any("was released first" in n for n in notices)
    assert wire.remaining() == PureDP(Fraction(1, 2))


CORRELATED = (
    "SELECT COUNT(*) AS n FROM orders JOIN supplier ON suppkey = s_suppkey WHERE s_suppkey < 9 "
    "AND amount < (SELECT AVG(amount) FROM orders o2 WHERE o2.suppkey = s_suppkey)"
)


def test_a_correlated_subquery_over_the_wire_and_http(tmp_path: Path) -> None:
    """Released per supplier, then the count: a NOTICE on the wire, a note over HTTP, one charge
    per request; a statement described before it runs (extended protocol) has the count's
    shape."""
    write_shop(tmp_path)
    catalog = tmp_path / "census.toml"
    catalog.write_text((tmp_path / "shop.toml").read_text().replace('"shop"', '"census"'))
    notices: list[str] = []
    with running_wire(catalog) as wire:
        with psycopg.connect(**wire.dsn(), autocommit=True) as conn:
            conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
            conn.execute("SET dalenius.epsilon = 0.25")
            (row,) = conn.execute(CORRELATED).fetchall()
            assert isinstance(row[0], int)
            described = conn.execute(
                CORRELATED.replace("s_suppkey < 9", "s_suppkey < %s"), (9,), prepare=True
            ).fetchall()
            assert len(described) == 1
        assert any("per value of s_suppkey: 8 values" in n for n in notices)
        # The described statement, bound, is the first one again: answered from the ledger.
        assert wire.remaining() == PureDP(Fraction(3, 4))
        answer = _ask(wire, CORRELATED)
        assert answer.status_code == 200, answer.text
        assert any("per value of s_suppkey" in n for n in answer.json()["notes"])
        assert wire.remaining() == PureDP(Fraction(3, 4) - Fraction(3, 10))


def test_a_subquery_used_as_a_value_inside_exists_over_the_wire(wire: Wire) -> None:
    """Inside an EXISTS on the person's own visits: released first, a NOTICE, charged once."""
    notices: list[str] = []
    sql = (
        "SELECT sex, COUNT(*) FROM people p WHERE EXISTS (SELECT 1 FROM visits v WHERE "
        "v.person_id = p.person_id AND v.duration_minutes > "
        "(SELECT AVG(duration_minutes) FROM visits)) GROUP BY sex"
    )
    with psycopg.connect(**wire.dsn(), autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        conn.execute("SET dalenius.epsilon = 0.5")
        rows = conn.execute(sql).fetchall()
        assert [r[0] for r in rows] == ["Female", "Male"]
    assert any(
        "(SELECT AVG(duration_minutes) FROM visits) was released first" in n for n in notices
    )
    assert wire.remaining() == PureDP(Fraction(1, 2))
