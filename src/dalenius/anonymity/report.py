"""What an anonymisation did and what risk remains: the report that travels with every release."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from dalenius.anonymity.check import CheckReport


@dataclass(frozen=True)
class Report:
    """The report of one anonymisation.

    Attributes:
        algorithm: ``lattice`` (optimal full-domain generalisation) or ``mondrian-strict`` /
            ``mondrian-relaxed``.
        models: the privacy models, as text.
        rows_in: records in the input.
        rows_out: records released.
        suppressed: records suppressed (not released).
        suppression_limit: the largest share that could be suppressed.
        levels: for the lattice, the chosen level of each quasi-identifier (0 = as is).
        loss: every information-loss metric of the release (ncp, precision, entropy,
            discernibility, average class size).
        metric: the metric that was minimised.
        released: the privacy check of the released table (k, ℓ, t, … and risks).
        dropped: direct identifiers removed.
        nodes_evaluated: lattice nodes evaluated (of ``nodes_total``).
        seconds: wall-clock time of the search and release.
    """

    algorithm: str
    models: tuple[str, ...]
    rows_in: int
    rows_out: int
    suppressed: int
    suppression_limit: float
    levels: dict[str, int]
    loss: dict[str, float]
    metric: str
    released: CheckReport | None
    dropped: tuple[str, ...] = ()
    nodes_evaluated: int = 0
    nodes_total: int = 0
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready object."""
        out = asdict(self)
        out["released"] = self.released.to_dict() if self.released else None
        out["loss"] = {k: (None if math.isinf(v) else v) for k, v in self.loss.items()}
        return out

    def rows_for_display(self) -> list[tuple[str, str]]:
        """(item, value) pairs, in reading order."""
        out = [
            ("algorithm", self.algorithm),
            ("privacy models", "; ".join(self.models)),
            ("records in / released", f"{self.rows_in:,} / {self.rows_out:,}"),
            (
                "suppressed",
                f"{self.suppressed:,} ({self.suppressed / max(self.rows_in, 1):.2%}; limit "
                f"{self.suppression_limit:.2%})",
            ),
        ]
        if self.levels:
            out.append(
                ("generalisation levels", ", ".join(f"{k}={v}" for k, v in self.levels.items()))
            )
        if self.dropped:
            out.append(("identifiers dropped", ", ".join(self.dropped)))
        for name, value in self.loss.items():
            marker = " (minimised)" if name == self.metric else ""
            out.append((f"loss: {name}{marker}", f"{value:.6g}"))
        if self.nodes_total:
            out.append(
                ("lattice nodes evaluated", f"{self.nodes_evaluated:,} of {self.nodes_total:,}")
            )
        out.append(("seconds", f"{self.seconds:.2f}"))
        if self.released is not None:
            out += [(f"release: {k}", v) for k, v in self.released.rows_for_display()]
        out += [("note", n) for n in self.notes]
        return out

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{_esc(k)}</td><td style='text-align:left'>{_esc(v)}</td></tr>"
            for k, v in self.rows_for_display()
        )
        return (
            "<table><thead><tr><th>anonymisation</th><th></th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )

    def __str__(self) -> str:
        width = max(len(k) for k, _ in self.rows_for_display())
        return "\n".join(f"{k:<{width}}  {v}" for k, v in self.rows_for_display())


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
