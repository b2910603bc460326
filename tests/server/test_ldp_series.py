"""A collection's series through the gateway: reports stamped with their arrival, grouped by day,
each period and running total the collection's own estimate, nothing counted twice, refusals
before any report is read, and ``dalenius ldp series`` reading it over HTTP.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.server.helpers import Site
from tests.server.test_ldp import DOMAIN, create, submit

from dalenius.ldp.collection import independent
from dalenius.server.ldpstore import LdpStore


class Clock:
    """The arrival time the store stamps: moved by the test, a day at a time."""

    def __init__(self) -> None:
        self.now = datetime(2024, 3, 1, 9, 30, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _series(site: Site, name: str, **query: object):
    params = {"period": "day", "start": "2024-03-01", "horizon": 3, "as_of": "2024-03-04"}
    return site.client.get(
        f"/v1/ldp/collections/{name}/series",
        params={**params, **query},
        headers=site.as_(site.analyst),
    )


def test_a_series_groups_reports_by_arrival_day_and_counts_each_once(site: Site) -> None:
    clock = Clock()
    ldp = LdpStore(site.gateway.store.backend, clock=clock)
    site.client.app.state.ldp_store = ldp  # type: ignore[attr-defined]
    key = create(site, client_cap=5)["submission_key"]
    sent: list[list[int]] = []
    for day in range(4):  # the fourth day is still open on 2024-03-04: in no period
        reports = [
            {"client": f"d{i}", "report_id": f"r{day}", "report": (i + day) % 4}
            for i in range(30 + 10 * day)
        ]
        assert submit(site.client, "colours", key, reports).status_code == 200
        # A retried submission is recognised: not stored, not counted again.
        again = submit(site.client, "colours", key, reports[:5]).json()
        assert again["accepted"] == 0 and again["duplicates"] == 5
        sent.append([r["report"] for r in reports])
        clock.now += timedelta(days=1)
    answer = _series(site, "colours")
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["collection"] == "colours" and doc["closed"] == 3 and doc["kind"] == "frequency"
    assert doc["lifetime_epsilon"] == 5 and doc["values"] == DOMAIN
    spec = ldp.spec("colours")
    for day, point in enumerate(doc["periods"]):
        assert point["period"] == f"2024-03-0{day + 1}" and point["reports"] == len(sent[day])
        assert point["estimate"] == json.loads(json.dumps(spec.estimate(sent[day], 0.95)))
        so_far = [r for reports in sent[: day + 1] for r in reports]
        assert point["running"]["reports"] == len(so_far)
        assert point["running"]["rows"] == spec.estimate(so_far, 0.95)["rows"]
    # With the fourth day closed, the last running total is the collection's own estimate.
    whole = _series(site, "colours", horizon=4, as_of="2024-03-05").json()
    estimate = site.client.get(
        "/v1/ldp/collections/colours/estimates", headers=site.as_(site.analyst)
    ).json()
    assert whole["periods"][-1]["running"]["rows"] == estimate["rows"]
    assert sum(p["reports"] for p in whole["periods"]) == estimate["reports"] == 180


def test_memoised_repeats_in_a_day_are_one_observation_through_the_gateway(site: Site) -> None:
    clock = Clock()
    ldp = LdpStore(site.gateway.store.backend, clock=clock)
    site.client.app.state.ldp_store = ldp  # type: ignore[attr-defined]
    body = {"name": "counter", "protocol": "1bitmean", "epsilon": 1, "bound": 10, "points": 10}
    made = site.client.post("/v1/ldp/collections", json=body, headers=site.as_(site.curator))
    key = made.json()["submission_key"]
    rows: list[tuple[str, str, str]] = []
    for day in range(2):
        # Every device sends its one memoised response three times a day.
        reports = [
            {"client": f"d{i}", "report_id": f"{day}.{k}", "memo": "p5", "report": i % 2}
            for i in range(40)
            for k in range(3)
        ]
        assert submit(site.client, "counter", key, reports).status_code == 200
        rows += [(r["client"], r["memo"], json.dumps(r["report"])) for r in reports]
        clock.now += timedelta(days=1)
    doc = _series(site, "counter", horizon=2, as_of="2024-03-03").json()
    assert doc["kind"] == "mean" and doc["lifetime_epsilon"] is None
    spec = ldp.spec("counter")
    once = spec.estimate([i % 2 for i in range(40)], 0.95)
    for point in doc["periods"]:
        assert point["reports"] == 120
        assert point["estimate"]["reports"] == 40  # devices, not reports
        assert (point["estimate"]["lower"], point["estimate"]["upper"]) == (
            once["lower"],
            once["upper"],
        )
        # Over both days each device is still one observation: its response is one.
        assert point["running"]["reports"] == 40
    assert len(independent("response", rows)) == 40


def test_a_series_is_refused_before_any_report_is_read(site: Site) -> None:
    create(site)
    cases = [
        ({"period": "month", "start": "2024-03-02"}, 400, "1st of a month"),
        ({"as_of": "2999-01-01"}, 400, "after today"),
        ({"period": "hour"}, 400, "query.period"),
        ({"horizon": 0}, 400, "query.horizon"),
    ]
    for query, status, text in cases:
        answer = _series(site, "colours", **query)
        assert answer.status_code == status and text in answer.text, answer.text
    assert _series(site, "nope").status_code == 404
    no_token = site.client.get(
        "/v1/ldp/collections/colours/series",
        params={"period": "day", "start": "2024-03-01", "horizon": 3},
    )
    assert no_token.status_code == 401


@pytest.mark.slow
def test_cli_reads_a_series_from_a_running_gateway(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.server.live import LiveGateway, write_config

    from dalenius.cli.main import main

    config = write_config(tmp_path / "gateway.toml", str(tmp_path / "gateway.sqlite"))
    live = LiveGateway(config, issue=("curator:root", "analyst:alice"))
    try:
        with live.client(live.tokens["root"]) as curator:
            body = {"name": "colours", "protocol": "grr", "epsilon": 1, "domain": DOMAIN}
            body["client_cap"] = 3
            key = curator.post("/v1/ldp/collections", json=body).json()["submission_key"]
        with live.client() as device:
            reports = [{"client": f"d{i}", "report_id": "1", "report": i % 4} for i in range(40)]
            answer = device.post(
                "/v1/ldp/collections/colours/reports",
                json={"reports": reports},
                headers={"X-Collection-Key": key},
            )
            assert answer.status_code == 200
        today = datetime.now(UTC).date()
        start = (today - timedelta(days=1)).isoformat()
        argv = ["ldp", "series", "colours", "--url", live.url, "--token", live.tokens["alice"]]
        argv += ["--period", "day", "--start", start, "--horizon", "2"]
        # Today's reports are in today's period, which closes tonight: as of tomorrow...
        assert main([*argv, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["closed"] == 1 and out["periods"][0]["reports"] == 0
        assert main(argv) == 0
        text = capsys.readouterr().out
        assert "1 of 2 days closed" in text and "lifetime ε at most 3" in text
        assert main([*argv, "--as-of", "2999-01-01"]) == 2
        assert "after today" in capsys.readouterr().err
    finally:
        live.stop()
