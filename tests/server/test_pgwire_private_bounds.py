"""A column with ``bounds = "private"`` asked over the wire: a client that describes the statement
first (psycopg's extended protocol, prepared statements) gets the answer's shape before the bounds
are chosen, and the query then chooses them, once, on the caller's budget.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import psycopg
import pytest
from tests.server.pgwire_helpers import Wire, running_wire

from dalenius.core.loss import PureDP


@pytest.fixture
def wire(demo_catalog: Path, tmp_path: Path) -> Iterator[Wire]:
    for part in demo_catalog.parent.iterdir():
        shutil.copy(part, tmp_path / part.name)
    text = (tmp_path / "census.toml").read_text()
    declared = 'income = { type = "int", bounds = [0, 500000],'
    assert declared in text
    (tmp_path / "census.toml").write_text(
        text.replace(declared, 'income = { type = "int", bounds = "private", bounds_epsilon = 0.1,')
    )
    with running_wire(tmp_path / "census.toml") as running:
        yield running


def test_a_described_statement_chooses_the_bounds_once_when_it_runs(wire: Wire) -> None:
    with psycopg.connect(**wire.dsn(), autocommit=True) as conn:
        conn.execute("SET dalenius.epsilon = 0.25")
        sql = "SELECT sex, AVG(income) FROM people WHERE age >= %s GROUP BY sex"
        rows = conn.execute(sql, (18,), prepare=True).fetchall()
        assert len(rows) == 2 and all(r[2] <= r[1] <= r[3] for r in rows)
        assert wire.remaining() == PureDP(Fraction(1) - Fraction(1, 10) - Fraction(1, 4))
        again = conn.execute(sql, (30,), prepare=True).fetchall()
        assert len(again) == 2
        assert wire.remaining() == PureDP(Fraction(1) - Fraction(1, 10) - Fraction(1, 2))
    sqls = [e.sql for e in wire.site.gateway.ledger.entries("alice", "census")]
    assert sqls.count("BOUNDS(income) FROM people") == 1


def test_public_keys_are_answered_over_the_wire_free(wire: Wire) -> None:
    with psycopg.connect(**wire.dsn(), autocommit=True) as conn:
        conn.execute("SET dalenius.epsilon = 0.25")
        rows = conn.execute(
            "SELECT sex FROM people WHERE age >= %s GROUP BY sex", (18,), prepare=True
        ).fetchall()
        assert rows == [("Female",), ("Male",)]
    assert wire.remaining() == PureDP(Fraction(1))
    answer = wire.site.client.post(
        "/v1/datasets/census/query",
        json={"sql": "SELECT sex FROM people GROUP BY sex", "epsilon": 0.1},
        headers=wire.site.as_(wire.site.analyst),
    )
    assert answer.status_code == 200, answer.text
    assert [r[0]["value"] for r in answer.json()["rows"]] == ["Female", "Male"]


def test_the_notice_says_the_bounds_were_chosen_first(wire: Wire) -> None:
    notices: list[str] = []
    with psycopg.connect(**wire.dsn(), autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        conn.execute("SET dalenius.epsilon = 0.25")
        conn.execute("SELECT SUM(income) FROM people").fetchall()
        conn.execute("SELECT AVG(income) FROM people").fetchall()
    chosen = [n for n in notices if "chosen privately first" in n]
    assert len(chosen) == 1 and "people.income" in chosen[0] and "ε=0.1 more" in chosen[0]
