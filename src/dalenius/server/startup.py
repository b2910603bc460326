"""What ``dalenius serve`` does before it listens: prepare the demo, or issue start-up tokens.

A gateway's first curator cannot be created over HTTP (every endpoint needs a token), so the
command line creates principals and prints their tokens at start-up. The demo goes further: it
writes the synthetic census if missing, a configuration beside it, registers the dataset, creates
a curator and an analyst with a grant and a budget, and prints fresh tokens for both — the
previous demo tokens are revoked, since they were shown on a terminal that may be gone.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import ApproxDP
from dalenius.datasets.census import write_demo
from dalenius.datasets.schema import CATALOG_FILE
from dalenius.server.config import load_config, with_listen, with_pg_listen
from dalenius.server.gateway import Gateway
from dalenius.server.store import ANALYST, CURATOR, ROLES, Caller, check_name

DEMO_CURATOR = "curator"
DEMO_ANALYST = "analyst"
DEMO_BUDGET = ApproxDP(Fraction(1), Fraction(1, 10**5))
"""ε = 1 for the demo analyst, and a little δ for GROUP BY columns without public keys."""
DEMO_CONFIG = "gateway.toml"

_CONFIG_TEXT = """\
# The demo gateway, written by `dalenius serve --demo`. See docs/server.md for every key.
[gateway]
listen = "127.0.0.1:8000"
ledger = "gateway.sqlite"      # budgets, charges and the audit trail
# state: analysts, token hashes, grants and datasets; by default in the ledger's database
catalog_root = "."             # catalogs may be registered only from this folder
data_root = "."                # and may read only files in it (symbolic links resolved)
allowed_hosts = ["localhost", "127.0.0.1", "::1"]   # add this machine's name to serve others

[limits]
max_request_bytes = 65536
requests_per_minute = 600
burst = 60
"""


def _unconfined_demo(path: Path) -> bool:
    """Whether ``path`` is a demo configuration written by an earlier version, without a data root."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return text.startswith("# The demo gateway, written by") and "data_root" not in text


def _say(text: str = "") -> None:
    print(text, flush=True)


def prepare_demo(
    directory: Path, listen: str | None = None, pg_listen: str | None = None
) -> Gateway:
    """Set up (or reuse) the demo in ``directory`` and print its console URL and tokens."""
    directory.mkdir(parents=True, exist_ok=True)
    catalog = directory / CATALOG_FILE
    if not catalog.exists():
        _say(f"Writing the synthetic census to {directory}/ ...")
        write_demo(directory)
    config_path = directory / DEMO_CONFIG
    if not config_path.exists() or _unconfined_demo(config_path):
        config_path.write_text(_CONFIG_TEXT, encoding="utf-8")
    gateway = Gateway(with_pg_listen(with_listen(load_config(config_path), listen), pg_listen))
    try:
        tokens = _demo_principals(gateway, catalog)
    except BaseException:
        gateway.close()
        raise
    url = gateway.config.url
    dataset = "census"
    _say()
    _say("  Dalenius gateway — demo")
    _say("  " + "─" * 72)
    _say(f"  Console:        {url}/console/")
    _say(f"  Analyst token:  {tokens[DEMO_ANALYST]}")
    _say(f"  Curator token:  {tokens[DEMO_CURATOR]}")
    _say(f"  API:            {url}/v1/  (OpenAPI document: {url}/v1/openapi.json)")
    config = gateway.config
    if config.pg_port is not None:
        _say(
            f"  psql:           PGPASSWORD={tokens[DEMO_ANALYST]} psql "
            f'"host={config.pg_host} port={config.pg_port} user={DEMO_ANALYST} dbname={dataset}"'
        )
    _say("  " + "─" * 72)
    _say(f"  Open the console and sign in with the analyst token (budget ε = 1 on {dataset!r}).")
    _say("  Pick an example query, press Explain to see its cost, then Run.")
    _say("  Sign in with the curator token to manage analysts, grants, budgets and the ledger.")
    _say("  Tokens are shown once; the next `make demo` issues new ones. Stop with Ctrl-C.")
    _say()
    return gateway


def _demo_principals(gateway: Gateway, catalog: Path) -> dict[str, str]:
    store = gateway.store
    by = "dalenius serve --demo"
    store.ensure_principal(DEMO_CURATOR, CURATOR, by=by)
    store.ensure_principal(DEMO_ANALYST, ANALYST, by=by)
    curator = Caller(name=DEMO_CURATOR, role=CURATOR, token_id="")
    # (ε, δ) accounting, so the console can also show groups selected privately with a δ; a
    # demo ledger from an earlier run keeps the definition it has.
    known = any(info.name == "census" for info in gateway.ledger.datasets())
    registered = gateway.register(curator, str(catalog), None if known else "approx", None)
    name = str(registered["name"])
    store.grant(DEMO_ANALYST, name, by=by)
    if gateway.ledger.get_budget(DEMO_ANALYST, name) is None:
        gateway.ledger.set_budget(DEMO_ANALYST, name, DEMO_BUDGET)
    tokens = {}
    for who in (DEMO_ANALYST, DEMO_CURATOR):
        for token in store.tokens(who):
            if token.revoked_at is None:
                store.revoke_token(who, token.id)
        tokens[who] = store.issue_token(who, label="demo start-up", by=by).token
    return tokens


def parse_issue(spec: str) -> list[tuple[str, str]]:
    """Read ``role:name,role:name`` (the ``--issue-token`` list) into pairs.

    Example:
        >>> parse_issue("curator:alice, analyst:bob")
        [('curator', 'alice'), ('analyst', 'bob')]
    """
    pairs = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        role, _, name = item.partition(":")
        if role not in ROLES or not name:
            raise ConfigurationError(
                f"Cannot read the token request {item!r}.",
                fix="write ROLE:NAME with ROLE analyst or curator, e.g. curator:alice.",
            )
        pairs.append((role, check_name(name)))
    return pairs


def issue_from_environment(gateway: Gateway, spec: str) -> None:
    """Create each ``role:name`` in ``spec`` if missing and print a new token for it."""
    for role, name in parse_issue(spec):
        issued = gateway.bootstrap(name, role)
        _say(f"  New token for {role} {name!r} (shown once): {issued.token}")
