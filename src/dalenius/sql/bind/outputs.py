"""Binding what one aggregate query releases: GROUP BY keys, the select list, HAVING, ORDER BY.

Every output is post-processing of noisy aggregates and public keys; a bare column would release
row-level values, so each clause's expressions are checked to read only group keys and aggregates.
"""

from __future__ import annotations

import difflib
from dataclasses import replace

from sqlglot import exp

from dalenius.core.errors import QueryError
from dalenius.plan.derive import FieldInfo, key_conditions, keys_of, listed_keys, type_of
from dalenius.plan.expr import (
    AggRef,
    Expr,
    Func,
    KeyRef,
    aggregates_read,
    children,
    references,
    walk,
    with_children,
)
from dalenius.plan.functions import POST_FUNCTIONS
from dalenius.plan.nodes import (
    AggCall,
    Field,
    Filter,
    GroupKey,
    OrderItem,
    OutputColumn,
    SemiJoin,
    agg_ref,
    key_ref,
)
from dalenius.sql import aggregates
from dalenius.sql.aliases import expand_aliases
from dalenius.sql.bind.base import _info, _Source
from dalenius.sql.bind.relations import _Relations
from dalenius.sql.expressions import Converter, written_name
from dalenius.sql.parse import DEFAULT_DIALECT

MAX_GROUP_CELLS = 100_000
"""Most groups a GROUP BY with public keys may produce (the product of the key lists' sizes)."""


class _State:
    """Group keys, aggregates and outputs of one aggregate query, built clause by clause."""

    def __init__(self, planner: _Relations, source: _Source) -> None:
        self.p = planner
        self.source = source
        self.infos = {f.id: _info(f) for f in source.fields}
        # The WHERE every grouped row passed: keys it excludes form no group (derive.keys_of).
        top = source.relation
        while isinstance(top, SemiJoin):  # EXISTS / IN sit above the WHERE's filter
            top = top.child
        self.predicate = top.predicate if isinstance(top, Filter) else None
        self.where = key_conditions(self.predicate, self.infos)
        self.keys: list[GroupKey] = []
        self.key_nodes: list[exp.Expr] = []
        self.aggs: list[AggCall] = []
        self.outputs: list[OutputColumn] = []
        self.having_expr: Expr | None = None
        self.order: list[OrderItem] = []
        self.select_aliases: dict[str, exp.Expr] = {}
        self.converter = planner.converter(source)

    def error(self, *args: object, **kwargs: object) -> QueryError:
        return self.p.error(*args, **kwargs)  # type: ignore[arg-type]

    # -- GROUP BY ----------------------------------------------------------------------------------

    def group_by(self, tree: exp.Select) -> None:
        group = tree.args.get("group")
        select_items = list(tree.expressions)
        for item in select_items:
            if isinstance(item, exp.Alias):
                self.select_aliases[item.alias.lower()] = item.this
        if group is None:
            return
        cells = 1
        for item in group.expressions:
            node = item
            if isinstance(item, exp.Literal) and not item.is_string:
                position = int(item.this)
                if not 1 <= position <= len(select_items):
                    raise self.error(
                        f"GROUP BY {position} does not name a SELECT column.",
                        item,
                        clause="GROUP BY",
                        fix=f"use a position between 1 and {len(select_items)}, or a column name.",
                    )
                node = select_items[position - 1]
                node = node.this if isinstance(node, exp.Alias) else node
            elif self.is_select_alias(item):
                # A SELECT alias (a column of the same name would take precedence).
                node = self.select_aliases[item.name.lower()]
            if any(
                aggregates.recognise(n) is not None for n in node.walk() if isinstance(n, exp.Expr)
            ):
                raise self.error(
                    "GROUP BY cannot contain aggregates.",
                    item,
                    clause="GROUP BY",
                    fix="group by columns or expressions.",
                )
            expr = self.converter.convert(node, "GROUP BY")
            if any(k.expr == expr for k in self.keys):
                continue
            col_type = type_of(expr, self.infos)
            keys = keys_of(expr, self.infos, where=self.where)
            listed = (
                keys is None and (keys := listed_keys(expr, self.predicate, col_type)) is not None
            )
            name = self.key_name(node, tree)
            if keys is not None:
                cells *= len(keys)
                if cells > MAX_GROUP_CELLS:
                    raise self.error(
                        f"the GROUP BY would produce more than {MAX_GROUP_CELLS:,} groups.",
                        item,
                        clause="GROUP BY",
                        fix="group by fewer or coarser keys.",
                    )
            self.keys.append(
                GroupKey(name=name, expr=expr, type=col_type, keys=keys, listed=listed)
            )
            self.key_nodes.append(node)

    def is_select_alias(self, item: exp.Expr) -> bool:
        """Whether a GROUP BY item names a SELECT alias rather than a column."""
        if (
            not isinstance(item, exp.Column)
            or item.table
            or item.name.lower() not in self.select_aliases
        ):
            return False
        return not any(f.name.lower() == item.name.lower() for f in self.source.fields)

    def field_names(self) -> set[str]:
        """The queried relation's column names, lower-case (they take precedence over aliases)."""
        return {f.name.lower() for f in self.source.fields}

    def key_name(self, node: exp.Expr, tree: exp.Select) -> str:
        for item in tree.expressions:
            if isinstance(item, exp.Alias) and item.this == node:
                return item.alias
        if isinstance(node, exp.Column):
            return node.name
        return node.sql(dialect=DEFAULT_DIALECT)

    # -- aggregates and outputs -------------------------------------------------------------------

    def aggregate(self, node: exp.Expr, clause: str, *, hidden: bool) -> Expr:
        call = aggregates.recognise(node)
        if call is None:
            name = written_name(node)
            close = difflib.get_close_matches(name.upper(), aggregates.NAMES, n=3, cutoff=0.6)
            raise self.error(
                f"the aggregate {name} is not supported.",
                node,
                clause=clause,
                fix=(f"did you mean {' or '.join(close)}? " if close else "")
                + f"use one of {aggregates.SUPPORTED}.",
            )
        agg = self.p.agg_call(call, node, self.source, self.converter, clause)
        for i, existing in enumerate(self.aggs):
            if replace(existing, label="", hidden=False) == replace(agg, label="", hidden=False):
                if existing.hidden and not hidden:
                    self.aggs[i] = replace(existing, hidden=False)
                return AggRef.of(i)
        self.aggs.append(replace(agg, hidden=hidden))
        explicit = self.p.explicit_bounds(node)
        if explicit is not None:
            self.p.explicit_per_unit[len(self.aggs) - 1] = explicit
        return AggRef.of(len(self.aggs) - 1)

    def ref_infos(self) -> dict[str, FieldInfo]:
        infos = dict(self.infos)
        for i, key in enumerate(self.keys):
            infos[key_ref(i)] = FieldInfo(key.type, None, key.keys, True)
        for i, agg in enumerate(self.aggs):
            result = (
                "int"
                if agg.func in ("count", "count_distinct")
                or (agg.func in ("sum", "min", "max") and agg.arg_type == "int")
                else "float"
            )
            infos[agg_ref(i)] = FieldInfo(result, agg.bounds, None, True)
        return infos

    def post_expr(self, node: exp.Expr, clause: str, *, hidden: bool) -> Expr:
        """An output/HAVING/ORDER BY expression over group keys and aggregates."""
        expr = self.converter.convert(
            node, clause, aggregate=lambda n, c: self.aggregate(n, c, hidden=hidden)
        )
        expr = self.substitute_keys(expr)
        leftover = sorted({r.name for r in references(expr) if not isinstance(r, AggRef | KeyRef)})
        if leftover:
            field = next(f for f in self.source.fields if f.id == leftover[0])
            raise self.error(
                f"column {field.name!r} is neither aggregated nor in GROUP BY.",
                node,
                clause=clause,
                why="a bare column would release row-level values.",
                fix=_bare_column_fix(field),
                privacy=True,
            )
        self.check_post(expr, node, clause)
        return expr

    def substitute_keys(self, expr: Expr) -> Expr:
        for i, key in enumerate(self.keys):
            if expr == key.expr:
                return KeyRef.of(i)
        kids = children(expr)
        if not kids:
            return expr
        return with_children(expr, [self.substitute_keys(k) for k in kids])

    def check_post(self, expr: Expr, node: exp.Expr, clause: str) -> None:
        for sub in walk(expr):
            if isinstance(sub, Func) and sub.name not in POST_FUNCTIONS and aggregates_read(sub):
                raise self.error(
                    f"{sub.name} cannot be applied to an aggregate.",
                    node,
                    clause=clause,
                    fix=f"post-process with {', '.join(POST_FUNCTIONS)} or arithmetic.",
                )
        Converter(self.p.error, self.ref_infos(), lambda n, c: "").type_of(
            expr, node=node, clause=clause
        )

    def select_list(self, tree: exp.Select) -> None:
        names: set[str] = set()
        for raw in tree.expressions:
            node = raw.this if isinstance(raw, exp.Alias) else raw
            if isinstance(node, exp.Star) or (
                isinstance(node, exp.Column) and isinstance(node.this, exp.Star)
            ):
                raise self.error(
                    "SELECT * returns individual rows.",
                    node,
                    clause="SELECT",
                    why="Dalenius releases only noisy aggregates; row-level output would expose people.",
                    fix="select aggregates, e.g. SELECT COUNT(*) FROM ...",
                    privacy=True,
                )
            expr = self.post_expr(node, "SELECT", hidden=False)
            if isinstance(raw, exp.Alias):
                name = raw.alias
            elif isinstance(expr, KeyRef):
                name = self.keys[expr.index].name
            elif isinstance(expr, AggRef):
                name = _label(self.aggs[expr.index])
            else:
                name = node.sql(dialect=DEFAULT_DIALECT)
            base, n = name, 2
            while name.lower() in names:
                name, n = f"{base}_{n}", n + 1
            names.add(name.lower())
            self.outputs.append(OutputColumn(name=name, expr=expr))

    def having(self, tree: exp.Select) -> None:
        having = tree.args.get("having")
        if having is None:
            return
        node = expand_aliases(having.this, self.select_aliases, self.field_names())
        self.having_expr = self.post_expr(node, "HAVING", hidden=True)

    def order_by(self, tree: exp.Select) -> None:
        order = tree.args.get("order")
        if order is None:
            return
        for ordered in order.expressions:
            node = ordered.this
            expr: Expr | None = None
            if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
                position = int(node.this)
                if not 1 <= position <= len(self.outputs):
                    raise self.error(
                        f"ORDER BY {position} does not name an output column.",
                        node,
                        clause="ORDER BY",
                        fix=f"use a position between 1 and {len(self.outputs)}.",
                    )
                expr = self.outputs[position - 1].expr
            elif isinstance(node, exp.Column) and not node.table:
                match = next((o for o in self.outputs if o.name.lower() == node.name.lower()), None)
                if match is not None:
                    expr = match.expr
            if expr is None:
                node = expand_aliases(node, self.select_aliases, self.field_names())
                expr = self.post_expr(node, "ORDER BY", hidden=True)
            self.order.append(
                OrderItem(
                    expr=expr,
                    descending=bool(ordered.args.get("desc")),
                    nulls_first=bool(ordered.args.get("nulls_first")),
                )
            )


def _bare_column_fix(field: Field) -> str:
    """A rewrite that fits the column: average a bounded number, count or group anything else."""
    name = field.name
    if field.type in ("int", "float") and field.bounds is not None:
        return f"aggregate it, e.g. AVG({name}) or MEDIAN({name}), or add it to GROUP BY."
    if field.keys is not None:
        return f"add it to GROUP BY (its keys are public), or count it: COUNT({name})."
    return f"count it, e.g. COUNT({name}) or COUNT(DISTINCT {name}); listing its values is not possible."


def _label(agg: AggCall) -> str:
    return agg.label
