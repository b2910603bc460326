"""``dalenius density``: release a column's kernel density curve (or a two-column surface)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dalenius.cli.common import (
    EXIT_OK,
    add_json_option,
    add_ledger_options,
    add_release_options,
    emit_json,
    release_session,
)
from dalenius.core.errors import ConfigurationError


def register(sub: Any) -> None:
    """Add the ``density`` sub-command."""
    parser = sub.add_parser(
        "density",
        help="release the density curve of a numeric column (Gaussian-process mechanism)",
        description=(
            "Release the kernel density estimate of one numeric column (or the surface of two) on "
            "a grid over the columns' public bounds, with pointwise and simultaneous bands, "
            "charged to the analyst's budget. Needs --epsilon and --delta on an (ε, δ) dataset, "
            "--rho on a zCDP one. Example:\n"
            "  dalenius density --catalog census.toml --table people --column age "
            "--bandwidth 2 --epsilon 0.5 --delta 1e-6 --png age.png"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--catalog", required=True, help="the custodian's catalog TOML file")
    parser.add_argument("--table", required=True, help="the private table")
    parser.add_argument(
        "--column",
        action="append",
        required=True,
        help="a numeric column with public bounds; give it twice for a 2-D surface",
    )
    parser.add_argument(
        "--bandwidth",
        type=float,
        required=True,
        help="the kernel's bandwidth, in the column's units",
    )
    parser.add_argument(
        "--points",
        type=int,
        default=None,
        help="grid points per axis (default 200; 40 for a surface)",
    )
    parser.add_argument("--where", default=None, help="an SQL filter on the table's rows")
    add_release_options(
        parser,
        epsilon="ε to spend (with --delta)",
        delta="δ to spend (the noise is Gaussian: pure ε is impossible)",
        confidence="bands",
    )
    parser.add_argument(
        "--csv", default=None, metavar="FILE", help="also write the curve and its bands as CSV"
    )
    parser.add_argument(
        "--png",
        default=None,
        metavar="FILE",
        help="also draw the curve with its bands (needs matplotlib: pip install 'dalenius[plot]')",
    )
    add_ledger_options(parser)
    add_json_option(parser)
    parser.set_defaults(func=run_density)


def run_density(args: argparse.Namespace) -> int:
    """Run ``dalenius density``."""
    if args.png is not None:
        _require_matplotlib()
    with release_session(args) as session:
        result = session.density(
            args.table,
            args.column,
            bandwidth=args.bandwidth,
            epsilon=args.epsilon,
            delta=args.delta,
            rho=args.rho,
            points=args.points,
            where=args.where,
        )
    if args.csv:
        result.to_pandas().to_csv(args.csv, index=False)
    if args.png:
        plot_density(result.release, Path(args.png))
    if args.json:
        emit_json(result.to_dict())
    else:
        print(result)
        for path in (args.csv, args.png):
            if path:
                print(f"Wrote {path}")
    return EXIT_OK


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            "--png needs matplotlib, which is not installed.",
            fix="pip install 'dalenius[plot]' (or pip install matplotlib).",
        ) from exc


def plot_density(release: Any, path: Path) -> None:
    """Draw a released curve with its pointwise and simultaneous bands (or a surface as a heat map)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    if len(release.columns) == 1:
        x = release.grid[0]
        ax.fill_between(
            x, release.band_low, release.band_high, color="#c6dbef", label="simultaneous band"
        )
        ax.fill_between(x, release.low, release.high, color="#6baed6", label="pointwise band")
        ax.plot(x, release.density, color="#08306b", lw=1.5, label="released density")
        ax.set_xlabel(release.columns[0])
        ax.set_ylabel("density")
        ax.legend(frameon=False)
    else:
        mesh = ax.pcolormesh(
            release.grid[0], release.grid[1], release.density.T, shading="auto", cmap="Blues"
        )
        fig.colorbar(mesh, ax=ax, label="density")
        ax.set_xlabel(release.columns[0])
        ax.set_ylabel(release.columns[1])
    ax.set_title(f"Private density ({release.loss}), {round(release.confidence * 100)}% bands")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
