"""``dalenius anonymize`` and ``dalenius anonymity check``: syntactic anonymity from the shell.

``anonymize`` reads a TOML config (data, attribute roles, models, hierarchies), shows a progress
bar over the generalisation lattice, prints the report as a table (``rich``) and writes the
release with ``--out``. ``anonymity check`` reports the models a table satisfies as it is, and its
re-identification risks. Both call :mod:`dalenius.anonymity` and add nothing to it. Every argument
is checked before any data is read; nothing is written unless the release satisfies the models.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dalenius.anonymity import check, load_config, risk
from dalenius.anonymity.anonymize import check_output_path
from dalenius.cli.common import EXIT_OK, emit_json
from dalenius.cli.render import progress
from dalenius.core.errors import ConfigurationError


def register(sub: Any) -> None:
    """Add the ``anonymize`` and ``anonymity`` sub-commands."""
    p = sub.add_parser(
        "anonymize",
        help="release a microdata file under k-anonymity, l-diversity, t-closeness ...",
        description=(
            "Generalise and suppress a table until every equivalence class satisfies the privacy "
            "models of the TOML config (optimal lattice search, or Mondrian), print the report and "
            "write the release. Identifiers are dropped; nothing is written if the models cannot "
            "be met within the suppression limit."
        ),
    )
    p.add_argument("config", help="the anonymisation config (TOML; see docs/anonymity/config.md)")
    p.add_argument(
        "--data", help="the input table (CSV or Parquet), overriding [data] of the config"
    )
    p.add_argument("--out", help="write the release here: release.parquet or release.csv")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--quiet", "--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_anonymize)

    group = sub.add_parser(
        "anonymity",
        help="check the privacy models and re-identification risk of a table",
        description="Syntactic-anonymity tools that read a table and write nothing.",
    )
    inner = group.add_subparsers(dest="anonymity_command", metavar="COMMAND")
    c = inner.add_parser(
        "check",
        help="report k, l, t, beta, delta and the re-identification risks of a table as it is",
        description=(
            "One GROUP BY over the quasi-identifiers in DuckDB; prints the largest k and l and the "
            "smallest t, beta, delta and alpha the table satisfies, and its prosecutor, journalist "
            "and marketer risks and population uniqueness."
        ),
    )
    c.add_argument("--data", help="the table (CSV or Parquet); default: [data] of --config")
    c.add_argument(
        "--config", help="take data, quasi-identifiers and sensitive columns from this config"
    )
    c.add_argument("--qi", help="comma-separated quasi-identifiers (overrides the config)")
    c.add_argument("--sensitive", help="comma-separated sensitive columns (overrides the config)")
    c.add_argument(
        "--population", help="a population table (CSV or Parquet) for the journalist risk"
    )
    c.add_argument(
        "--population-size", type=int, help="N, the population the table was sampled from (Zayatz)"
    )
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.set_defaults(func=run_check)
    group.set_defaults(func=lambda args: _help(group))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def run_anonymize(args: argparse.Namespace) -> int:
    """``dalenius anonymize``."""
    config = load_config(args.config)
    out = check_output_path(args.out) if args.out else None
    data = Path(args.data) if args.data else config.data
    if data is None:
        raise ConfigurationError(
            "no input table: the config has no [data] section and --data was not given.",
            fix="pass --data table.csv or add [data] path = ... to the config.",
        )
    quiet = args.quiet or args.json or config.algorithm != "lattice"
    with progress("searching the lattice", None, "nodes settled", enabled=not quiet) as update:
        release = config.release(data, progress=update)
    if out is not None:
        release.write(out)
    if args.json:
        payload = release.report.to_dict()
        payload["out"] = str(out) if out else None
        emit_json(payload)
    else:
        _table("anonymization report", release.report.rows_for_display())
        if out is not None:
            print(f"wrote {release.table.num_rows:,} records to {out}")
    return EXIT_OK


def run_check(args: argparse.Namespace) -> int:
    """``dalenius anonymity check``."""
    config = load_config(args.config) if args.config else None
    qis = _split(args.qi) if args.qi else (list(config.quasi_identifiers) if config else [])
    sens = (
        _split(args.sensitive)
        if args.sensitive is not None
        else (list(config.sensitive) if config else [])
    )
    if not qis:
        raise ConfigurationError(
            "no quasi-identifiers: pass --qi age,zip or --config with [attributes].",
            fix="dalenius anonymity check --data people.csv --qi sex,zip,date_of_birth",
        )
    data = Path(args.data) if args.data else (config.data if config else None)
    if data is None:
        raise ConfigurationError("no input table.", fix="pass --data table.csv (or --config).")
    if args.population_size is not None and args.population_size < 1:
        raise ConfigurationError("--population-size must be a positive integer.")
    # One GROUP BY per report: nothing to count, so an indeterminate bar with the time elapsed.
    with progress("checking", None, f"table {Path(data).name}", enabled=not args.json):
        report = check(data, qis, sens)
        risks = risk(
            data,
            qis,
            population=Path(args.population) if args.population else None,
            population_size=args.population_size,
        )
    if args.json:
        emit_json({"check": report.to_dict(), "risk": risks.to_dict()})
        return EXIT_OK
    _table("privacy models satisfied", report.rows_for_display())
    _table("re-identification risk", risks.rows_for_display())
    return EXIT_OK


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _table(title: str, rows: Sequence[tuple[str, str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column("item", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in rows:
        table.add_row(key, value)
    Console(file=sys.stdout, width=110).print(table)
