"""The privacy unit: what Dalenius protects — one row, or every row that shares an id.

Neighbouring datasets differ by adding or removing one privacy unit; every sensitivity in the plan
is computed with respect to the unit the custodian declares in the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RowUnit:
    """Each row is one privacy unit (every person appears in at most one row)."""

    def describe(self) -> str:
        """One line for explain output."""
        return "one row"


@dataclass(frozen=True)
class IdUnit:
    """All rows sharing a value of ``column`` form one privacy unit (user-level privacy).

    The engine bounds each unit's contribution to at most ``max_rows`` rows in total and at most
    ``max_groups`` distinct groups of a GROUP BY, so sensitivities follow from the caps whatever the
    data hold.
    """

    column: str
    max_rows: int = 1
    max_groups: int = 1

    def describe(self) -> str:
        """One line for explain output."""
        return (
            f"all rows with the same {self.column} "
            f"(at most {self.max_rows} row{'s' if self.max_rows != 1 else ''} and "
            f"{self.max_groups} group{'s' if self.max_groups != 1 else ''} each)"
        )


PrivacyUnit = RowUnit | IdUnit
