"""The device-side client on docs/ldp/collection.md submits reports the gateway accepts and counts.

The page's Python block is read from the page and run as it stands; its function is then called
against a gateway with the collection the page's curl example creates.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from tests.server.helpers import Site

PAGE = Path(__file__).resolve().parents[2] / "docs" / "ldp" / "collection.md"


def page_client() -> dict[str, object]:
    (code,) = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)
    namespace: dict[str, object] = {"__name__": "collection_page"}
    exec(compile(code, str(PAGE), "exec"), namespace)
    return namespace


def test_the_documented_client_submits_reports_that_are_counted(site: Site) -> None:
    body = {"name": "colours", "protocol": "olh", "epsilon": 1, "domain": ["red", "green", "blue"]}
    made = site.client.post("/v1/ldp/collections", json=body, headers=site.as_(site.curator))
    assert made.status_code == 201, made.text
    key = made.json()["submission_key"]
    send = cast(Callable[..., dict[str, Any]], page_client()["send_colour"])
    colours = ["green"] * 1500 + ["red"] * 300
    for device, colour in enumerate(colours):
        answer = send(site.client, key, f"device-{device}", "2026-11-24", colour)
        assert answer["accepted"] == 1
    again = send(site.client, key, "device-0", "2026-11-24", "green")
    assert (again["accepted"], again["duplicates"]) == (0, 1)  # a retry is never counted twice
    rows = site.client.get(
        "/v1/ldp/collections/colours/estimates", headers=site.as_(site.analyst)
    ).json()["rows"]
    estimates = {row["value"]: row for row in rows}
    truth = Counter(colours)
    for colour in ("red", "green", "blue"):
        row = estimates[colour]
        # Within 4 standard errors: all three hold with probability above 99.98%.
        assert abs(row["estimate"] - truth[colour]) <= 4 * row["stderr"]
