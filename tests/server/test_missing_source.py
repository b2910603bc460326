"""A source file gone after the gateway opened its dataset: refused before the gate, for free."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from tests.server.helpers import build_site

from dalenius.core.catalog import load_catalog
from dalenius.core.loss import PureDP
from dalenius.datasets.census import write_demo
from dalenius.server.config import GatewayConfig

COUNT = "SELECT COUNT(*) FROM people"


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_a_source_gone_is_refused_free_with_an_audit_line(tmp_path: Path, damage: str) -> None:
    catalog = write_demo(tmp_path, n=500)
    site = build_site(GatewayConfig(), catalog)
    try:
        headers = site.as_(site.analyst)
        body = {"sql": COUNT, "epsilon": "0.25"}
        answered = site.client.post("/v1/datasets/census/query", headers=headers, json=body)
        assert answered.status_code == 200, answered.text
        spent = site.gateway.ledger.spent("alice", "census")
        assert spent == PureDP(Fraction(1, 4))
        source = Path(load_catalog(catalog).table("people").source.location)  # type: ignore[union-attr]
        if damage == "missing":
            source.unlink()
        else:
            source.write_bytes(source.read_bytes()[:100])
        audits = len(site.gateway.ledger.audit())
        entries = len(site.gateway.ledger.entries())
        refused = site.client.post(
            "/v1/datasets/census/query", headers=headers, json={"sql": COUNT, "epsilon": "0.5"}
        )
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert "people." in error["message"] and str(tmp_path) not in error["message"]
        assert error["code"] == "catalog_error" and error["table"] == "people"
        assert site.gateway.ledger.spent("alice", "census") == spent
        assert len(site.gateway.ledger.entries()) == entries
        new = site.gateway.ledger.audit()[audits:]
        assert [a.outcome for a in new] == ["refused"]
    finally:
        site.client.close()
        site.gateway.close()
