"""Binding one aggregate call: its refusals, its argument's bounds and their magnitude.

Split from the relations and the select list because an aggregate is checked the same way
wherever it appears: in the outer query's SELECT, HAVING or ORDER BY, and in a per-unit subquery.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from fractions import Fraction

from sqlglot import exp

from dalenius.core.catalog import PrivateBounds
from dalenius.core.errors import BoundsNotChosen
from dalenius.plan.derive import FieldInfo, bounds_of, type_of
from dalenius.plan.expr import BinOp, Case, Col, Expr, Func, Neg, columns
from dalenius.plan.nodes import AggCall
from dalenius.sql import aggregates, validate
from dalenius.sql.bind.base import _Binder, _Source
from dalenius.sql.expressions import Converter
from dalenius.sql.parse import DEFAULT_DIALECT, span_of


class _Aggregates(_Binder):
    """The aggregate calls of a query, each validated and bounded before any data is read."""

    def agg_call(
        self,
        call: aggregates.Call,
        node: exp.Expr,
        source: _Source,
        converter: Converter,
        clause: str,
    ) -> AggCall:
        """Validate one aggregate call and derive its argument's bounds.

        Long because each aggregate's rules (COUNT, DISTINCT, a numeric argument, explicit bounds,
        quantiles, magnitudes) are refusals with their own message and fix, checked in order on the
        same derived argument.
        """
        assert source.unit is not None
        label = node.sql(dialect=DEFAULT_DIALECT)
        infos = converter.fields
        arg: Expr | None = None
        arg_type = "int"
        if call.arg is not None:
            if any(
                aggregates.recognise(n) is not None
                for n in call.arg.walk()
                if isinstance(n, exp.Expr)
            ):
                raise self.error(
                    "aggregates cannot be nested.", node, clause=clause, fix="aggregate once."
                )
            arg = converter.convert(call.arg, clause)
            arg_type = type_of(arg, infos)
        if call.func == "count":
            if call.distinct:
                if arg is None:
                    raise self.error(
                        "COUNT(DISTINCT ...) takes one expression.",
                        node,
                        clause=clause,
                        fix="write COUNT(DISTINCT pid).",
                    )
                unit_field = source.unit.field
                return AggCall(
                    "count_distinct",
                    arg,
                    arg_type,
                    None,
                    None,
                    label,
                    distinct_unit=arg == Col(unit_field or ""),
                )
            return AggCall("count", arg, arg_type, None, None, label)
        if call.distinct:
            raise self.error(
                f"{call.name}(DISTINCT ...) is not supported.",
                node,
                clause=clause,
                fix=f"write {call.name}(x).",
            )
        assert arg is not None and call.arg is not None
        if arg_type not in ("int", "float"):
            raise self.error(
                f"{call.name} needs a numeric argument; {call.arg.sql()} is {arg_type}.",
                node,
                clause=clause,
                fix="aggregate a numeric column, or COUNT it.",
            )
        explicit = self.explicit_bounds(node)
        if explicit is not None and call.func in ("sum", "avg") and source.unit.kind == "id":
            # BigQuery semantics: these bound the per-unit total or average, not each value.
            explicit = None if bounds_of(arg, infos) is not None else explicit
        bounds = explicit or bounds_of(arg, infos)
        if bounds is None:
            unbounded = sorted(
                f.name
                for f in source.fields
                if f.id in columns(arg)
                and infos[f.id].bounds is None
                and infos[f.id].type != "bool"
            )
            self.check_private_bounds(arg, source, node, clause)
            names = ", ".join(repr(n) for n in unbounded) or "the expression"
            raise self.error(
                f"the bounds of {call.arg.sql()} cannot be derived ({names} has no public bounds).",
                node,
                clause=clause,
                why="an unbounded value lets one person move the answer arbitrarily far, so no noise level protects it.",
                fix="ask the custodian to declare bounds for "
                + (names if unbounded else "the columns")
                + " in the catalog, or aggregate a bounded expression.",
                privacy=True,
            )
        self.check_magnitude(arg, bounds, infos, node, clause)
        q: Fraction | None = None
        func = call.func
        if func == "quantile":
            q = aggregates.quantile_value(call.q)
            if q is None:
                raise self.error(
                    "the quantile must be a number between 0 and 1.",
                    node,
                    clause=clause,
                    fix="write QUANTILE(x, 0.5).",
                )
            if call.descending:
                q = 1 - q
        return AggCall(func, arg, arg_type, bounds, q, label)  # type: ignore[arg-type]

    def check_private_bounds(self, arg: Expr, source: _Source, node: exp.Expr, clause: str) -> None:
        """Refuse an aggregate whose columns' bounds are chosen privately and not settled yet.

        :class:`BoundsNotChosen` tells the session which bounds to choose before planning again;
        a choice that came out empty is a refusal of its own, with what to do about it.
        """
        read = columns(arg)
        found: dict[tuple[str, str], PrivateBounds] = {}
        for f in source.fields:
            if f.id not in read:
                continue
            entry = self.private_bounds.get(f.id) or next(
                (v for v in self.private_bounds.values() if v[1].lower() == f.name.lower()), None
            )
            if entry is not None:
                found[(entry[0], entry[1])] = entry[2]
        if not found:
            return
        empty = [f"{t}.{c}" for (t, c), p in found.items() if p.outcome == "empty"]
        if empty:
            raise self.error(
                f"the bounds of {', '.join(empty)} were chosen privately and came out empty.",
                node,
                clause=clause,
                why="no range of values held enough rows to stand out from the noise of the choice "
                "(a small table, or a small bounds_epsilon), so there is nothing to clip to.",
                fix="ask the custodian to declare bounds = [low, high] for the column, or a larger "
                "bounds_epsilon for the next data version.",
                privacy=True,
            )
        pending = tuple(found)
        costs = ", ".join(f"{t}.{c} (ε = {_num(p.epsilon)})" for (t, c), p in found.items())
        raise BoundsNotChosen(
            f"the clipping bounds of {costs} are chosen privately, and not yet.",
            columns=pending,
            clause=clause,
            sql=self.sql,
            span=span_of(node, self.sql),
            why='the custodian declared bounds = "private": the first query that needs them '
            "chooses them with a DP mechanism and is charged that ε once per data version.",
            fix="run the query (it chooses them first), or choose them alone with `dalenius "
            f"bounds --table {pending[0][0]} --column {pending[0][1]}`; explain shows the plan after.",
        )

    def check_magnitude(
        self,
        arg: Expr,
        bounds: tuple[Fraction, Fraction],
        infos: dict[str, FieldInfo] | Mapping[str, FieldInfo],
        node: exp.Expr,
        clause: str,
    ) -> None:
        """Refuse an aggregate whose values (or any part of them) may exceed MAX_MAGNITUDE."""
        # Products are where magnitudes explode (a chain of 60 incomes); sums grow only linearly
        # in the (bounded) query size. Checking only them keeps this linear in the query.
        products = (s for s in _value_path(arg) if isinstance(s, BinOp) and s.op in ("*", "/"))
        parts = itertools.chain([bounds], (bounds_of(sub, infos) for sub in products))
        for part in parts:  # the whole expression first: most refusals stop there
            widest = max(abs(part[0]), abs(part[1])) if part is not None else Fraction(0)
            if widest > validate.MAX_MAGNITUDE:
                break
        else:
            return
        if widest > validate.MAX_MAGNITUDE:
            raise self.error(
                f"the values aggregated may reach {_magnitude(widest)}, beyond the largest "
                f"accepted ({float(validate.MAX_MAGNITUDE):.0e}).",
                node,
                clause=clause,
                why="such values cannot be summed exactly, or overflow the engine's numbers.",
                fix="aggregate a smaller expression, or pass tighter contribution bounds.",
            )

    def explicit_bounds(self, node: exp.Expr) -> tuple[Fraction, Fraction] | None:
        """``contribution_bounds_per_group`` written on this aggregate call, if any."""
        start = node.meta.get("start")
        return self.extracted.bounds.get(start) if isinstance(start, int) else None


def _magnitude(x: Fraction) -> str:
    """``1.2e+57`` for any size (``float`` overflows beyond 1.8e308)."""
    whole = int(abs(x))
    if whole < 10**300:
        return f"{float(x):.3g}"
    return f"about 1e+{len(str(whole)) - 1}"


def _value_path(expr: Expr) -> list[Expr]:
    """The sub-expressions whose values become the aggregated value: arithmetic, function
    arguments and CASE results, but not conditions (a comparison yields a truth value, whatever
    the magnitudes inside it, and the engine evaluates it in doubles without failing).
    """
    out = [expr]
    match expr:
        case BinOp(op=op, left=left, right=right) if op in ("+", "-", "*", "/", "%"):
            out += _value_path(left) + _value_path(right)
        case Func(args=args):
            for a in args:
                out += _value_path(a)
        case Neg(operand=operand):
            out += _value_path(operand)
        case Case(whens=whens, default=default):
            for _, value in whens:
                out += _value_path(value)
            if default is not None:
                out += _value_path(default)
    return out


def _num(value: Fraction) -> str:
    """A loss as the catalog writes it (``1/20`` as ``0.05``)."""
    return f"{float(value):g}"
