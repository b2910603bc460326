"""Property-based API testing with Schemathesis, in process against the ASGI application.

For every operation of the OpenAPI document, Schemathesis generates requests (schema-valid ones,
and in a second pass schema-invalid ones) and checks each answer: never a 5xx, a status the
document declares, a content type and body that match the declared response schema, and invalid
requests rejected. The number of examples is bounded so the whole run takes seconds.

One built-in check is left out: ``positive_data_acceptance`` expects every schema-valid request
to succeed, but a request can match the schema and still be refused on its meaning — SQL that
names an unknown column, a catalog path that does not exist — and those refusals (400 with the
error shape, declared in the document) are the API working as designed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.generation.modes import GenerationMode
from tests.server.helpers import Site

from dalenius.server.app import create_app
from dalenius.server.config import GatewayConfig
from dalenius.server.gateway import Gateway

EXAMPLES = 5
CHECKS_OFF = [schemathesis.checks.positive_data_acceptance]


def operations(site: Site) -> list[schemathesis.APIOperation]:
    schema = schemathesis.openapi.from_asgi("/v1/openapi.json", site.client.app)
    return [result.ok() for result in schema.get_all_operations()]


def fuzz(site: Site, token: str, mode: GenerationMode, fixed: dict[str, str]) -> list[str]:
    """Run every operation; return the failures (operation label and report)."""
    failures = []
    ops = operations(site)
    assert len(ops) >= 25
    for operation in ops:
        names = {p.name for p in operation.path_parameters}
        pinned = {k: v for k, v in fixed.items() if k in names}
        strategy = operation.as_strategy(mode, path_parameters=pinned or None)

        @given(case=strategy)
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def run(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=site.as_(token), excluded_checks=CHECKS_OFF)

        try:
            run()
        except BaseException as failure:  # Schemathesis reports an exception group
            failures.append(f"{operation.label}: {failure}")
    return failures


@pytest.mark.parametrize(
    ("role", "mode", "fixed"),
    [
        ("curator", GenerationMode.POSITIVE, {}),
        ("analyst", GenerationMode.POSITIVE, {"name": "census"}),
        ("curator", GenerationMode.NEGATIVE, {"name": "census"}),
    ],
)
def test_the_api_conforms_to_its_openapi_document(
    site_factory: Callable[..., Site], role: str, mode: GenerationMode, fixed: dict[str, str]
) -> None:
    site = site_factory(requests_per_minute=1_000_000, burst=1_000_000)
    token = site.curator if role == "curator" else site.analyst
    failures = fuzz(site, token, mode, fixed)
    assert not failures, "\n\n".join(failures)
    # The ledger was never overspent by anything the fuzzer sent.
    assert site.gateway.ledger.verify() == []


def test_the_document_declares_every_error_and_the_bearer_scheme() -> None:
    gateway = Gateway(GatewayConfig())
    try:
        document = create_app(gateway=gateway).openapi()
    finally:
        gateway.close()
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            declared = set(operation["responses"])
            assert {"400", "401", "413", "429"} <= declared, (method, path)
            # Devices submitting local-DP reports sign with their collection's key instead.
            device = path.endswith(("/reports", "/parameters")) and path.startswith("/v1/ldp/")
            scheme = "collection_key" if device else "token"
            assert operation["security"] == [{scheme: []}], (method, path)
            if "curator" in operation["tags"]:
                assert "403" in declared, (method, path)
