"""Every console page in a real browser at a desktop and a phone width, and the Anonymity page.

Each page is opened signed in as the role that sees it (analyst pages as an analyst, curation
pages as a curator), at 1400 px and 390 px wide. The test fails on a script error or a console
error, and at 390 px on any element that sticks out of the viewport horizontally (measured in the
page; an element inside a box that scrolls sideways, as wide tables do, is not out of the
viewport; one cut off by a box that clips it is). Full-page screenshots go to ``$CONSOLE_SCREENSHOTS`` when set, else a temporary folder,
to be looked at.
"""

from __future__ import annotations

import csv
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from tests.server import test_browser
from tests.server.live import LiveGateway, free_port, write_config

pytestmark = pytest.mark.browser

browser = test_browser.browser  # the same Chromium, launched once per module

WIDTHS = {"desktop": (1400, 900), "phone": (390, 844)}

ANALYST_PAGES = ["/query", "/datasets", "/budget", "/releases", "/ldp", "/attacks"]
CURATOR_PAGES = [
    "/admin/analysts",
    "/admin/budgets",
    "/admin/datasets",
    "/admin/ledger",
    "/admin/anonymity",
    "/ldp",  # a curator's Local DP page has the form that creates a collection
]

# Elements whose right edge passes the viewport, outside any ancestor that scrolls sideways
# (those are reachable by scrolling the box, not the page). Content a box clips (overflow hidden)
# is counted: it is cut off, not scrollable.
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const clipped = (node) => {
    for (let up = node.parentElement; up && up !== document.body; up = up.parentElement) {
      const x = getComputedStyle(up).overflowX;
      if (x === "auto" || x === "scroll") return true;
    }
    return false;
  };
  const out = [];
  for (const node of document.body.querySelectorAll("*")) {
    const box = node.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    if (box.right > width + 0.5 && !clipped(node)) {
      out.push(`${node.tagName.toLowerCase()}#${node.id}.${node.className} right=${box.right}`);
    }
  }
  return out.slice(0, 10);
}"""


# Text-like form controls the stylesheet missed: an input created without type="text" is a text
# input to the browser but not to a selector `input[type="text"]`, and renders as a tiny default
# box. The stylesheet's controls have 8 px corners; the browser's have none (or 2 px). Controls
# inside the SQL editor are styled by the editor's frame instead.
UNSTYLED = """() => {
  const skip = new Set(["checkbox", "radio", "file", "hidden", "range", "submit", "button", "color"]);
  const out = [];
  for (const node of document.querySelectorAll("main input, main select, main textarea")) {
    if (node.tagName === "INPUT" && skip.has(node.type)) continue;
    if (node.closest(".editor")) continue;
    const box = node.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    if (getComputedStyle(node).borderTopLeftRadius !== "8px") out.push(`${node.tagName.toLowerCase()}#${node.id}`);
  }
  return out;
}"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, demo_catalog: Path) -> Iterator[LiveGateway]:
    folder = tmp_path_factory.mktemp("screens-gateway")
    config = write_config(folder / "gateway.toml", str(folder / "gateway.sqlite"))
    # With the PostgreSQL listener, so the Datasets page shows how clients connect.
    text = config.read_text().replace(
        "[limits]", f'pg_listen = "127.0.0.1:{free_port()}"\n[limits]'
    )
    config.write_text(text)
    live = LiveGateway(config, issue=("curator:root", "analyst:alice"))
    try:
        with live.client(live.tokens["root"]) as curator:
            made = curator.post("/v1/datasets", json={"catalog": str(demo_catalog)})
            assert made.status_code == 201, made.text
            assert curator.put("/v1/principals/alice/grants/census").status_code == 200
            assert curator.put("/v1/budgets/alice/census", json={"epsilon": 1}).status_code == 200
        yield live
    finally:
        live.stop()


@pytest.fixture(scope="module")
def screens(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("CONSOLE_SCREENSHOTS")
    folder = Path(given) if given else tmp_path_factory.mktemp("console-screens")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def signed_in(browser: Browser, gateway: LiveGateway, who: str, size: tuple[int, int]) -> Page:
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.goto(f"{gateway.url}/")
    page.fill("#token", gateway.tokens[who])
    page.click("button[type=submit]")
    expect(page.locator("#who")).to_contain_text(who)
    return page


def watch(page: Page) -> list[str]:
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"script: {error}"))
    page.on(
        "console",
        lambda message: (
            problems.append(f"console: {message.text}") if message.type == "error" else None
        ),
    )
    return problems


@pytest.mark.parametrize("size", sorted(WIDTHS))
@pytest.mark.parametrize("who", ["alice", "root"])
def test_every_page_renders_without_errors_and_fits_a_phone(
    browser: Browser, gateway: LiveGateway, screens: Path, who: str, size: str
) -> None:
    width, height = WIDTHS[size]
    page = signed_in(browser, gateway, who, (width, height))
    problems = watch(page)
    for path in ANALYST_PAGES if who == "alice" else CURATOR_PAGES:
        page.goto(f"{gateway.url}/console/#{path}")
        # Rendered: the page's own container, with its heading, and no loading line left.
        expect(page.locator(f'.page[data-page="{path}"] h1')).to_be_visible()
        expect(page.locator(".page .spinner")).to_have_count(0, timeout=30_000)
        page.wait_for_load_state("networkidle")
        shown = page.inner_text("main")
        assert "[object " not in shown and "undefined" not in shown and "NaN" not in shown, path
        assert page.evaluate(UNSTYLED) == [], path
        name = path.strip("/").replace("/", "-")
        if who == "root" and not path.startswith("/admin"):
            name += "-curator"
        page.screenshot(path=str(screens / f"{size}-{name}.png"), full_page=True)
        if width == 390:
            assert page.evaluate(OVERFLOW) == [], path
            assert page.evaluate("document.documentElement.scrollWidth") <= width, path
    assert problems == []
    page.close()


@pytest.mark.parametrize("size", sorted(WIDTHS))
def test_the_anonymity_page_releases_a_k_anonymous_table(
    browser: Browser, gateway: LiveGateway, screens: Path, size: str
) -> None:
    page = signed_in(browser, gateway, "root", WIDTHS[size])
    problems = watch(page)
    page.goto(f"{gateway.url}/console/#/admin/anonymity")
    expect(page.locator("#anon-age-role")).to_have_value("quasi")
    page.fill("#anon-age-param", "10, 20, 40")
    # sex's hierarchy is uploaded: a CSV, one line per value and its generalisation.
    page.select_option("#anon-sex-kind", "upload")
    page.set_input_files(
        "#anon-sex-file",
        files=[
            {"name": "sex.csv", "mimeType": "text/csv", "buffer": b"Female,person\nMale,person\n"}
        ],
    )
    page.fill("#anon-k", "5")
    page.fill("#anon-l", "2")
    with page.expect_request(lambda r: r.url.endswith("/anonymize/progress")) as sent:
        page.click("#anon-run")
    body = sent.value.post_data_json
    assert body["hierarchies"]["sex"] == {
        "type": "tree",
        "values": {"Female": ["person"], "Male": ["person"]},
    }
    assert body["hierarchies"]["age"] == {"type": "intervals", "widths": [10, 20, 40]}
    assert body["privacy"] == {"k": 5, "suppression_limit": 0.02, "l": 2}
    result = page.locator("section[data-result=anonymize]")
    expect(result).to_be_visible(timeout=90_000)
    # The optimal node names a level for each quasi-identifier; the release is re-checked.
    expect(page.locator("#anon-node")).to_contain_text("age=")
    expect(page.locator("#anon-node")).to_contain_text("sex=")
    expect(result).to_contain_text("minimised")
    risks = result.locator('table[aria-label="Re-identification risks"] tbody tr')
    expect(risks).to_have_count(7)
    page.screenshot(path=str(screens / f"{size}-anonymity-result.png"), full_page=True)
    if size == "phone":
        assert page.evaluate(OVERFLOW) == []
    # The downloaded release: identifiers dropped, every (age, sex) class at least 5 records.
    with page.expect_download() as started:
        page.click("#anon-download")
    with open(started.value.path(), newline="") as handle:
        records = list(csv.DictReader(handle))
    assert records and "person_id" not in records[0]
    classes = Counter((r["age"], r["sex"]) for r in records)
    assert min(classes.values()) >= 5, classes.most_common()[-3:]
    # A model the table cannot meet: the stream's last line is the refusal, shown as an error.
    page.fill("#anon-k", "5000")
    page.click("#anon-run")
    expect(page.locator("[role=alert][data-code=configuration_error]")).to_contain_text("5000")
    expect(page.locator("#anon-run")).to_be_enabled()
    assert problems == []


@pytest.mark.parametrize("size", sorted(WIDTHS))
def test_the_attack_lab_shows_each_rate_beside_a_labelled_bound_and_the_plot(
    browser: Browser, gateway: LiveGateway, screens: Path, size: str
) -> None:
    width, height = WIDTHS[size]
    page = signed_in(browser, gateway, "alice", (width, height))
    problems = watch(page)
    page.goto(f"{gateway.url}/console/#/attacks")
    page.select_option("#lab-attack", "differencing")
    page.fill("#lab-people", "30")
    page.fill("#lab-trials", "20")
    page.click("#lab-run")
    result = page.locator("section[data-attack=differencing]")
    rows = result.locator(".lab-row[data-target]")
    expect(rows).to_have_count(3, timeout=90_000)
    expect(result.locator(".lab-row[data-target=naive]")).to_contain_text("differential privacy")
    expect(result.locator(".lab-row[data-target=raw]")).to_contain_text("none: exact answers")
    # The CLI's plot, served as a PNG the browser decoded.
    expect(page.locator("#lab-plot")).to_be_visible()
    assert page.evaluate("document.getElementById('lab-plot').naturalWidth") > 100
    page.screenshot(path=str(screens / f"{size}-attacks-differencing.png"), full_page=True)
    # Linking against a k-anonymous release: its bound is 1/k, labelled as not a DP bound.
    page.select_option("#lab-attack", "linking")
    page.fill("#lab-people", "1000")
    page.click("#lab-run")
    result = page.locator("section[data-attack=linking]")
    expect(result.locator(".lab-row[data-target]")).to_have_count(3, timeout=90_000)
    anonymous = result.locator(".lab-row[data-target=k-anonymous]")
    expect(anonymous).to_contain_text("1/k")
    expect(anonymous).to_contain_text("not DP")
    page.screenshot(path=str(screens / f"{size}-attacks-linking.png"), full_page=True)
    if width == 390:
        assert page.evaluate(OVERFLOW) == []
    assert problems == []


# The smallest text in the page's charts, in CSS pixels as shown: the font size times the scale
# at which the SVG is drawn (its box's width over its viewBox's).
SMALLEST_CHART_TEXT = """() => {
  let smallest = Infinity;
  for (const svg of document.querySelectorAll("main svg.chart")) {
    const view = svg.viewBox.baseVal;
    const scale = view && view.width ? svg.getBoundingClientRect().width / view.width : 1;
    for (const text of svg.querySelectorAll("text")) {
      if (!text.textContent.trim()) continue;
      smallest = Math.min(smallest, parseFloat(getComputedStyle(text).fontSize) * scale);
    }
  }
  return smallest;
}"""

# Each table that scrolls sideways, scrolled to its right end: how far its first column's cells
# are from the box's left edge (0 when they stay in view, negative when they scrolled off).
FIRST_COLUMN_AFTER_SCROLL = """() => {
  const out = [];
  for (const wrap of document.querySelectorAll("main .table-wrap")) {
    if (wrap.scrollWidth <= wrap.clientWidth + 1) continue;
    wrap.scrollLeft = wrap.scrollWidth;
    const left = wrap.getBoundingClientRect().left;
    const cell = wrap.querySelector("tbody tr td:first-child");
    out.push(Math.round(cell.getBoundingClientRect().left - left));
  }
  return out;
}"""


@pytest.mark.parametrize("size", sorted(WIDTHS))
def test_a_grouped_result_reads_on_a_phone(
    browser: Browser, gateway: LiveGateway, screens: Path, size: str
) -> None:
    """A GROUP BY answer: chart labels at least 11 px as shown (they were about 5 px on a phone,
    the SVG drawn 760 wide and shrunk), and the table's first column stays in view when the
    table scrolls sideways. The spending chart on the Budget page too."""
    width, height = WIDTHS[size]
    page = signed_in(browser, gateway, "alice", (width, height))
    problems = watch(page)
    page.goto(f"{gateway.url}/console/#/query")
    page.fill(
        "#sql",
        "SELECT education, COUNT(*), AVG(income), AVG(hours_per_week) FROM people GROUP BY education",
    )
    page.fill("#epsilon", "0.1")
    page.click("#run-button")
    expect(page.locator("#result-panel svg.chart")).to_be_visible(timeout=60_000)
    page.wait_for_timeout(3_000)  # the toast fades before the screenshot
    page.screenshot(path=str(screens / f"{size}-query-result.png"), full_page=True)
    assert page.evaluate(SMALLEST_CHART_TEXT) >= 11
    if size == "phone":
        shifts = page.evaluate(FIRST_COLUMN_AFTER_SCROLL)
        assert shifts, "the result table should scroll sideways on a phone"
        assert all(shift >= -1 for shift in shifts), shifts
        assert page.evaluate(OVERFLOW) == []
        page.screenshot(path=str(screens / f"{size}-query-result-scrolled.png"), full_page=True)
    page.goto(f"{gateway.url}/console/#/budget")
    expect(page.locator("main svg.chart.spend")).to_be_visible(timeout=30_000)
    assert page.evaluate(SMALLEST_CHART_TEXT) >= 11
    page.screenshot(path=str(screens / f"{size}-budget-spent.png"), full_page=True)
    assert problems == []


@pytest.mark.parametrize("size", sorted(WIDTHS))
def test_the_datasets_page_shows_how_postgresql_clients_connect(
    browser: Browser, gateway: LiveGateway, screens: Path, size: str
) -> None:
    page = signed_in(browser, gateway, "alice", WIDTHS[size])
    page.goto(f"{gateway.url}/console/#/datasets?name=census")
    line = page.locator("pre.wrap")
    expect(line).to_contain_text("user=alice dbname=census")
    expect(line).to_contain_text("SET dalenius.epsilon")
    box = line.bounding_box()
    assert box is not None and box["x"] + box["width"] <= WIDTHS[size][0]
    line.scroll_into_view_if_needed()
    page.screenshot(path=str(screens / f"{size}-datasets-clients.png"), full_page=False)
    page.close()
