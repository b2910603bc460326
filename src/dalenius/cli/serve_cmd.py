"""``dalenius serve``: run the HTTP gateway and its web console.

The command line and the server are independent siblings (neither imports the other), so this
command hands uvicorn the server's application factory by import string —
``dalenius.server.app:from_environment`` — and passes its settings through environment variables
the factory reads: ``DALENIUS_GATEWAY_CONFIG``, ``DALENIUS_GATEWAY_DEMO``,
``DALENIUS_GATEWAY_LISTEN`` and ``DALENIUS_GATEWAY_ISSUE``. With ``--workers N`` it first calls
``prepare_workers`` of the same module, found by the same string, so that the demo and the
start-up tokens are prepared once before uvicorn starts N worker processes on one socket. It
needs ``pip install 'dalenius[server]'``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from dalenius.cli.common import EXIT_OK
from dalenius.core.errors import ConfigurationError, MissingExtraError

DEFAULT_LISTEN = ("127.0.0.1", 8000)
FACTORY = "dalenius.server.app:from_environment"
DEMO_PORTS = 20
"""How many ports after the default the demo tries when the default one is taken."""


def register(sub: Any) -> None:
    """Add the ``serve`` sub-command.

    Long because it is the list of the command's options, each with its help text.
    """
    parser = sub.add_parser(
        "serve",
        help="run the HTTP gateway (JSON API under /v1) and its web console",
        description=(
            "Serve the versioned JSON API (/v1, OpenAPI document at /v1/openapi.json) and the web "
            "console (/console/). Configure it with a TOML file (--config), or run the demo "
            "(--demo), which prepares the synthetic census, a curator and an analyst, and prints "
            "their tokens."
        ),
    )
    parser.add_argument(
        "--config", metavar="FILE", help="the gateway's configuration file (see docs/server.md)"
    )
    parser.add_argument(
        "--demo",
        nargs="?",
        const="dalenius-demo",
        default=None,
        metavar="DIR",
        help="serve the demo census from DIR (default ./dalenius-demo), writing it if missing",
    )
    parser.add_argument(
        "--host", default=None, help="address to listen on (default: the configuration's)"
    )
    parser.add_argument(
        "--port", type=int, default=None, help="port to listen on (default: the configuration's)"
    )
    parser.add_argument(
        "--pg-port",
        type=int,
        default=None,
        metavar="PORT",
        help=(
            "also listen for PostgreSQL clients (psql, JDBC, psycopg, BI tools) on PORT, on "
            "the same address; user = analyst, password = token, database = dataset"
        ),
    )
    parser.add_argument(
        "--issue-token",
        action="append",
        default=[],
        metavar="ROLE:NAME",
        help=(
            "create the analyst or curator NAME if missing and print a new token for it at "
            "start-up (repeatable); this is how the first curator gets a token"
        ),
    )
    parser.add_argument(
        "--workers",
        type=_worker_count,
        default=1,
        metavar="N",
        help=(
            "serve from N processes on one port (default 1); they share the ledger and the "
            "gateway's records, so these must be a SQLite file or PostgreSQL"
        ),
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=("critical", "error", "warning", "info", "debug"),
        help="how much the server logs (default: info)",
    )
    parser.set_defaults(func=run_serve)


MAX_WORKERS = 64


def _worker_count(text: str) -> int:
    """``--workers``: a whole number from 1 to :data:`MAX_WORKERS`."""
    if not text.isdigit() or not 1 <= int(text) <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(
            f"--workers must be a whole number from 1 to {MAX_WORKERS}, got {text!r} "
            "(one or two per CPU core is plenty)"
        )
    return int(text)


def _require_extra() -> Any:
    for package in ("fastapi", "uvicorn"):
        if importlib.util.find_spec(package) is None:
            raise MissingExtraError(package, "server", "The HTTP gateway")
    import uvicorn

    return uvicorn


def _configured_listen(path: str) -> tuple[str, int]:
    """The ``[gateway] listen`` address of a configuration file (the server validates the rest)."""
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(
            f"The gateway configuration file {path!r} does not exist.",
            fix="pass the path of a TOML file with a [gateway] section (see docs/server.md).",
        ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        # The server reads the file again and reports exactly what is wrong with it.
        return DEFAULT_LISTEN
    gateway = doc.get("gateway")
    listen = gateway.get("listen") if isinstance(gateway, dict) else None
    if not isinstance(listen, str):
        return DEFAULT_LISTEN
    host, _, port = listen.rpartition(":")
    if not port.isdigit():
        return DEFAULT_LISTEN
    return host.strip("[]") or DEFAULT_LISTEN[0], int(port)


def _port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _choose_port(host: str, port: int, *, search: bool) -> int:
    tries = range(port, port + DEMO_PORTS) if search else range(port, port + 1)
    for candidate in tries:
        if 0 < candidate < 65536 and _port_free(host, candidate):
            return candidate
    raise ConfigurationError(
        f"Cannot listen on {host}:{port}: the address is in use or not available here.",
        fix="stop the program using it, or pass another port with --port 8080.",
    )


def run_serve(args: argparse.Namespace) -> int:
    """Run ``dalenius serve`` until interrupted."""
    if (args.config is None) == (args.demo is None):
        raise ConfigurationError(
            "dalenius serve needs exactly one of --config FILE and --demo.",
            fix="run `dalenius serve --demo` to try it, or write a configuration (docs/server.md).",
        )
    uvicorn = _require_extra()
    host, port = _configured_listen(args.config) if args.config else DEFAULT_LISTEN
    host = args.host or host
    port = _choose_port(host, args.port or port, search=args.demo is not None and args.port is None)
    os.environ["DALENIUS_GATEWAY_LISTEN"] = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    os.environ["DALENIUS_GATEWAY_ISSUE"] = ",".join(args.issue_token)
    if args.pg_port is not None:
        pg = f"[{host}]:{args.pg_port}" if ":" in host else f"{host}:{args.pg_port}"
        os.environ["DALENIUS_GATEWAY_PG_LISTEN"] = pg
    else:
        os.environ.pop("DALENIUS_GATEWAY_PG_LISTEN", None)
    if args.demo is not None:
        os.environ["DALENIUS_GATEWAY_DEMO"] = str(Path(args.demo).resolve())
        os.environ.pop("DALENIUS_GATEWAY_CONFIG", None)
    else:
        os.environ["DALENIUS_GATEWAY_CONFIG"] = str(Path(args.config).resolve())
        os.environ.pop("DALENIUS_GATEWAY_DEMO", None)
    settings: dict[str, Any] = {
        "factory": True,
        "host": host,
        "port": port,
        "log_level": args.log_level,
        "access_log": False,  # the gateway keeps its own request log
        "server_header": False,
    }
    if args.workers == 1:
        uvicorn.run(FACTORY, **settings)
        return EXIT_OK
    # The demo and the start-up tokens are prepared once, here; then uvicorn's supervisor starts
    # the workers on one listening socket, each opening the gateway from the environment.
    with tempfile.TemporaryDirectory(prefix="dalenius-serve-") as folder:
        app = importlib.import_module(FACTORY.partition(":")[0])
        app.prepare_workers(str(Path(folder) / "slots.lock"))
        uvicorn.run(FACTORY, workers=args.workers, **settings)
    return EXIT_OK
