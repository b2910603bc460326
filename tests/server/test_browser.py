"""The console in a real browser: Playwright drives Debian's Chromium against a real gateway.

The gateway runs as ``dalenius serve`` in a subprocess on a free loopback port. The test signs in
with an analyst's token, explains a query, runs it, sees the chart with its error bars and the
budget drop, then sees a refusal explained. Screenshots are kept under ``artifacts/`` (ignored by
git). Chromium comes from Debian's packages, installed by `make test` (its ``browser`` step);
when it is missing the test fails loudly with that command.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from tests.server.live import LiveGateway, write_config

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
GROUPED = "SELECT sex, COUNT(*), AVG(income) FROM people GROUP BY sex"


def ensure_chromium() -> str:
    """The Chromium binary; fails loudly (never skips) when the set-up step did not install it."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make browser` (apt-get install chromium) first")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = ensure_chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def gateway(tmp_path: Path, demo_catalog: Path) -> Iterator[LiveGateway]:
    config = write_config(tmp_path / "gateway.toml", str(tmp_path / "gateway.sqlite"))
    live = LiveGateway(config, issue=("curator:root", "analyst:alice"))
    try:
        with live.client(live.tokens["root"]) as curator:
            assert (
                curator.post("/v1/datasets", json={"catalog": str(demo_catalog)}).status_code == 201
            )
            assert curator.put("/v1/principals/alice/grants/census").status_code == 200
            assert curator.put("/v1/budgets/alice/census", json={"epsilon": 1}).status_code == 200
        yield live
    finally:
        live.stop()


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"console-{name}.png"), full_page=True)


def test_sign_in_explain_query_chart_and_budget(browser: Browser, gateway: LiveGateway) -> None:
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    # A refused query is an HTTP 400, which Chromium also logs; script errors are what matter.
    page.on(
        "console",
        lambda m: (
            problems.append(m.text)
            if m.type == "error" and "Failed to load resource" not in m.text
            else None
        ),
    )

    page.goto(f"{gateway.url}/")
    page.fill("#token", gateway.tokens["alice"])
    page.click("button[type=submit]")
    expect(page.locator("#who")).to_contain_text("alice")
    expect(page.locator("#budget-remaining")).to_have_attribute("data-remaining", "1")

    page.fill("#sql", GROUPED)
    page.fill("#epsilon", "0.25")
    page.click("#explain-button")
    expect(page.locator("#explain-cost")).to_have_text("ε = 0.25")
    with gateway.client(gateway.tokens["alice"]) as api:
        plan = api.post(
            "/v1/datasets/census/explain", json={"sql": GROUPED, "epsilon": 0.25}
        ).json()
    rows = page.locator("#explain-panel table.data tbody tr")
    expect(rows).to_have_count(len(plan["measurements"]))
    # The floor γ no (ε, δ)-DP mechanism beats, beside each error, and what it means.
    floor = rows.first.locator("td").nth(6)
    expect(floor).to_contain_text(f"{plan['measurements'][0]['lower_bound']:.4g}"[:4])
    expect(page.locator("#explain-floor")).to_have_text(plan["lower_bound_basis"])
    expect(page.locator("#budget-remaining")).to_have_attribute("data-remaining", "1")

    page.click("#run-button")
    expect(page.locator("#result-spent")).to_have_text("ε = 0.25")
    chart = page.locator("#chart-box svg.chart")
    expect(chart).to_have_attribute("data-groups", "2")
    expect(chart.locator("rect.bar")).to_have_count(2)
    expect(chart.locator("line.whisker")).to_have_count(6)  # a bar and two caps per group
    expect(page.locator("#result-panel table.data tbody tr")).to_have_count(2)
    expect(page.locator("#budget-remaining")).to_have_attribute("data-remaining", "0.75")
    shot(page, "result")

    page.fill("#sql", "SELECT name\nFROM people")
    page.click("#run-button")
    alert = page.locator("#output .alert")
    expect(alert).to_have_attribute("data-code", "privacy_refusal")
    expect(alert.locator(".why")).not_to_be_empty()
    expect(alert.locator(".fix")).not_to_be_empty()
    expect(alert.locator("pre.pointer mark")).to_have_text("name")
    expect(page.locator("#budget-remaining")).to_have_attribute("data-remaining", "0.75")
    shot(page, "refusal")

    page.click("a[href='#/budget']")
    expect(page.locator("table[aria-label='Your ledger'] tbody tr")).to_have_count(1)
    shot(page, "history")
    assert problems == []


def test_a_curator_creates_an_analyst_and_sees_the_token_once(
    browser: Browser, gateway: LiveGateway
) -> None:
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    page.goto(f"{gateway.url}/console/#/admin/analysts")
    page.fill("#token", gateway.tokens["root"])
    page.click("button[type=submit]")
    page.fill("#new-name", "bob")
    page.click("text=Create and issue a token")
    token = page.locator("#issued .token-text")
    expect(token).to_contain_text("dlt_")
    issued = token.inner_text()
    page.check("#grant-census")
    expect(page.locator(".toast")).to_contain_text("Granted census")
    shot(page, "curator")
    with gateway.client(issued) as bob:
        assert [d["name"] for d in bob.get("/v1/datasets").json()["datasets"]] == ["census"]


PAGES = ["#/query", "#/budget", "#/admin/analysts", "#/admin/ledger", "#/admin/datasets"]


def test_the_console_fits_a_phone_and_keeps_greek_and_sql_as_written(
    browser: Browser, gateway: LiveGateway
) -> None:
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(f"{gateway.url}/")
    # A mistyped token on the first attempt is "not accepted", not "no longer accepted".
    page.fill("#token", "dlt_mistyped_token")
    page.click("button[type=submit]")
    notice = page.locator(".signin [role=alert]")
    expect(notice).to_contain_text("not accepted")
    expect(notice).not_to_contain_text("no longer")
    page.fill("#token", gateway.tokens["alice"])
    page.click("button[type=submit]")
    expect(page.locator("#who")).to_contain_text("alice")
    page.fill("#sql", "SELECT sex, count(*) AS n FROM people GROUP BY sex")
    page.fill("#epsilon", "0.1")
    page.click("#run-button")
    expect(page.locator("#result-panel table.data tbody tr")).to_have_count(2)
    header = page.locator("#result-panel table.data th").nth(1)
    assert header.inner_text() == header.text_content()  # no CSS rewrites the column's name
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, ("result", width)
    shot(page, "phone-result")
    page.click("#sign-out")
    page.fill("#token", gateway.tokens["root"])
    page.click("button[type=submit]")
    expect(page.locator("#who")).to_contain_text("root")
    for hash_ in PAGES:
        page.goto(f"{gateway.url}/console/{hash_}")
        page.wait_for_load_state("networkidle")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, (hash_, width)
        shot(page, f"phone-{hash_.strip('#/').replace('/', '-')}")
    # ε in a column header stays ε (text-transform: uppercase would show Ε).
    page.goto(f"{gateway.url}/console/#/admin/ledger")
    page.wait_for_load_state("networkidle")
    headers = page.locator("table.data th").all_inner_texts()
    assert not any("Ε" in text for text in headers), headers


def test_a_target_error_instead_of_epsilon(browser: Browser, gateway: LiveGateway) -> None:
    """Accuracy first in the console: a target ± beside ε; explain shows the ε chosen."""
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(f"{gateway.url}/")
    page.fill("#token", gateway.tokens["alice"])
    page.click("button[type=submit]")
    expect(page.locator("#who")).to_contain_text("alice")
    sql = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"
    page.fill("#sql", sql)
    page.fill("#target", "60")
    expect(page.locator("#epsilon")).to_be_disabled()
    expect(page.locator("#run-cost")).to_have_text("spends the ε for ± 60")
    page.click("#explain-button")
    panel = page.locator("#accuracy-panel")
    expect(panel).to_contain_text("ε chosen for accuracy")
    expect(panel.locator("tbody tr")).to_have_count(1)
    with gateway.client(gateway.tokens["alice"]) as api:
        plan = api.post("/v1/datasets/census/explain", json={"sql": sql, "target_error": 60}).json()
    chosen = plan["accuracy"]["epsilon"]
    page.click("#run-button")
    expect(page.locator("#result-panel table.data tbody tr")).to_have_count(2)
    expect(page.locator("#budget-remaining")).not_to_have_attribute("data-remaining", "1")
    remaining = page.locator("#budget-remaining").get_attribute("data-remaining")
    assert remaining is not None and abs(float(remaining) - (1 - chosen)) < 1e-9
    shot(page, "target")
    assert problems == []


def test_a_subquery_used_as_a_value_is_explained_then_answered(
    browser: Browser, gateway: LiveGateway
) -> None:
    staged = (
        "SELECT sex, COUNT(*)\nFROM people\nWHERE age > (SELECT AVG(age) FROM people)\nGROUP BY sex"
    )
    # A repeated request would be answered from the ledger's record, free: a new ε per size.
    for width, name, eps in ((1400, "staged", "0.25"), (390, "staged-phone", "0.2")):
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(f"{gateway.url}/")
        page.fill("#token", gateway.tokens["alice"])
        page.click("button[type=submit]")
        expect(page.locator("#who")).to_contain_text("alice")
        page.fill("#sql", staged)
        page.fill("#epsilon", eps)
        page.click("#explain-button")
        expect(page.locator("#explain-cost")).to_have_text(f"ε = {eps}")
        expect(page.locator("#explain-panel")).to_contain_text("age > (subquery 1)")
        # The subquery's two measurements (its sum and count) before the outer COUNT.
        expect(page.locator("#explain-panel table.data tbody tr")).to_have_count(3)
        page.click("#run-button")
        expect(page.locator("#result-spent")).to_have_text(f"ε = {eps}")
        note = page.locator("[data-role=result-note]").first
        expect(note).to_contain_text(
            "The subquery (SELECT AVG(age) FROM people) was released first"
        )
        shot(page, name)
        page.close()
