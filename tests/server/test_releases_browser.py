"""The console's Releases page in a real browser: a density curve with its bands, a hierarchy,
synthetic origin–destination flows, perturbed rows, series over time (of a table, and of a
local-DP collection).

An analyst with an (ε, δ) budget releases the density of age (a line chart with two bands) and a
sex › education hierarchy (a table of consistent counts), flows, and perturbed rows with their
error table and CSV, at a desktop and a phone width. Screenshots go to ``artifacts/``.
"""

from __future__ import annotations

import csv
import sqlite3
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, expect, sync_playwright
from tests.server.live import LiveGateway, write_config
from tests.server.test_browser import ARTIFACTS, FLAGS, ensure_chromium
from tests.server.test_console_screens_browser import OVERFLOW, WIDTHS

from dalenius.ldp import make_oracle
from dalenius.ledger.storage import encode_time

pytestmark = pytest.mark.browser


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
            made = curator.post(
                "/v1/datasets", json={"catalog": str(demo_catalog), "definition": "approx"}
            )
            assert made.status_code in (200, 201), made.text
            granted = curator.put("/v1/principals/alice/grants/census")
            assert granted.status_code in (200, 201, 204), granted.text
            budget = curator.put("/v1/budgets/alice/census", json={"epsilon": 1, "delta": "1e-5"})
            assert budget.status_code in (200, 201, 204), budget.text
        yield live
    finally:
        live.stop()


def test_the_releases_page_draws_a_density_with_bands_and_a_hierarchy(
    browser: Browser, gateway: LiveGateway
) -> None:
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{gateway.url}/console/#/releases")
    page.fill("#token", gateway.tokens["alice"])
    page.click("button[type=submit]")
    page.locator("#density-form button[type=submit]").click()
    chart = page.locator("section[data-release=density] svg.line-chart")
    expect(chart).to_have_attribute("data-points", "200", timeout=90_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "console-density.png"), full_page=True)
    page.fill("#hier-levels", "sex, education")
    page.locator("#hierarchy-form button[type=submit]").click()
    expect(page.locator("section[data-release=hierarchy] table tbody tr")).to_have_count(
        3, timeout=90_000
    )
    page.screenshot(path=str(ARTIFACTS / "console-hierarchy.png"), full_page=True)
    # The flows' ε defaults to what the budget can pay (0.8 is left): the offered button works.
    expect(page.locator("#otm-epsilon")).to_have_value("0.5")
    page.fill("#otm-per-destination", "50")
    page.locator("#onthemap-form button[type=submit]").click()
    expect(page.locator("section[data-release=onthemap] table tbody tr")).to_have_count(
        15, timeout=90_000
    )
    page.screenshot(path=str(ARTIFACTS / "console-onthemap.png"), full_page=True)
    # 0.3 is left: every ε field now offers at most that (rounded down, so it is payable).
    expect(page.locator("#otm-epsilon")).to_have_value("0.3")
    expect(page.locator("#hier-epsilon")).to_have_value("0.1")
    # Each release stays on the page, newest first.
    shown = page.locator("#release-outputs > section[data-release]")
    expect(shown).to_have_count(3)
    kinds = [shown.nth(i).get_attribute("data-release") for i in range(3)]
    assert kinds == ["onthemap", "hierarchy", "density"]
    assert errors == []


@pytest.mark.parametrize("size", sorted(WIDTHS))
def test_the_releases_page_perturbs_rows_with_their_error_table_and_a_csv(
    browser: Browser, gateway: LiveGateway, size: str
) -> None:
    """Perturbed rows of the demo census's people (unit: one row per person): the error table has
    a line per column, the first rows are shown, and the link downloads every released row as
    CSV; at a phone's width nothing sticks out of the page."""
    width, height = WIDTHS[size]
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{gateway.url}/console/#/releases")
    page.fill("#token", gateway.tokens["alice"])
    page.click("button[type=submit]")
    expect(page.locator("#pert-epsilon")).to_have_value("1")
    page.fill("#pert-epsilon", "0.5")
    page.locator("#perturb-form button[type=submit]").click()
    card = page.locator("section[data-release=perturbation]")
    lines = card.locator("table[aria-label='Error per column'] tbody tr")
    expect(lines).to_have_count(3, timeout=90_000)
    expect(lines.nth(0)).to_contain_text("[0, 100]")
    expect(lines.nth(1)).to_contain_text("2 keys")
    expect(card.locator("table[aria-label='Released rows'] tbody tr")).to_have_count(10)
    with page.expect_download() as started:
        card.locator("#pert-download").click()
    assert started.value.suggested_filename == "perturbed-census-age-sex-income.csv"
    with open(started.value.path(), newline="") as handle:
        header, *rows = list(csv.reader(handle))
    assert header == ["age", "sex", "income"]
    expect(card.locator("#pert-download")).to_contain_text(f"{len(rows):,} rows")
    assert abs(len(rows) - 3000) < 300 and all(len(r) == 3 for r in rows)
    assert {r[1] for r in rows} <= {"Female", "Male"}
    # Every numeric value parses, and is noised: many distinct values of age and of income.
    assert min(len({float(r[j]) for r in rows}) for j in (0, 2)) > 100
    # The budget left (1 − 0.5) is what the form now offers.
    expect(page.locator("#pert-epsilon")).to_have_value("0.5")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"console-perturbation-{size}.png"), full_page=True)
    if size == "phone":
        assert page.evaluate(OVERFLOW) == []
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert errors == []


@pytest.mark.parametrize("size", sorted(WIDTHS))
def test_the_releases_page_draws_a_series_over_time_with_its_bands_and_a_csv(
    browser: Browser, gateway: LiveGateway, size: str
) -> None:
    """A monthly series of the demo census's visits with the summed duration: a line of 12
    points with their band, the table of the points and their intervals, the running totals and
    the sums as other views, and the CSV holding what the table shows; at a phone's width nothing
    sticks out of the page."""
    width, height = WIDTHS[size]
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{gateway.url}/console/#/releases")
    page.fill("#token", gateway.tokens["alice"])
    page.click("button[type=submit]")
    expect(page.locator("#series-epsilon")).to_have_value("0.5")
    page.fill("#series-value", "duration_minutes")
    page.fill("#series-as-of", "2024-01-01")
    page.locator("#series-form button[type=submit]").click()
    card = page.locator("section[data-release=continual]")
    chart = card.locator("svg.series-chart")
    expect(chart).to_have_attribute("data-points", "12", timeout=90_000)
    expect(chart.locator("path.band")).to_have_count(1)
    expect(chart.locator("circle.dot")).to_have_count(12)
    expect(card.locator(".meta")).to_contain_text("12 of 12 periods closed")
    expect(card.locator(".meta")).to_contain_text("lifetime ε = 0.5")
    points = card.locator("table[aria-label='Series points'] tbody tr")
    expect(points).to_have_count(12)
    expect(points.nth(0).locator("td").nth(0)).to_have_text("2023-01-01")
    per_period = [_point(points.nth(i)) for i in range(12)]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"console-series-{size}.png"), full_page=True)
    card.screenshot(path=str(ARTIFACTS / f"console-series-card-{size}.png"))
    card.locator("button[role=tab][data-view=running]").click()
    expect(card.locator("table[aria-label='Series points'] thead")).to_contain_text("Running total")
    running = [_point(points.nth(i)) for i in range(12)]
    assert running != per_period
    card.locator("select.series-measure").select_option(label="Sum of duration_minutes")
    expect(card.locator(".series-caption")).to_contain_text("sum of duration_minutes")
    sums = [_point(points.nth(i)) for i in range(12)]
    for value, low, high in (*per_period, *running, *sums):
        assert low <= value <= high
    card.screenshot(path=str(ARTIFACTS / f"console-series-running-sum-{size}.png"))
    with page.expect_download() as started:
        card.locator("a.series-download").click()
    assert started.value.suggested_filename == "series-census-visits-month.csv"
    with open(started.value.path(), newline="") as handle:
        header, *rows = list(csv.reader(handle))
    assert header[:5] == ["period", "count", "count_low", "count_high", "count_se"]
    assert "running_sum_high" in header and len(rows) == 12
    at = {name: j for j, name in enumerate(header)}
    for row, (value, low, high) in zip(rows, sums, strict=True):
        assert float(row[at["running_sum"]]) == pytest.approx(value, rel=1e-5, abs=0.05)
        assert float(row[at["running_sum_low"]]) == pytest.approx(low, rel=1e-5, abs=0.05)
        assert float(row[at["running_sum_high"]]) == pytest.approx(high, rel=1e-5, abs=0.05)
    # The same series again: nothing new has closed, so its publication is shown, at no cost.
    page.locator("#series-form button[type=submit]").click()
    expect(page.locator("section[data-release=continual]")).to_have_count(2, timeout=90_000)
    expect(page.locator("section[data-release=continual]").first.locator(".meta")).to_contain_text(
        "no new cost"
    )
    if size == "phone":
        assert page.evaluate(OVERFLOW) == []
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert errors == []


def _point(row: Locator) -> tuple[float, float, float]:
    """A table row's estimate and interval, as numbers."""
    value = float(row.locator("td").nth(1).inner_text().replace(",", ""))
    low, high = row.locator("td").nth(2).inner_text().strip("[]").replace(",", "").split()
    return value, float(low), float(high)


def _collection_over_past_days(live: LiveGateway, database: Path) -> date:
    """A grr collection of colours whose reports arrived over the seven days before today (none
    on the third), written with their arrival times as the gateway stamps them; returns the
    first day. (A device's report is stamped when it arrives; a test cannot wait for days.)"""
    with live.client(live.tokens["root"]) as curator:
        body = {"name": "colours", "protocol": "grr", "epsilon": 2, "client_cap": 10}
        body["domain"] = ["red", "green", "blue", "black"]
        assert curator.post("/v1/ldp/collections", json=body).status_code == 201
    oracle = make_oracle("grr", 4, 2)
    first = datetime.now(UTC).date() - timedelta(days=7)
    rows = []
    for day in range(7):
        if day == 2:
            continue
        when = datetime.combine(first + timedelta(days=day), time(12), tzinfo=UTC)
        values = [i % 4 if i % 3 else 0 for i in range(150 + 40 * day)]
        for i, report in enumerate(oracle.encode_many(values)):
            rows.append(("colours", f"d{i}", f"r{day}", f"\x1fr{day}", str(int(report)), when))
    with sqlite3.connect(database) as db:
        db.executemany(
            "INSERT INTO dalenius_ldp_reports "
            "(collection, client, report_id, memo, report, received_at) VALUES (?, ?, ?, ?, ?, ?)",
            [(*row[:5], encode_time(row[5])) for row in rows],
        )
    return first


@pytest.mark.parametrize("size", sorted(WIDTHS))
def test_the_series_form_draws_a_local_dp_collection_per_day(
    browser: Browser, gateway: LiveGateway, tmp_path: Path, size: str
) -> None:
    """The same chart for a local-DP collection: a line per value over the days its reports
    arrived, a gap on the day without reports, the collection's lifetime cap in the header."""
    first = _collection_over_past_days(gateway, tmp_path / "gateway.sqlite")
    width, height = WIDTHS[size]
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{gateway.url}/console/#/releases")
    page.fill("#token", gateway.tokens["alice"])
    page.click("button[type=submit]")
    page.locator("#series-source").select_option("collection")
    expect(page.locator("#series-collection option")).to_have_count(1)
    expect(page.locator("#series-table")).to_be_hidden()
    page.locator("#series-period").select_option("day")
    page.fill("#series-start", first.isoformat())
    page.fill("#series-horizon", "7")
    page.locator("#series-form button[type=submit]").click()
    card = page.locator("section[data-release=ldp-series]")
    chart = card.locator("svg.series-chart")
    expect(chart).to_have_attribute("data-points", "7", timeout=90_000)
    expect(chart.locator("circle.dot")).to_have_count(6)  # no estimate on the third day
    expect(chart.locator("path.band")).to_have_count(2)  # the line stops there
    meta = card.locator(".meta")
    expect(meta).to_contain_text("7 of 7 periods closed")
    expect(meta).to_contain_text("lifetime ε ≤ 10 per device")
    expect(card.locator("select.series-measure option")).to_have_count(4)
    points = card.locator("table[aria-label='Series points'] tbody tr")
    expect(points).to_have_count(7)
    expect(points.nth(2).locator("td").nth(1)).to_have_text("—")
    for i in (0, 1, 3, 4, 5, 6):
        value, low, high = _point(points.nth(i))
        assert low <= value <= high
    ARTIFACTS.mkdir(exist_ok=True)
    card.screenshot(path=str(ARTIFACTS / f"console-ldp-series-{size}.png"))
    card.locator("button[role=tab][data-view=running]").click()
    card.locator("select.series-measure").select_option(label="Count of green")
    expect(card.locator(".series-caption")).to_contain_text("Running total: count of green")
    expect(chart.locator("circle.dot")).to_have_count(7)  # a running total from the first day
    card.screenshot(path=str(ARTIFACTS / f"console-ldp-series-running-{size}.png"))
    if size == "phone":
        assert page.evaluate(OVERFLOW) == []
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert errors == []
