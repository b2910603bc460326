"""A query over public tables alone, over HTTP and the PostgreSQL wire: exact, free, with the
intervals of its aggregates equal to their values, and its allow-list refusals as refusals.
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

REGIONS = "region,name,people\nn,North,10\ns,South,20\ne,East,5\n"
QUERY = "SELECT COUNT(*) AS n, SUM(people) AS total, MIN(name) AS first FROM regions"


@pytest.fixture
def wire(demo_catalog: Path, tmp_path: Path) -> Iterator[Wire]:
    for part in demo_catalog.parent.iterdir():
        shutil.copy(part, tmp_path / part.name)
    (tmp_path / "regions.csv").write_text(REGIONS)
    with (tmp_path / "census.toml").open("a") as catalog:
        catalog.write(
            '\n[tables.regions]\nsource = { csv = "regions.csv" }\npublic = true\n\n'
            '[tables.regions.columns]\nregion = "str"\nname = "str"\npeople = "int"\n'
        )
    with running_wire(tmp_path / "census.toml") as running:
        yield running


def test_http_answers_it_exactly_free(wire: Wire) -> None:
    site = wire.site
    answer = site.client.post(
        "/v1/datasets/census/query", json={"sql": QUERY}, headers=site.as_(site.analyst)
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["kinds"] == ["count", "exact", "key"]
    assert [[c["value"] for c in r] for r in body["rows"]] == [[3, 35, "East"]]
    assert body["rows"][0][1] == {"value": 35, "low": 35, "high": 35}
    assert body["spent"] == {"epsilon": 0.0, "epsilon_exact": "0/1"}
    assert wire.remaining() == PureDP(Fraction(1))
    refused = site.client.post(
        "/v1/datasets/census/query",
        json={"sql": "SELECT * FROM regions, read_csv('people.csv')"},
        headers=site.as_(site.analyst),
    )
    assert refused.status_code == 400 and "READ_CSV" in refused.text


def test_the_wire_answers_it_exactly_free(wire: Wire) -> None:
    with psycopg.connect(**wire.dsn(), autocommit=True) as conn:
        rows = conn.execute(QUERY).fetchall()
        assert rows == [(3, 3, 3, 35.0, 35.0, 35.0, "East")]
        described = conn.execute(
            "SELECT name, people FROM regions WHERE people > %s ORDER BY name", (6,), prepare=True
        ).fetchall()
        assert described == [("North", 10), ("South", 20)]
        with pytest.raises(psycopg.Error, match="PG_READ_FILE"):
            conn.execute("SELECT pg_read_file('/etc/passwd') FROM regions")
    assert wire.remaining() == PureDP(Fraction(1))
    assert wire.site.gateway.ledger.entries("alice", "census") == []
