"""The attack lab over HTTP: any signed-in caller, capped sizes, bounds labelled by what they are."""

from __future__ import annotations

import base64
import threading

import pytest
from tests.server.helpers import Site

from dalenius.server import attack_lab


def test_the_catalogue_lists_every_attack_with_its_targets_and_caps(site: Site) -> None:
    assert site.client.get("/v1/attacks").status_code == 401
    doc = site.client.get("/v1/attacks", headers=site.as_(site.analyst)).json()
    names = [a["name"] for a in doc["attacks"]]
    assert names == list(attack_lab.ATTACKS)
    linking = doc["attacks"][names.index("linking")]
    assert "k-anonymous" in linking["targets"] and linking["kind"] == "microdata"
    differencing = doc["attacks"][names.index("differencing")]
    assert differencing["targets"] == ["raw", "naive", "dalenius"]
    assert differencing["sizes"]["people"]["cap"] >= differencing["sizes"]["people"]["default"]


def test_an_analyst_runs_differencing_and_sees_dp_bounds_beside_the_rates(site: Site) -> None:
    answer = site.client.post(
        "/v1/attacks/differencing",
        json={"people": 30, "trials": 20},
        headers=site.as_(site.analyst),
    )
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    kinds = [r["target_kind"] for r in doc["reports"]]
    assert kinds == ["raw", "naive", "dalenius"]
    raw, naive, dalenius = doc["reports"]
    assert raw["success"]["rate"] == 1.0 and "bound" not in raw
    for report in (naive, dalenius):
        assert report["bound"]["guarantee"] == "differential privacy"
        assert 0.5 < report["bound"]["value"] < 1
        assert 0 <= report["success"]["low"] <= report["success"]["rate"] <= 1
    png = base64.b64decode(doc["plot"].removeprefix("data:image/png;base64,"))
    assert png.startswith(b"\x89PNG")


def test_linking_against_a_k_anonymous_release_is_bounded_by_one_over_k_not_dp(
    site: Site,
) -> None:
    body = {"against": ["raw", "k-anonymous"], "people": 1_000, "k": 5, "plot": False}
    doc = site.client.post("/v1/attacks/linking", json=body, headers=site.as_(site.curator)).json()
    raw, anonymous = doc["reports"]
    assert doc["plot"] is None
    assert raw["success"]["rate"] > anonymous["success"]["rate"]
    assert anonymous["bound"]["value"] == pytest.approx(1 / 5)
    assert anonymous["bound"]["guarantee"].startswith("k-anonymity")
    assert "not DP" in anonymous["bound"]["guarantee"]


def test_sizes_over_the_cap_and_unknown_names_are_refused_before_any_work(site: Site) -> None:
    analyst = site.as_(site.analyst)
    cap = attack_lab.QUERY_SIZES["membership"]["people"].cap
    big = site.client.post("/v1/attacks/membership", json={"people": cap + 1}, headers=analyst)
    assert big.status_code == 400
    error = big.json()["error"]
    assert "people" in error["message"] and "dalenius attack membership" in error["fix"]
    unknown = site.client.post("/v1/attacks/phishing", json={}, headers=analyst)
    assert unknown.status_code == 400 and "differencing" in unknown.json()["error"]["fix"]
    wrong = site.client.post(
        "/v1/attacks/differencing", json={"against": ["k-anonymous"]}, headers=analyst
    )
    assert wrong.status_code == 400 and "k-anonymous" in wrong.json()["error"]["message"]


def test_one_run_at_a_time(site: Site) -> None:
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with attack_lab._RUNNING:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        held.wait(30)
        busy = site.client.post(
            "/v1/attacks/auxiliary",
            json={"people": 50, "trials": 5},
            headers=site.as_(site.analyst),
        )
        assert busy.status_code == 409
        assert busy.json()["error"]["code"] == "conflict"
    finally:
        release.set()
        holder.join()
