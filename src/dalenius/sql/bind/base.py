"""What every part of the binder shares: the SQL text, the catalog, located errors, and a source.

A source is the relation built so far with the fields it exposes and its privacy unit; the
binder's floors (:mod:`.aggregates`, :mod:`.relations`, :mod:`.outputs`, :mod:`.statement`) pass
it between them and raise their refusals through :meth:`_Binder.error`, which locates them in the
SQL text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from sqlglot import exp

from dalenius.core.catalog import Catalog, PrivateBounds, Table
from dalenius.core.errors import PrivacyRefusal, QueryError
from dalenius.plan.derive import FieldInfo
from dalenius.plan.nodes import Field, Relation, UnitSpec
from dalenius.sql import bigquery, validate
from dalenius.sql.parse import span_of

MAX_UNIT_KEYS = 4
"""The most group keys, beside the unit, a per-unit subquery may GROUP BY."""


# -- sources under construction -----------------------------------------------------------------


@dataclass
class _Source:
    relation: Relation
    fields: list[Field]
    unit: UnitSpec | None  # None: public
    tables: list[Table] = field(default_factory=list)
    also_unit: frozenset[str] = frozenset()
    """Other field ids an inner join on the unit made equal to it (``o.custkey`` after
    ``l.custkey = o.custkey``): a later join on one of them is a join on the unit."""

    @property
    def private(self) -> bool:
        return self.unit is not None

    @property
    def unit_fields(self) -> frozenset[str]:
        """The unit's field and every field an inner join made equal to it."""
        if self.unit is None or self.unit.field is None:
            return self.also_unit
        return self.also_unit | {self.unit.field}


def _info(f: Field) -> FieldInfo:
    return FieldInfo(f.type, f.bounds, f.keys, f.nullable)


class _Binder:
    def __init__(self, sql: str, catalog: Catalog, extracted: bigquery.Extracted) -> None:
        self.sql = sql
        self.catalog = catalog
        self.extracted = extracted
        self.used_ids: set[str] = set()
        self.explicit_per_unit: dict[int, tuple[Fraction, Fraction]] = {}
        self.building: set[str] = set()
        self.private_bounds: dict[str, tuple[str, str, PrivateBounds]] = {}
        """Field ids of columns whose bounds are chosen privately and not settled yet."""

    # -- errors ---------------------------------------------------------------------------------

    def error(
        self,
        what: str,
        node: exp.Expr | None,
        *,
        clause: str,
        fix: str,
        why: str | None = None,
        privacy: bool = False,
    ) -> QueryError:
        cls = PrivacyRefusal if privacy else QueryError
        span = span_of(node, self.sql) if node is not None else None
        if span is None:
            span = validate.clause_span(self.sql, clause)
        return cls(what, clause=clause, sql=self.sql, span=span, why=why, fix=fix)
