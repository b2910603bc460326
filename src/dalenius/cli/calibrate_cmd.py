"""``dalenius calibrate CATALOG``: measure constant-time deadlines and write them beside the catalog.

The custodian runs it once per catalog (and again after changing a row cap, a privacy unit, a
column or the engine version). It never reads the catalog's data: it builds adversarial tables of
the declared sizes (see :mod:`dalenius.engine.calibrate`), times every plan class on them and
writes the deadlines file the catalog names (``[dataset] deadlines``; by default
``<catalog>.deadlines.toml``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dalenius.cli.common import EXIT_OK, add_json_option, emit_json
from dalenius.core.catalog import load_catalog
from dalenius.core.deadlines import write_deadlines
from dalenius.engine.calibrate import calibrate, iter_lines


def register(sub: Any) -> None:
    """Add ``dalenius calibrate``."""
    parser = sub.add_parser(
        "calibrate",
        help="measure constant-time release deadlines on adversarial tables",
        description=(
            "Build adversarial tables of each table's declared max_row_count, time every plan "
            "class (scan, group_by, join, quantile) on them, and write the release deadlines "
            "(a high quantile of the worst case times a safety margin) to the catalog's "
            "deadlines file. Reads no real data."
        ),
    )
    parser.add_argument("catalog", help="the catalog TOML file")
    parser.add_argument(
        "--runs", type=int, default=200, help="measured releases per class and table (default 200)"
    )
    parser.add_argument(
        "--quantile",
        type=float,
        default=0.999,
        help="latency quantile of the worst table taken (default 0.999)",
    )
    parser.add_argument(
        "--margin", type=float, default=2.0, help="safety factor applied to it (default 2)"
    )
    parser.add_argument(
        "--output",
        default=None,
        metavar="FILE",
        help="where to write the deadlines (default: the file the catalog names)",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="do not show progress on standard error"
    )
    add_json_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Calibrate and write the deadlines file."""
    catalog = load_catalog(args.catalog)
    target = Path(args.output) if args.output else catalog.deadlines_path
    if target is None:
        target = Path(args.catalog).with_suffix(".deadlines.toml")
    last: dict[str, int] = {}

    def progress(label: str, done: int, total: int) -> None:
        step = max(1, total // 4)
        if done == total or done - last.get(label, 0) >= step:
            last[label] = done
            print(f"  {label}: {done}/{total}", file=sys.stderr, flush=True)

    deadlines, measured = calibrate(
        catalog,
        runs=args.runs,
        quantile=args.quantile,
        margin=args.margin,
        progress=None if args.quiet else progress,
    )
    write_deadlines(deadlines, target)
    if args.json:
        emit_json(
            {
                "deadlines_file": str(target),
                "deadlines_ms": deadlines.deadlines_ms,
                "measured_ms": deadlines.measured_ms,
                "engine": deadlines.engine,
                "runs": deadlines.runs,
                "quantile": deadlines.quantile,
                "margin": deadlines.margin,
            }
        )
        return EXIT_OK
    for line in iter_lines(measured, deadlines):
        print(line)
    print(f"wrote {target}")
    if not catalog.constant_time:
        print(
            "note: the catalog does not set constant_time = true; the deadlines are not used yet."
        )
    return EXIT_OK
