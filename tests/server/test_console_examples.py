"""The console's example queries, built from a dataset's public metadata, run as written.

The examples are computed by the console's own module (``static/js/query.js``, run under Node),
from the gateway's real dataset description; each one but the deliberately refused example is
then asked through the API and must be answered. On the demo census this includes the private ⋈
private join of ``people`` and ``visits`` on the person.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.server.helpers import Site

QUERY_JS = Path(__file__).resolve().parents[2] / "src/dalenius/server/static/js/query.js"
RUNNER = f"""
import {{ examples }} from {json.dumps(QUERY_JS.as_uri())};
let text = "";
process.stdin.on("data", (chunk) => (text += chunk));
process.stdin.on("end", () => console.log(JSON.stringify(examples(JSON.parse(text)))));
"""


def console_examples(detail: dict[str, object]) -> list[dict[str, str]]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js is needed to run the console's modules: apt-get install nodejs")
    done = subprocess.run(
        [node, "--input-type=module", "-e", RUNNER],
        input=json.dumps(detail),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    out: list[dict[str, str]] = json.loads(done.stdout)
    return out


def test_every_example_runs_and_the_join_is_among_them(site: Site) -> None:
    headers = site.as_(site.analyst)
    detail = site.client.get("/v1/datasets/census", headers=headers).json()
    samples = console_examples(detail)
    labels = [s["label"] for s in samples]
    assert "Join people ⋈ visits" in labels, labels
    join = next(s for s in samples if s["label"].startswith("Join"))
    assert "JOIN visits b ON a.person_id = b.person_id" in join["sql"]
    for sample in samples:
        body = {"sql": sample["sql"], "epsilon": sample["epsilon"]}
        explained = site.client.post("/v1/datasets/census/explain", headers=headers, json=body)
        if sample["label"] == "A refused query":
            assert explained.status_code == 400
            continue
        assert explained.status_code == 200, (sample, explained.text)
    body = {"sql": join["sql"], "epsilon": join["epsilon"]}
    answered = site.client.post("/v1/datasets/census/query", headers=headers, json=body)
    assert answered.status_code == 200, answered.text
    result = answered.json()
    assert result["columns"] == ["education", "visits"]
    assert len(result["rows"]) == 16  # every public education key
