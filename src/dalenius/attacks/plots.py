"""PNG plots of attack measurements (matplotlib, from the ``plot`` extra).

:func:`pyplot` imports matplotlib with a file-only backend or refuses with the pip command that
installs it, so a command given ``--plot`` fails before the run, not after.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dalenius.attacks.report import Rate, best_test_bound
from dalenius.core.errors import MissingExtraError


def pyplot() -> Any:
    """``matplotlib.pyplot`` with the Agg backend, or :class:`MissingExtraError`."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingExtraError("matplotlib", "plot", "Plotting an attack") from None
    return plt


def save(fig: Any, path: Path) -> Path:
    """Write ``fig`` as a PNG (small: 110 dpi) and close it."""
    plt = pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


COLOURS = {"raw": "#c0392b", "naive": "#e67e22", "dalenius": "#2471a3", "bound": "#222f3e"}
"""One colour per target kind, the same in every plot."""


def plot_success(
    points: Sequence[tuple[float, Rate]],
    path: Path,
    *,
    title: str,
    ylabel: str,
    confidence: float = 0.95,
) -> Path:
    """Measured success against Dalenius per ε with its interval, beside ``e^ε/(1+e^ε)``."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    top = max(e for e, _ in points)
    grid = [top * 1.03 * i / 200 for i in range(201)]
    ax.plot(
        grid,
        [best_test_bound(e) for e in grid],
        color=COLOURS["bound"],
        label="DP bound e^ε/(1+e^ε)",
    )
    ax.axhline(0.5, color="#999999", linestyle=":", label="coin flip")
    ax.axhline(1.0, color=COLOURS["raw"], linestyle="--", label="raw SQL (measured: always right)")
    intervals = [r.interval(confidence) for _, r in points]
    ax.errorbar(
        [e for e, _ in points],
        [r.estimate for _, r in points],
        yerr=[
            [r.estimate - lo for (_, r), (lo, _) in zip(points, intervals, strict=True)],
            [hi - r.estimate for (_, r), (_, hi) in zip(points, intervals, strict=True)],
        ],
        fmt="o",
        color=COLOURS["dalenius"],
        capsize=3,
        label=f"measured vs Dalenius ({round(confidence * 100)}% CI, {points[0][1].trials} trials)",
    )
    ax.set_xlabel("ε (the attacker's whole budget)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(0.4, 1.04)
    ax.set_xlim(0, top * 1.03)
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, 0.94), fontsize=8)
    return save(fig, path)
