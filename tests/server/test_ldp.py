"""Local-DP collections through the gateway: creation, validated submissions, lifetime ε, estimates.

A refused submission (bad shape, wrong key, unknown collection, a client over its cap) must leave
the estimates and every ledger row exactly as they were.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.server.helpers import Site, build_site

from dalenius.ldp import make_oracle
from dalenius.server.config import GatewayConfig, Limits

DOMAIN = ["red", "green", "blue", "black"]


def create(site: Site, name: str = "colours", **settings: object) -> dict:
    body = {"name": name, "protocol": "grr", "epsilon": 1, "domain": DOMAIN, **settings}
    answer = site.client.post("/v1/ldp/collections", json=body, headers=site.as_(site.curator))
    assert answer.status_code == 201, answer.text
    return answer.json()


def submit(client: TestClient, name: str, key: str | None, reports: list[dict]):
    headers = {"X-Collection-Key": key} if key else {}
    return client.post(
        f"/v1/ldp/collections/{name}/reports", json={"reports": reports}, headers=headers
    )


def state(site: Site, name: str = "colours") -> tuple:
    info = site.client.get(f"/v1/ldp/collections/{name}", headers=site.as_(site.curator)).json()
    est = site.client.get(f"/v1/ldp/collections/{name}/estimates", headers=site.as_(site.analyst))
    who = site.client.get(f"/v1/ldp/collections/{name}/clients", headers=site.as_(site.curator))
    return info["reports"], info["clients"], est.json(), who.json()


def test_create_submit_estimate(site: Site) -> None:
    made = create(site)
    key = made["submission_key"]
    assert made["parameters"]["domain"] == DOMAIN and made["reports"] == 0
    oracle = make_oracle("grr", 4, 1)
    reports = [
        {"client": f"d{i}", "report_id": "r1", "report": int(oracle.encode(i % 4))}
        for i in range(400)
    ]
    answer = submit(site.client, "colours", key, reports)
    assert answer.status_code == 200, answer.text
    assert answer.json()["accepted"] == 400
    est = site.client.get("/v1/ldp/collections/colours/estimates", headers=site.as_(site.analyst))
    assert est.status_code == 200
    rows = est.json()["rows"]
    assert [r["value"] for r in rows] == DOMAIN
    assert all(r["lower"] <= r["estimate"] <= r["upper"] for r in rows)
    assert est.json()["reports"] == 400
    params = site.client.get(
        "/v1/ldp/collections/colours/parameters", headers={"X-Collection-Key": key}
    )
    assert params.json()["protocol"] == "grr"


def test_lifetime_epsilon_and_duplicates(site: Site) -> None:
    key = create(site)["submission_key"]
    one = {"client": "phone", "report_id": "a", "report": 1}
    assert submit(site.client, "colours", key, [one]).json()["clients"][0][
        "epsilon"
    ] == pytest.approx(1, rel=1e-6)
    again = submit(site.client, "colours", key, [one]).json()
    assert again["accepted"] == 0 and again["duplicates"] == 1  # a retry is not counted twice
    second = {"client": "phone", "report_id": "b", "report": 2}
    assert submit(site.client, "colours", key, [second]).json()["clients"][0][
        "epsilon"
    ] == pytest.approx(2, rel=1e-6)
    who = site.client.get("/v1/ldp/collections/colours/clients", headers=site.as_(site.curator))
    assert who.json()["clients"][0]["reports"] == 2


def test_memoised_repeats_are_free(site: Site) -> None:
    body = {"name": "usage", "protocol": "dbitflip", "epsilon": 1, "domain": DOMAIN, "bits": 2}
    key = site.client.post("/v1/ldp/collections", json=body, headers=site.as_(site.curator)).json()[
        "submission_key"
    ]
    report = {"buckets": [0, 2], "bits": [1, 0]}
    batch = [
        {"client": "pc", "report_id": f"day{i}", "memo": "m1", "report": report} for i in range(5)
    ]
    out = submit(site.client, "usage", key, batch).json()
    assert out["accepted"] == 5 and out["clients"][0]["epsilon"] == pytest.approx(1, rel=1e-6)
    new_value = [{"client": "pc", "report_id": "day6", "memo": "m2", "report": report}]
    assert submit(site.client, "usage", key, new_value).json()["clients"][0][
        "epsilon"
    ] == pytest.approx(2, rel=1e-6)
    no_memo = [{"client": "pc", "report_id": "day7", "report": report}]
    assert submit(site.client, "usage", key, no_memo).status_code == 400


@pytest.mark.parametrize(
    ("report", "fragment"),
    [
        ("red", "report is malformed"),  # a raw value, not a report
        (4, "report is malformed"),  # outside the domain
        ([1], "report is malformed"),
        (1.5, "report is malformed"),
        (True, "report is malformed"),
    ],
)
def test_refused_reports_change_nothing(site: Site, report: object, fragment: str) -> None:
    key = create(site)["submission_key"]
    good = {"client": "a", "report_id": "1", "report": 0}
    submit(site.client, "colours", key, [good])
    before = state(site)
    bad = [
        {"client": "b", "report_id": "1", "report": 2},
        {"client": "c", "report_id": "1", "report": report},
    ]
    answer = submit(site.client, "colours", key, bad)
    assert answer.status_code == 400
    assert fragment in answer.json()["error"]["message"]
    assert state(site) == before


def test_wrong_key_unknown_collection_and_cap_change_nothing(site: Site) -> None:
    key = create(site, client_cap=2)["submission_key"]
    submit(site.client, "colours", key, [{"client": "a", "report_id": "1", "report": 0}])
    before = state(site)
    item = [{"client": "a", "report_id": "2", "report": 1}]
    assert submit(site.client, "colours", "dlc_wrong", item).status_code == 401
    assert submit(site.client, "colours", None, item).status_code == 401
    assert submit(site.client, "nope", key, item).status_code == 404
    over = [{"client": "a", "report_id": str(i), "report": 1} for i in range(2, 4)]
    refused = submit(site.client, "colours", key, over)
    assert refused.status_code == 409 and "cap" in refused.json()["error"]["message"]
    assert state(site) == before


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": -1}, "epsilon"),
        ({"domain": ["only"]}, "at least 2 values"),
        ({"protocol": "nope"}, "protocol"),
        ({"bits": 3}, "does not take"),
        (
            {
                "protocol": "cms",
                "domain": None,
                "candidates": [f"w{i}" for i in range(4000)],
                "hashes": 8192,
            },
            "hash evaluations",
        ),
        (
            {"protocol": "sfp", "domain": None, "tag_bits": 10, "fragment_hashes": 1024},
            "fragment_hashes",
        ),
        ({"protocol": "sfp", "domain": None, "alphabet": "aa"}, "alphabet"),
    ],
)
def test_bad_collections_are_refused(site: Site, settings: dict, fragment: str) -> None:
    body = {"name": "x", "protocol": "grr", "epsilon": 1, "domain": DOMAIN, **settings}
    body = {k: v for k, v in body.items() if v is not None}
    answer = site.client.post("/v1/ldp/collections", json=body, headers=site.as_(site.curator))
    assert answer.status_code == 400
    assert fragment in answer.text
    assert site.client.get("/v1/ldp/collections", headers=site.as_(site.curator)).json() == {
        "collections": []
    }


def test_roles(site: Site) -> None:
    body = {"name": "x", "protocol": "grr", "epsilon": 1, "domain": DOMAIN}
    assert (
        site.client.post(
            "/v1/ldp/collections", json=body, headers=site.as_(site.analyst)
        ).status_code
        == 403
    )
    create(site, name="x")
    assert (
        site.client.get("/v1/ldp/collections/x/clients", headers=site.as_(site.analyst)).status_code
        == 403
    )
    assert (
        site.client.get("/v1/ldp/collections/x", headers=site.as_(site.analyst)).status_code == 200
    )
    assert (
        site.client.post(
            "/v1/ldp/collections", json=body, headers=site.as_(site.curator)
        ).status_code
        == 409
    )


@pytest.mark.parametrize(
    ("settings", "make_report"),
    [
        (
            {"protocol": "olh", "domain": DOMAIN},
            lambda s: make_oracle("olh", 4, 1).encode(1).tolist(),
        ),
        (
            {"protocol": "oue", "domain": DOMAIN},
            lambda s: make_oracle("oue", 4, 1).encode(1).tolist(),
        ),
        ({"protocol": "hcms", "candidates": DOMAIN, "hashes": 4, "width": 16}, None),
        ({"protocol": "duchi", "lower": 0, "upper": 10}, None),
        ({"protocol": "rappor", "candidates": DOMAIN, "bits": 8, "cohorts": 4, "epsilon": 5}, None),
    ],
)
def test_every_kind_of_protocol_round_trips(site: Site, settings: dict, make_report) -> None:
    body = {"name": "k", "epsilon": 1, **settings}
    made = site.client.post("/v1/ldp/collections", json=body, headers=site.as_(site.curator))
    assert made.status_code == 201, made.text
    key, params = made.json()["submission_key"], made.json()["parameters"]
    from dalenius.ldp.collection import CollectionSpec

    spec = CollectionSpec(
        {k: v for k, v in body.items() if k != "name"}
        | ({"salt": params["salt"]} if "salt" in params else {})
    )
    memo = None
    if spec.protocol == "hcms":
        report = spec.sketch.encode("red")
    elif spec.protocol == "duchi":
        report = spec.mean.encode(0.5)
    elif spec.protocol == "rappor":
        from dalenius.ldp.rappor import RapporClient

        r = RapporClient(spec.rappor).report("red")
        report, memo = {"cohort": r.cohort, "bits": r.bits.tolist()}, "tag"
    else:
        report = make_report(spec)
    item = {"client": "c", "report_id": "1", "report": report} | ({"memo": memo} if memo else {})
    answer = submit(site.client, "k", key, [item])
    assert answer.status_code == 200, answer.text
    est = site.client.get("/v1/ldp/collections/k/estimates", headers=site.as_(site.analyst))
    assert est.status_code == 200, est.text


def _hammer(client: TestClient, key: str, total: int) -> list[int]:
    oracle = make_oracle("grr", 4, 1)

    def one(i: int) -> int:
        item = {"client": f"dev{i}", "report_id": "only", "report": int(oracle.encode(i % 4))}
        return submit(client, "colours", key, [item]).status_code

    with ThreadPoolExecutor(max_workers=32) as pool:
        # every report is sent twice, concurrently: retries must not count twice
        return list(pool.map(one, [*range(total), *range(total)]))


def _check_concurrent(site: Site) -> None:
    key = create(site)["submission_key"]
    statuses = _hammer(site.client, key, 1000)
    assert statuses.count(200) == 2000
    reports, clients, est, who = state(site)
    assert reports == 1000 and clients == 1000  # none lost, none counted twice
    assert est["reports"] == 1000
    assert all(c["reports"] == 1 and abs(c["epsilon"] - 1) < 1e-6 for c in who["clients"])


@pytest.mark.slow
def test_one_thousand_concurrent_submissions_sqlite(tmp_path: Path, demo_catalog: Path) -> None:
    config = GatewayConfig(
        ledger=str(tmp_path / "ledger.db"), limits=Limits(requests_per_minute=10**6, burst=10**6)
    )
    site = build_site(config, demo_catalog)
    try:
        _check_concurrent(site)
    finally:
        site.client.close()
        site.gateway.close()


@pytest.mark.postgres
@pytest.mark.slow
def test_one_thousand_concurrent_submissions_postgres(demo_catalog: Path) -> None:
    import os
    from uuid import uuid4

    import psycopg
    from psycopg import sql

    url = os.environ.get("DALENIUS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    admin = psycopg.connect(url, autocommit=True, connect_timeout=5)
    schema = f"dalenius_ldp_{uuid4().hex[:12]}"
    admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        config = GatewayConfig(
            ledger=f"{url}?options=-csearch_path%3D{schema}",
            limits=Limits(requests_per_minute=10**6, burst=10**6),
        )
        site = build_site(config, demo_catalog)
        try:
            _check_concurrent(site)
        finally:
            site.client.close()
            site.gateway.close()
    finally:
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        admin.close()


@pytest.mark.parametrize(
    "settings",
    [
        {"protocol": "grr", "domain": DOMAIN},
        {"protocol": "olh", "domain": DOMAIN},
        {"protocol": "oue", "domain": DOMAIN},
        {"protocol": "dbitflip", "domain": DOMAIN},
        {"protocol": "hcms", "candidates": DOMAIN, "hashes": 4, "width": 16},
        {"protocol": "rappor", "candidates": DOMAIN, "bits": 8, "cohorts": 4, "epsilon": 5},
        {"protocol": "duchi", "lower": 0, "upper": 10},
    ],
)
def test_estimates_with_no_reports_are_null_not_a_confident_zero(
    site: Site, settings: dict
) -> None:
    """No reports: no estimate (null), never zeros with intervals of width zero."""
    body = {"name": "colours", "epsilon": 1, **settings}
    made = site.client.post("/v1/ldp/collections", json=body, headers=site.as_(site.curator))
    assert made.status_code == 201, made.text
    est = site.client.get("/v1/ldp/collections/colours/estimates", headers=site.as_(site.analyst))
    assert est.status_code == 200, est.text
    answer = est.json()
    assert answer["reports"] == 0
    if answer["kind"] == "mean":
        assert answer["mean"] is None and answer["lower"] is None and answer["upper"] is None
    else:
        assert answer["kind"] == "frequency" and answer["rows"] is None


@pytest.mark.slow
def test_cli_reads_estimates_from_a_running_gateway(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from tests.server.live import LiveGateway, write_config

    from dalenius.cli.main import main

    config = write_config(tmp_path / "gateway.toml", str(tmp_path / "gateway.sqlite"))
    live = LiveGateway(config, issue=("curator:root", "analyst:alice"))
    try:
        with live.client(live.tokens["root"]) as curator:
            body = {"name": "colours", "protocol": "grr", "epsilon": 1, "domain": DOMAIN}
            key = curator.post("/v1/ldp/collections", json=body).json()["submission_key"]
        with live.client() as device:
            reports = [{"client": f"d{i}", "report_id": "1", "report": i % 4} for i in range(40)]
            answer = device.post(
                "/v1/ldp/collections/colours/reports",
                json={"reports": reports},
                headers={"X-Collection-Key": key},
            )
            assert answer.status_code == 200
        argv = ["ldp", "estimates", "colours", "--url", live.url, "--token", live.tokens["alice"]]
        assert main([*argv, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["reports"] == 40 and [r["value"] for r in out["rows"]] == DOMAIN
        assert main(argv) == 0
        assert "colours (grr): 40 reports" in capsys.readouterr().out
        assert (
            main(["ldp", "estimates", "nope", "--url", live.url, "--token", live.tokens["alice"]])
            == 2
        )
        assert "No collection named 'nope'" in capsys.readouterr().err
        with live.client(live.tokens["root"]) as curator:
            body = {"name": "empty", "protocol": "grr", "epsilon": 1, "domain": DOMAIN}
            assert curator.post("/v1/ldp/collections", json=body).status_code == 201
        argv = ["ldp", "estimates", "empty", "--url", live.url, "--token", live.tokens["alice"]]
        assert main(argv) == 0
        assert "no reports yet" in capsys.readouterr().out
    finally:
        live.stop()


def test_sequence_fragment_puzzles_discover_words_through_the_gateway(site: Site) -> None:
    body = {
        "name": "words",
        "protocol": "sfp",
        "epsilon": 8,
        "alphabet": "abcd",
        "length": 4,
        "tag_bits": 4,
        "hashes": 16,
        "width": 64,
        "fragment_hashes": 4,
        "fragment_width": 64,
    }
    made = site.client.post("/v1/ldp/collections", json=body, headers=site.as_(site.curator))
    assert made.status_code == 201, made.text
    key, params = made.json()["submission_key"], made.json()["parameters"]
    assert params["positions"] == 2 and params["epsilon_per_report"] <= 8
    from dalenius.ldp.sfp import FragmentPuzzles

    # a device rebuilds the deployment from the public parameters (the salt included)
    device = FragmentPuzzles(
        epsilon=8,
        alphabet="abcd",
        length=4,
        tag_bits=4,
        hashes=16,
        width=64,
        fragment_hashes=4,
        fragment_width=64,
        salt=bytes.fromhex(params["salt"]),
    )
    words = ["abba"] * 500 + ["cad"] * 400 + ["dcba", "bc", "ddd", "a"] * 25
    reports = [
        {"client": f"d{i}", "report_id": "1", "report": device.encode(w)}
        for i, w in enumerate(words)
    ]
    for start in range(0, len(reports), 250):  # batches within the request-size limit
        assert submit(site.client, "words", key, reports[start : start + 250]).status_code == 200
    bad = dict(reports[0], client="x", report=dict(reports[0]["report"], position=2))
    refused = submit(site.client, "words", key, [bad])
    assert refused.status_code == 400 and "position" in refused.text
    est = site.client.get("/v1/ldp/collections/words/estimates", headers=site.as_(site.analyst))
    assert est.status_code == 200, est.text
    body = est.json()
    assert body["reports"] == 1000 and body["candidates"] >= 2
    found = {r["value"]: r for r in body["rows"]}
    assert {"abba", "cad"} <= set(found)  # margins of about 5 standard deviations per fragment
    for word, truth in (("abba", 500), ("cad", 400)):
        row = found[word]
        assert row["lower"] <= row["estimate"] <= row["upper"]
        assert abs(row["estimate"] - truth) <= 5 * row["stderr"]


# -- clients that memoise, that do not, and that lie ----------------------------------------


def _collection(site: Site, name: str, **settings: object) -> str:
    answer = site.client.post(
        "/v1/ldp/collections",
        json={"name": name, "epsilon": 1, **settings},
        headers=site.as_(site.curator),
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["submission_key"])


def test_a_tag_whose_reports_differ_is_charged_for_every_report(site: Site) -> None:
    key = _collection(site, "usage", protocol="dbitflip", domain=DOMAIN, bits=2)
    one, other = {"buckets": [0, 2], "bits": [1, 0]}, {"buckets": [0, 2], "bits": [0, 1]}
    # A client that does not memoise: 50 fresh responses under one tag.
    fresh = [
        {"client": "pc", "report_id": f"d{i}", "memo": "m1", "report": one if i % 3 else other}
        for i in range(50)
    ]
    out = submit(site.client, "usage", key, fresh).json()
    assert out["clients"][0]["epsilon"] == pytest.approx(50, rel=1e-6)
    # A client that memoises: 50 exact repeats under one tag cost one report.
    repeats = [
        {"client": "tablet", "report_id": f"d{i}", "memo": "m1", "report": one} for i in range(50)
    ]
    out = submit(site.client, "usage", key, repeats).json()
    assert out["clients"][0]["epsilon"] == pytest.approx(1, rel=1e-6)


def test_a_cap_refuses_a_client_whose_tag_stops_repeating(site: Site) -> None:
    key = _collection(site, "counter", protocol="1bitmean", bound=10, client_cap=1)
    repeats = [
        {"client": "phone", "report_id": f"day{i}", "memo": "p3", "report": 1} for i in range(5)
    ]
    assert submit(site.client, "counter", key, repeats).status_code == 200
    before = state(site, "counter")
    # The same tag, another response: a client that lies about memoising.
    lie = [{"client": "phone", "report_id": "day6", "memo": "p3", "report": 0}]
    answer = submit(site.client, "counter", key, lie)
    assert answer.status_code == 409 and "cap" in answer.text
    assert state(site, "counter") == before


def test_estimates_count_devices_not_repeats(site: Site) -> None:
    key = _collection(site, "counter", protocol="1bitmean", bound=10)
    reports = [
        {"client": f"d{d}", "report_id": f"day{i}", "memo": "p5", "report": d % 2}
        for d in range(40)
        for i in range(10)
    ]
    assert submit(site.client, "counter", key, reports).status_code == 200
    est = site.client.get("/v1/ldp/collections/counter/estimates", headers=site.as_(site.analyst))
    assert est.json()["reports"] == 40 and est.json()["reports_received"] == 400
