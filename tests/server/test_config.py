"""The gateway's configuration file: defaults, relative paths, and located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from dalenius.core.errors import ConfigurationError
from dalenius.server.config import GatewayConfig, load_config, parse_config, with_listen


def test_defaults_and_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "catalogs").mkdir()
    path = tmp_path / "gateway.toml"
    path.write_text(
        '[gateway]\nlisten = "0.0.0.0:9100"\nledger = "db/ledger.sqlite"\n'
        'catalog_root = "catalogs"\n[limits]\nburst = 5\n'
    )
    config = load_config(path)
    assert (config.host, config.port) == ("0.0.0.0", 9100)
    assert config.ledger == str(tmp_path / "db" / "ledger.sqlite")
    assert config.state_url == config.ledger  # the gateway's records share the ledger's database
    assert config.catalog_root == (tmp_path / "catalogs").resolve()
    assert config.limits.burst == 5 and config.limits.max_request_bytes == 65536
    assert config.url == "http://localhost:9100"
    default = parse_config("")
    assert default == GatewayConfig(source=None)
    assert with_listen(default, "[::1]:8123").url == "http://[::1]:8123"


def test_postgres_and_sqlite_urls_are_kept(tmp_path: Path) -> None:
    config = parse_config(
        '[gateway]\nledger = "postgresql://u@127.0.0.1:5432/test"\nstate = "sqlite:///state.db"',
        base_dir=tmp_path,
    )
    assert config.ledger == "postgresql://u@127.0.0.1:5432/test"
    assert config.state_url == str(tmp_path / "state.db")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[gateway]\nlisten = 8000", "gateway.listen"),
        ('[gateway]\nlisten = "localhost:99999"', "gateway.listen"),
        ('[gateway]\nledger = "ftp://x"', "gateway.ledger"),
        ("[gateway]\nledger = 3", "gateway.ledger"),
        ("[gateway]\nconfidence = 1.5", "gateway.confidence"),
        ('[gateway]\ncatalog_root = "no-such-folder"', "gateway.catalog_root"),
        ("[gateway]\nport = 1", "[gateway]"),
        ("[limits]\nburst = 0", "limits.burst"),
        ("[limits]\nburst = 2.5", "limits.burst"),
        ("[limits]\nrequests_per_minute = true", "limits.requests_per_minute"),
        ("[server]\nx = 1", "top level"),
        ("[gateway\n", "not valid TOML"),
    ],
)
def test_errors_name_the_file_and_key(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "gw.toml"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as caught:
        load_config(path)
    assert str(path) in str(caught.value) and where in str(caught.value)


def test_a_missing_file_says_how_to_fix_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_config(tmp_path / "nope.toml")
    assert caught.value.fix and "docs/server.md" in caught.value.fix
