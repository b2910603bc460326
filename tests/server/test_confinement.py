"""Catalog sources stay inside the data root; errors about a source never quote its file."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.server.helpers import build_site

from dalenius.core.errors import CatalogError
from dalenius.server.config import GatewayConfig
from dalenius.server.registry import open_catalog

SECRET = "root:$6$verysecrethash:19000:0:99999:7:::"


def _catalog(folder: Path, source: str, *, kind: str = "csv", name: str = "t") -> Path:
    table = f', table = "{name}"' if kind == "duckdb" else ""
    path = folder / f"{name}.toml"
    path.write_text(
        f'[dataset]\nname = "{name}"\n[tables.{name}]\n'
        f'source = {{ {kind} = "{source}"{table} }}\nprivacy_unit = "row"\n'
        'columns = { x = { type = "int", bounds = [0, 9] } }\n'
    )
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "good.csv").write_text("x\n1\n2\n")
    (tmp_path / "outside.csv").write_text("x\n1\n")
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    return data


def _refusal(catalog: Path, root: Path) -> str:
    with pytest.raises(CatalogError) as caught:
        open_catalog(str(catalog), data_root=root)
    message = str(caught.value)
    assert "verysecret" not in message and "root:" not in message
    return message


def test_a_source_inside_the_root_is_served(root: Path) -> None:
    catalog, executor = open_catalog(str(_catalog(root, "good.csv")), data_root=root)
    executor.close()
    assert catalog.name == "t"


@pytest.mark.parametrize(
    "source",
    ["../outside.csv", "{outside}", "/etc/passwd", "/proc/self/environ", "../*.csv"],
)
def test_sources_outside_the_root_are_refused(root: Path, source: str) -> None:
    source = source.format(outside=root.parent / "outside.csv")
    message = _refusal(_catalog(root, source), root)
    assert "outside" in message


def test_a_symbolic_link_out_of_the_root_is_refused(root: Path) -> None:
    (root / "link.csv").symlink_to(root.parent / "outside.csv")
    assert "outside" in _refusal(_catalog(root, "link.csv"), root)
    (root / "folder").symlink_to(root.parent)
    assert "outside" in _refusal(_catalog(root, "folder/outside.csv"), root)


def test_system_folders_are_refused_even_without_a_root(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="outside"):
        open_catalog(str(_catalog(tmp_path, "/proc/self/environ")))


def test_an_invalid_source_inside_the_root_is_not_quoted(root: Path) -> None:
    (root / "secret.csv").write_text(SECRET + "\n")
    message = _refusal(_catalog(root, "secret.csv"), root)
    assert "no column 'x'" in message


def test_a_duckdb_source_that_is_not_a_duckdb_file_is_a_clear_error(root: Path) -> None:
    (root / "fake.duckdb").write_text(SECRET + "\n")
    message = _refusal(_catalog(root, "fake.duckdb", kind="duckdb"), root)
    assert "not a DuckDB database" in message


def test_registration_through_the_api_is_confined(root: Path, demo_catalog: Path) -> None:
    config = GatewayConfig(data_root=demo_catalog.parent)
    site = build_site(config, demo_catalog)
    try:
        headers = site.as_(site.curator)
        for catalog in (
            _catalog(root.parent, "/etc/passwd", name="a"),
            _catalog(root.parent, "secret.txt", name="b"),
            _catalog(demo_catalog.parent, "fake.duckdb", kind="duckdb", name="c"),
        ):
            if catalog.name == "c.toml":
                (demo_catalog.parent / "fake.duckdb").write_text(SECRET)
            answer = site.client.post(
                "/v1/datasets", headers=headers, json={"catalog": str(catalog)}
            )
            assert answer.status_code == 400, answer.text
            assert "verysecret" not in answer.text and "root:" not in answer.text
    finally:
        site.client.close()
        site.gateway.close()
