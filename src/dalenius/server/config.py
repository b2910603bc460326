"""The gateway's configuration file: where it listens, where it keeps its records, its limits.

A gateway is configured by one TOML file so that several processes started from the same file
serve the same datasets, analysts and budgets. Example::

    [gateway]
    listen = "127.0.0.1:8000"
    ledger = "gateway.sqlite"             # or postgresql://user@host:5432/db
    state = "gateway.sqlite"              # analysts, token hashes, grants, datasets (default: ledger)
    catalog_root = "catalogs"             # curators may register only catalogs under it (optional)
    data_root = "data"                    # every catalog source must lie under it (optional)
    allowed_hosts = ["localhost", "127.0.0.1"]   # refuse other Host headers (optional)
    confidence = 0.95
    pg_listen = "127.0.0.1:5433"          # the PostgreSQL protocol listener (optional)
    tls_cert = "server.crt"               # TLS for the PostgreSQL listener (optional, with tls_key)
    tls_key = "server.key"

    [limits]
    max_request_bytes = 65536
    requests_per_minute = 600             # per token, shared by every process on the database
    burst = 60
    tracked_clients = 10000
    concurrent_queries = 2                # per principal, running at once in one gateway
    query_workers = 8                     # threads running explain and query in one process
    query_seconds = 30                    # the engine's time limit for one query
    min_epsilon = 0.001                   # the smallest epsilon one query may spend

Relative file paths are read relative to the configuration file, so a configuration can be moved
with the files it names. Every error names the file and the key, and says how to fix it.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dalenius.core.errors import ConfigurationError
from dalenius.ledger import sqlite_path

GATEWAY_KEYS = (
    "listen",
    "ledger",
    "state",
    "catalog_root",
    "confidence",
    "data_root",
    "allowed_hosts",
    "pg_listen",
    "tls_cert",
    "tls_key",
)
"""Keys of the ``[gateway]`` section (the docs test checks each is documented)."""
LIMIT_KEYS = (
    "max_request_bytes",
    "requests_per_minute",
    "burst",
    "tracked_clients",
    "concurrent_queries",
    "query_workers",
    "query_seconds",
    "min_epsilon",
)
"""Keys of the ``[limits]`` section."""

DEFAULT_PORT = 8000
_REAL_LIMITS = ("requests_per_minute", "query_seconds", "min_epsilon")


@dataclass(frozen=True)
class Limits:
    """Request limits that keep one client from starving the others.

    Attributes:
        max_request_bytes: the largest request body accepted (larger ones get status 413).
        requests_per_minute: the sustained request rate allowed per token (and, for failed
            sign-ins, per client address).
        burst: how many requests a client may make at once before the rate applies.
        tracked_clients: how many clients' rate counters are kept; the least recently seen is
            forgotten first, so memory stays bounded whatever the number of clients.
        concurrent_queries: how many explain or query requests one principal may have running at
            once in one gateway (the workers of one ``dalenius serve --workers N`` together);
            more are refused at once (429), before anything is read.
        query_workers: how many threads of one process run explain and query; every other
            request has its own threads, so sign-in and listings stay responsive.
        query_seconds: the engine's time limit for the exact aggregates of one query.
        min_epsilon: the smallest ε one query may spend (the work of some mechanisms grows
            with 1/ε, and a tiny ε gives noise that swamps any answer).
    """

    max_request_bytes: int = 64 * 1024
    requests_per_minute: float = 600.0
    burst: int = 60
    tracked_clients: int = 10_000
    concurrent_queries: int = 2
    query_workers: int = 8
    query_seconds: float = 30.0
    min_epsilon: float = 0.001


@dataclass(frozen=True)
class GatewayConfig:
    """A gateway's settings.

    Attributes:
        host: the address to listen on.
        port: the TCP port to listen on.
        ledger: the ledger URL (``memory:``, a SQLite path or ``sqlite:///…``, ``postgresql://…``).
        state: where analysts, token hashes, grants and registered datasets are kept; the same
            kinds of URL as the ledger, and by default the ledger's own database.
        catalog_root: if set, curators may register only catalog files inside this folder.
        data_root: if set, every source a registered catalog reads (files, after symbolic links
            are resolved) must lie inside this folder.
        allowed_hosts: if not empty, requests whose ``Host`` header names another host are
            refused (a guard against DNS rebinding).
        confidence: the default confidence level of error bars.
        limits: request size and rate limits.
        source: the configuration file, if the settings were read from one.
        pg_host, pg_port: where the PostgreSQL protocol listener listens (``pg_port`` ``None``:
            no listener).
        tls_cert, tls_key: the custodian's certificate chain and key (PEM) for the
            PostgreSQL listener's TLS; without them it offers no TLS (sign-in is by SCRAM).
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    ledger: str = "memory:"
    state: str | None = None
    catalog_root: Path | None = None
    data_root: Path | None = None
    allowed_hosts: tuple[str, ...] = ()
    confidence: float = 0.95
    limits: Limits = Limits()
    source: Path | None = None
    pg_host: str = "127.0.0.1"
    pg_port: int | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None

    @property
    def state_url(self) -> str:
        """Where the gateway's own records live (the ledger's database unless ``state`` is set)."""
        return self.state if self.state is not None else self.ledger

    @property
    def url(self) -> str:
        """The base URL clients use (``localhost`` stands in for an all-interfaces address)."""
        host = "localhost" if self.host in {"0.0.0.0", "::", ""} else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"


def parse_listen(value: Any, where: str = "listen") -> tuple[str, int]:
    """Split a ``HOST:PORT`` listen address (IPv6 hosts may be bracketed).

    Example:
        >>> parse_listen("[::1]:8080")
        ('::1', 8080)
    """
    fix = 'write listen = "127.0.0.1:8000".'
    if not isinstance(value, str) or ":" not in value:
        raise ConfigurationError(f"{where}: must be HOST:PORT, got {value!r}.", fix=fix)
    host, _, port_text = value.rpartition(":")
    host = host.strip("[]")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigurationError(f"{where}: the port {port_text!r} is not in 1..65535.", fix=fix)
    return host, int(port_text)


def with_pg_listen(config: GatewayConfig, listen: str | None) -> GatewayConfig:
    """The configuration with the PostgreSQL listener's address set to ``listen``, if given."""
    if not listen:
        return config
    host, port = parse_listen(listen, "--pg-port")
    return replace(config, pg_host=host, pg_port=port)


def with_listen(config: GatewayConfig, listen: str | None) -> GatewayConfig:
    """The configuration with its listen address replaced by ``listen`` (``HOST:PORT``), if given."""
    if not listen:
        return config
    host, port = parse_listen(listen)
    return replace(config, host=host, port=port)


def load_config(path: str | Path) -> GatewayConfig:
    """Read and validate a gateway configuration file.

    Raises:
        ConfigurationError: naming the file and key of the first problem found.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigurationError(
            f"The gateway configuration file {str(path)!r} does not exist.",
            fix="pass the path of a TOML file with a [gateway] section (see docs/server.md).",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(
            f"The gateway configuration file {str(path)!r} cannot be read: {exc}."
        ) from None
    return parse_config(text, file=str(path), base_dir=path.resolve().parent)


def parse_config(
    text: str, *, file: str = "<config>", base_dir: Path | None = None
) -> GatewayConfig:
    r"""Validate configuration TOML text; relative paths are resolved against ``base_dir``.

    Example:
        >>> config = parse_config('[gateway]\nlisten = "0.0.0.0:9000"\nledger = "memory:"')
        >>> config.port, config.state_url, config.url
        (9000, 'memory:', 'http://localhost:9000')
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(
            f"{file} is not valid TOML: {exc}.",
            fix="check the quoting and brackets on the line named above.",
        ) from None
    return _Reader(file, base_dir).config(doc)


class _Reader:
    """Turns a parsed TOML document into a :class:`GatewayConfig`, with located messages."""

    def __init__(self, file: str, base_dir: Path | None) -> None:
        self.file = file
        self.base_dir = base_dir

    def error(self, key: str, what: str, fix: str | None = None) -> ConfigurationError:
        return ConfigurationError(f"{self.file}, {key}: {what}", fix=fix)

    def section(self, doc: dict[str, Any], name: str, keys: tuple[str, ...]) -> dict[str, Any]:
        body = doc.get(name, {})
        if not isinstance(body, dict):
            raise self.error(
                f"[{name}]", "must be a table.", fix=f"write [{name}] on its own line."
            )
        unknown = sorted(set(body) - set(keys))
        if unknown:
            raise self.error(
                f"[{name}]", f"unknown key(s) {unknown}.", fix=f"use only {', '.join(keys)}."
            )
        return body

    def config(self, doc: dict[str, Any]) -> GatewayConfig:
        unknown = sorted(set(doc) - {"gateway", "limits"})
        if unknown:
            raise self.error(
                "top level",
                f"unknown section(s) {unknown}.",
                fix="a gateway configuration has a [gateway] and a [limits] section only.",
            )
        gateway = self.section(doc, "gateway", GATEWAY_KEYS)
        limits = self.section(doc, "limits", LIMIT_KEYS)
        host, port = self.listen(gateway.get("listen", f"127.0.0.1:{DEFAULT_PORT}"))
        ledger = self.store_url("ledger", gateway.get("ledger", "memory:"))
        state = None
        if "state" in gateway:
            state = self.store_url("state", gateway["state"])
        root = None
        if "catalog_root" in gateway:
            root = self.folder("catalog_root", gateway["catalog_root"])
        data_root = None
        if "data_root" in gateway:
            data_root = self.folder("data_root", gateway["data_root"])
        hosts = self.hosts(gateway.get("allowed_hosts", []))
        confidence = gateway.get("confidence", 0.95)
        if (
            isinstance(confidence, bool)
            or not isinstance(confidence, int | float)
            or not 0 < confidence < 1
        ):
            raise self.error(
                "gateway.confidence", f"must be between 0 and 1, got {confidence!r}.", "use 0.95."
            )
        pg_host, pg_port = "127.0.0.1", None
        if "pg_listen" in gateway:
            pg_host, pg_port = parse_listen(gateway["pg_listen"], f"{self.file}, gateway.pg_listen")
        tls = [
            self.file_path(k, gateway[k]) if k in gateway else None for k in ("tls_cert", "tls_key")
        ]
        if (tls[0] is None) != (tls[1] is None):
            raise self.error(
                "gateway.tls_cert",
                "tls_cert and tls_key go together.",
                "give both PEM files (the certificate chain and its private key), or neither.",
            )
        return GatewayConfig(
            pg_host=pg_host,
            pg_port=pg_port,
            tls_cert=tls[0],
            tls_key=tls[1],
            host=host,
            port=port,
            ledger=ledger,
            state=state,
            catalog_root=root,
            data_root=data_root,
            allowed_hosts=hosts,
            confidence=float(confidence),
            limits=self.limits(limits),
            source=Path(self.file) if self.file != "<config>" else None,
        )

    def listen(self, value: Any) -> tuple[str, int]:
        return parse_listen(value, f"{self.file}, gateway.listen")

    def hosts(self, value: Any) -> tuple[str, ...]:
        ok = isinstance(value, list) and all(
            isinstance(h, str) and h and h.isascii() and " " not in h for h in value
        )
        if not ok:
            raise self.error(
                "gateway.allowed_hosts",
                f"must be a list of host names, got {value!r}.",
                'write allowed_hosts = ["localhost", "127.0.0.1"].',
            )
        return tuple(h.lower() for h in value)

    def store_url(self, key: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.error(
                f"gateway.{key}",
                f"must be a non-empty string, got {value!r}.",
                "use a SQLite file name such as gateway.sqlite, or postgresql://host/db.",
            )
        try:
            path = sqlite_path(value)
        except ConfigurationError as exc:
            raise self.error(f"gateway.{key}", exc.what, exc.fix) from None
        if path is None or path == ":memory:":
            return value.strip()
        return str(self.resolve(path))

    def folder(self, key: str, value: Any) -> Path:
        if not isinstance(value, str) or not value:
            raise self.error(f"gateway.{key}", f"must be a folder path, got {value!r}.")
        folder = self.resolve(value)
        if not folder.is_dir():
            raise self.error(
                f"gateway.{key}",
                f"the folder {str(folder)!r} does not exist.",
                "create it, or correct the path (relative paths are read from the file's folder).",
            )
        return folder.resolve()

    def file_path(self, key: str, value: Any) -> Path:
        if not isinstance(value, str) or not value:
            raise self.error(f"gateway.{key}", f"must be a file path, got {value!r}.")
        path = self.resolve(value)
        if not path.is_file():
            raise self.error(
                f"gateway.{key}",
                f"the file {str(path)!r} does not exist.",
                "correct the path (relative paths are read from the file's folder).",
            )
        return path.resolve()

    def resolve(self, value: str) -> Path:
        path = Path(value).expanduser()
        if not path.is_absolute() and self.base_dir is not None:
            path = self.base_dir / path
        return path

    def limits(self, body: dict[str, Any]) -> Limits:
        defaults = Limits()
        values: dict[str, Any] = {}
        for key in LIMIT_KEYS:
            value = body.get(key, getattr(defaults, key))
            number_ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not number_ok or not math.isfinite(value) or value <= 0:
                raise self.error(
                    f"limits.{key}", f"must be a positive number, got {value!r}.", None
                )
            real = key in _REAL_LIMITS
            if not real and not float(value).is_integer():
                raise self.error(f"limits.{key}", f"must be a whole number, got {value!r}.")
            values[key] = float(value) if real else int(value)
        return Limits(**values)
