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
class Reach:
    """How a table's rows reach their unit through a key of another table (a foreign key).

    A row belongs to the unit of every row of ``table`` whose ``key`` equals the row's
    ``column`` (TPC-H's ``lineitem.l_orderkey`` → ``orders.o_orderkey``, whose ``o_custkey`` is
    the customer). The engine joins the unit in; the table need not store it. A row that
    reaches no such row belongs to no unit and is left out of every answer, as a row with a
    NULL id is; a row that reaches several is counted once for each of their units, under each
    one's caps (docs/privacy.md, "A unit reached through a key").
    """

    column: str
    table: str
    key: str
    unit: str = ""
    """The referenced table's own unit column (filled in when the catalog is checked)."""

    def describe(self) -> str:
        """``l_orderkey = orders.o_orderkey``."""
        return f"{self.column} = {self.table}.{self.key}"


def stored_name(table: str) -> str:
    """The name under which every engine holds ``table``'s rows as stored, converted, before the
    unit they reach through another table's key is joined in (:class:`Reach`): the exact SQL
    reads it where a join of its own supplies the unit (``dalenius.plan.nodes.ReachedUnit``).
    The ``__`` prefix keeps it apart from catalog tables' names.
    """
    return f"__stored_{table}"


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
    through: Reach | None = None
    """Set when ``column`` is not stored in the table but reached through a key: the column is
    then the referenced table's unit, joined in by the engine."""

    def describe(self) -> str:
        """One line for explain output."""
        reached = f", reached through {self.through.describe()}" if self.through else ""
        return (
            f"all rows with the same {self.column}{reached} "
            f"(at most {self.max_rows} row{'s' if self.max_rows != 1 else ''} and "
            f"{self.max_groups} group{'s' if self.max_groups != 1 else ''} each)"
        )


PrivacyUnit = RowUnit | IdUnit
