"""The console's Local DP page in a real browser: estimates as a chart with error bars.

A curator creates a collection through the API, simulated devices submit reports with the
collection's key, and an analyst opens the page: the chart has one bar per value and the table
one row per value; a curator also sees each client's lifetime ε. Screenshots go to ``artifacts/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect, sync_playwright
from tests.server.live import LiveGateway, write_config
from tests.server.test_browser import ARTIFACTS, FLAGS, ensure_chromium

from dalenius.ldp import make_oracle

pytestmark = pytest.mark.browser

DOMAIN = ["red", "green", "blue", "black"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = ensure_chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[LiveGateway]:
    config = write_config(tmp_path / "gateway.toml", str(tmp_path / "gateway.sqlite"))
    live = LiveGateway(config, issue=("curator:root", "analyst:alice"))
    try:
        with live.client(live.tokens["root"]) as curator:
            made = curator.post(
                "/v1/ldp/collections",
                json={"name": "colours", "protocol": "olh", "epsilon": 2, "domain": DOMAIN},
            )
            assert made.status_code == 201, made.text
            key = made.json()["submission_key"]
        oracle = make_oracle("olh", 4, 2)
        reports = [
            {"client": f"phone{i}", "report_id": "1", "report": oracle.encode(i % 3).tolist()}
            for i in range(600)
        ]
        with live.client() as device:
            answer = device.post(
                "/v1/ldp/collections/colours/reports",
                json={"reports": reports},
                headers={"X-Collection-Key": key},
            )
            assert answer.status_code == 200, answer.text
        yield live
    finally:
        live.stop()


def test_the_local_dp_page_charts_estimates_with_error_bars(
    browser: Browser, gateway: LiveGateway
) -> None:
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{gateway.url}/console/#/ldp")
    page.fill("#token", gateway.tokens["alice"])
    page.click("button[type=submit]")
    chart = page.locator("section[data-collection=colours] svg.chart")
    expect(chart).to_have_attribute("data-groups", "4")
    expect(page.locator("section[data-collection=colours] table tbody tr")).to_have_count(4)
    expect(page.locator("section[data-collection=colours]")).to_contain_text("600 reports")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "console-ldp.png"), full_page=True)
    assert errors == []

    curator = browser.new_page(viewport={"width": 1360, "height": 900})
    curator.goto(f"{gateway.url}/console/#/ldp")
    curator.fill("#token", gateway.tokens["root"])
    curator.click("button[type=submit]")
    expect(curator.locator("text=Clients' lifetime ε")).to_be_visible()
    expect(curator.locator("text=phone0")).to_be_visible()


def test_a_new_collections_key_stays_until_the_curator_dismisses_it(
    browser: Browser, gateway: LiveGateway
) -> None:
    """The submission key is shown once (the gateway keeps its hash): no redraw may take it away.

    The page used to redraw itself 4 s after the collection was made, and the key with it.
    """
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{gateway.url}/console/#/ldp")
    page.fill("#token", gateway.tokens["root"])
    page.click("button[type=submit]")
    page.fill("#ldp-name", "fruit")
    page.fill("#ldp-values", "apple, pear, plum")
    page.click("form:has(#ldp-name) button[type=submit]")
    key = page.locator("#ldp-key .token-text")
    expect(key).to_contain_text("dlc_")
    shown = key.inner_text()
    page.wait_for_timeout(6_000)  # longer than the old redraw's delay
    expect(key).to_have_text(shown)
    page.click("#ldp-key-done")
    expect(page.locator("#ldp-key")).to_have_count(0)
    expect(page.locator('a[href="#/ldp?name=fruit"]')).to_be_visible()
    # A collection without reports has no estimate: said in words, not drawn as 0 [0, 0].
    page.click('a[href="#/ldp?name=fruit"]')
    fruit = page.locator("section[data-collection=fruit]")
    expect(fruit).to_contain_text("No reports yet")
    expect(fruit.locator("svg.chart, table")).to_have_count(0)
    assert errors == []
