"""The custodian's policy, checked in the one spending sequence for every front end.

A policy is what a dataset allows per release beyond the budget: an ε floor (the noise at a
smaller ε swamps any answer, and some mechanisms' work grows with 1/ε), the largest loss part
accepted (a loss that large gives no privacy, and numbers that large overflow), and how many
releases one analyst may have running at once in this process. It is checked by
:meth:`dalenius.engine.session.Session.spend` after the plan is built and before anything is
reserved, for a query, each query of a batch and every release product alike, whether the request
came from Python, the CLI, HTTP or a wire protocol; a refusal costs nothing and leaves an audit
line. ``explain`` applies the same floor, so what explain accepts a query accepts too.

The floor comes from the catalog (``[dataset] min_epsilon``); the gateway raises it with its own
floor and the curator's per-dataset floor (:meth:`Policy.raised`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Final

from dalenius.core.catalog import Catalog
from dalenius.core.errors import InvalidLossError, UserError
from dalenius.core.loss import Loss

LARGEST_LOSS: Final = Fraction(10**6)
"""No part of a loss (ε, δ or ρ) above this is accepted, by any front end."""


class PolicyRefusal(InvalidLossError):
    """A loss the dataset's policy refuses (below the ε floor, or beyond the accepted range)."""


class BusyRefusal(UserError):
    """The analyst already has as many releases running as the policy allows."""

    code = "too_many_running"


@dataclass(frozen=True)
class Policy:
    """What one dataset allows per release.

    Attributes:
        min_epsilon: the ε floor of one release (0: none).
        largest: the largest ε, δ or ρ accepted.
        max_running: the most releases one analyst may have running at once in this process
            (``None``: no limit; the gateway admits requests with its own per-principal slots,
            shared by its worker processes, before they reach a session).
    """

    min_epsilon: Fraction = Fraction(0)
    largest: Fraction = LARGEST_LOSS
    max_running: int | None = None
    _running: dict[tuple[str, str], int] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )
    _lock: threading.Lock = field(
        default_factory=threading.Lock, compare=False, repr=False, hash=False
    )

    @staticmethod
    def of(catalog: Catalog) -> Policy:
        """The policy the catalog declares (its ``min_epsilon``, if any)."""
        return Policy(min_epsilon=catalog.min_epsilon or Fraction(0))

    def raised(self, floor: Fraction | None) -> Policy:
        """The policy with its ε floor raised to ``floor`` (never lowered)."""
        if floor is None or floor <= self.min_epsilon:
            return self
        return replace(self, min_epsilon=floor, _running={}, _lock=threading.Lock())

    def check(self, loss: Loss) -> None:
        """Refuse a loss below the ε floor or beyond the accepted range (nothing is spent).

        Example:
            >>> from dalenius.core.loss import PureDP
            >>> Policy(min_epsilon=Fraction(1, 100)).check(PureDP(Fraction(1, 1000)))
            Traceback (most recent call last):
            ...
            dalenius.engine.policy.PolicyRefusal: epsilon 0.001 is below this dataset's floor of 0.01 per release.
            Why: the noise at a smaller epsilon swamps any answer, and some mechanisms' work grows with 1/epsilon.
            Fix: spend at least epsilon = 0.01 (the custodian sets the floor).
        """
        parts = [getattr(loss, part, None) for part in ("epsilon", "delta", "rho")]
        if all(not value for value in parts):
            # A release that spends nothing: a later publication of a continual series, whose
            # privacy map proves it covered by the lifetime loss its first publication was
            # charged (and checked here). The floor is about what one release spends.
            return
        epsilon = getattr(loss, "epsilon", None)
        if isinstance(epsilon, Fraction) and epsilon < self.min_epsilon:
            raise PolicyRefusal(
                f"epsilon {float(epsilon):g} is below this dataset's floor of "
                f"{float(self.min_epsilon):g} per release.",
                why="the noise at a smaller epsilon swamps any answer, and some mechanisms' "
                "work grows with 1/epsilon.",
                fix=f"spend at least epsilon = {float(self.min_epsilon):g} (the custodian sets "
                "the floor).",
            )
        rho = getattr(loss, "rho", None)
        if isinstance(rho, Fraction) and rho < self.min_epsilon**2 / 2:
            # A zCDP release meets the floor when it spends at least what ε costs: ρ = ε²/2.
            raise PolicyRefusal(
                f"rho {float(rho):g} is below this dataset's floor of "
                f"{float(self.min_epsilon**2 / 2):g} per release (epsilon "
                f"{float(self.min_epsilon):g}, which costs rho = epsilon²/2).",
                why="the noise at a smaller loss swamps any answer, and some mechanisms' "
                "work grows with 1/epsilon.",
                fix=f"spend at least epsilon = {float(self.min_epsilon):g} (the custodian sets "
                "the floor).",
            )
        for part in ("epsilon", "delta", "rho"):
            value = getattr(loss, part, None)
            if isinstance(value, Fraction) and value > self.largest:
                raise PolicyRefusal(
                    f"{part} {float(value):.3g} is larger than this dataset accepts "
                    f"({float(self.largest):g}).",
                    why="a loss that large gives no privacy, and numbers that large overflow.",
                    fix=f"spend a {part} of at most {float(self.largest):g}.",
                )

    @contextmanager
    def running(self, analyst: str, dataset: str) -> Iterator[None]:
        """Hold one of ``analyst``'s running slots on ``dataset`` for the block.

        Raises:
            BusyRefusal: the analyst already has ``max_running`` releases running.
        """
        if self.max_running is None:
            yield
            return
        key = (analyst, dataset)
        with self._lock:
            if self._running.get(key, 0) >= self.max_running:
                raise BusyRefusal(
                    f"analyst {analyst!r} already has {self.max_running} release(s) running on "
                    f"{dataset!r}.",
                    why="the dataset's policy limits how many releases one analyst runs at once.",
                    fix="wait for a running release to finish, then ask again.",
                )
            self._running[key] = self._running.get(key, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._running[key] -= 1
