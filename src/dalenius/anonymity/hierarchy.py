"""Generalisation hierarchies: how a quasi-identifier's values are coarsened, level by level.

A hierarchy maps each value of one column to a label at every level: level 0 is the value itself,
each higher level is coarser, and the top level is ``*`` (the attribute withheld). The custodian
declares hierarchies in Python or in TOML (see :mod:`dalenius.anonymity.config`):

- :meth:`Hierarchy.tree` — an explicit value tree (``Never-married → Not married → *``);
- :meth:`Hierarchy.intervals` — numeric intervals of growing width, with optional top and bottom
  coding (the course's ``LEAST((age/10)*10, 60)`` is ``intervals([10], top=60)``);
- :meth:`Hierarchy.dates` — day → month → year (→ decade);
- :meth:`Hierarchy.mask` — masking the trailing characters of codes (``13053 → 1305* → 130** → *``);
- :meth:`Hierarchy.ordered` — groups of consecutive ordered categories.

A hierarchy is applied to the distinct values a table actually holds (:meth:`Hierarchy.apply`).
It is validated there: every value must be covered and levels must be monotone (two values with
the same label at one level share their label at every higher level), so generalising never
separates what a lower level had merged. Errors name the file, the column and the value.
"""

from __future__ import annotations

import datetime
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dalenius.core.errors import UserError

TOP = "*"
"""The label of the top level: the attribute is withheld."""

MISSING_KEY = ""
"""In an explicit tree, the key that stands for a missing value (SQL NULL)."""


class HierarchyError(UserError):
    """A generalisation hierarchy that is malformed or does not cover the data.

    The message names the file (when the hierarchy came from one), the column and the value.
    """

    code = "hierarchy_error"

    def __init__(
        self,
        what: str,
        *,
        column: str | None = None,
        value: object = None,
        file: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.file = file
        self.column = column
        self.value = value
        where = []
        if file:
            where.append(f"file {file}")
        if column:
            where.append(f"column {column!r}")
        if value is not None:
            where.append(f"value {value!r}")
        prefix = f"Hierarchy error in {', '.join(where)}: " if where else "Hierarchy error: "
        super().__init__(prefix + what, fix=fix)


Labeller = Callable[[Any], tuple[str, ...]]


@dataclass(frozen=True)
class Levels:
    """A hierarchy applied to the distinct values of one column.

    Attributes:
        column: the column's name.
        values: the distinct values (sorted; ``None`` last), level 0.
        labels: ``labels[l][i]`` is the label of ``values[i]`` at level ``l`` (level 0 is ``str``
            of the value; the release keeps the original value there).
        codes: ``codes[l][i]`` is a dense integer code of ``labels[l][i]`` within level ``l``.
        spans: ``spans[l][i]`` in [0, 1]: the share of the column's domain the label covers
            (NCP, Iyengar 2002): numeric — the covered range over the whole range; otherwise the
            covered distinct values minus one over all distinct values minus one.
        numeric: whether the column's values are numbers (spans are then ranges).
    """

    column: str
    values: tuple[Any, ...]
    labels: tuple[tuple[str, ...], ...]
    codes: tuple[tuple[int, ...], ...]
    spans: tuple[tuple[float, ...], ...]
    numeric: bool

    @property
    def height(self) -> int:
        """The highest level (levels run 0..height)."""
        return len(self.labels) - 1

    def label_to_values(self, level: int) -> dict[str, list[Any]]:
        """The original values under each label of ``level``."""
        out: dict[str, list[Any]] = {}
        for value, label in zip(self.values, self.labels[level], strict=True):
            out.setdefault(label, []).append(value)
        return out


@dataclass(frozen=True)
class Hierarchy:
    """How one column is generalised; build one with the class methods.

    Attributes:
        kind: ``tree``, ``intervals``, ``dates``, ``mask``, ``ordered`` or ``identity``.
        depth: the number of levels above level 0, the top ``*`` level included.
        spec: the parameters, as declared (shown in reports).
    """

    kind: str
    depth: int
    spec: Mapping[str, Any]
    labeller: Labeller = field(repr=False, compare=False)
    source: str | None = field(default=None, compare=False)

    # -- builders ------------------------------------------------------------------------------

    @classmethod
    def tree(cls, mapping: Mapping[str, Sequence[str]]) -> Hierarchy:
        """An explicit tree: each value's labels from level 1 up (a final ``*`` is added).

        Keys are the values as text (``"13"`` for the number 13); the key ``""`` stands for a
        missing value.

        Example:
            >>> h = Hierarchy.tree({"Never-married": ["Not married"], "Divorced": ["Not married"],
            ...                     "Married-civ-spouse": ["Married"]})
            >>> h.labeller("Divorced")
            ('Not married', '*')
        """
        if not mapping:
            raise HierarchyError("an explicit tree needs at least one value.")
        lengths = {len(v) for v in mapping.values()}
        if len(lengths) != 1:
            raise HierarchyError(
                f"every value of a tree needs the same number of levels; got {sorted(lengths)}.",
                fix="give each value one label per level, e.g. value = ['group', 'supergroup'].",
            )
        table: dict[str, tuple[str, ...]] = {}
        for key, labels in mapping.items():
            chain = tuple(str(x) for x in labels)
            if not chain or chain[-1] != TOP:
                chain = (*chain, TOP)
            table[str(key)] = chain
        depth = len(next(iter(table.values())))

        def label(value: Any) -> tuple[str, ...]:
            key = MISSING_KEY if value is None else _text(value)
            chain = table.get(key)
            if chain is None:
                raise HierarchyError(
                    "the value is not in the tree.",
                    value=key if value is not None else "(missing)",
                    fix=(
                        f"add {key!r} to the hierarchy's values."
                        if value is not None
                        else 'add the key "" (it stands for missing values) to the values.'
                    ),
                )
            return chain

        return cls("tree", depth, {"values": len(table)}, label)

    @classmethod
    def intervals(
        cls,
        widths: Sequence[float],
        *,
        top: float | None = None,
        bottom: float | None = None,
        origin: float = 0,
    ) -> Hierarchy:
        """Numeric intervals ``[lo, lo + width)`` of growing widths, then ``*``.

        Each width must be a multiple of the one before, so intervals nest. ``top`` codes every
        value at or above it as ``>=top`` (the course's ``LEAST((age/10)*10, 60)``); ``bottom``
        codes values below it as ``<bottom``.

        Example:
            >>> Hierarchy.intervals([10, 20], top=60).labeller(37)
            ('[30, 40)', '[20, 40)', '*')
            >>> Hierarchy.intervals([10], top=60).labeller(75)
            ('>=60', '*')
        """
        ws = [float(w) for w in widths]
        if not ws or any(not math.isfinite(w) or w <= 0 for w in ws):
            raise HierarchyError(
                f"interval widths must be positive numbers; got {list(widths)}.",
                fix="write widths = [5, 10, 20].",
            )
        for a, b in itertools.pairwise(ws):
            ratio = b / a
            if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
                raise HierarchyError(
                    f"interval width {_num(b)} is not a multiple of {_num(a)}, so the intervals "
                    "of one level would not nest inside the next.",
                    fix="use widths that divide each other, e.g. [5, 10, 20].",
                )
        if top is not None and bottom is not None and bottom >= top:
            raise HierarchyError(
                f"bottom coding ({_num(bottom)}) must be below top coding ({_num(top)})."
            )

        def label(value: Any) -> tuple[str, ...]:
            if value is None:
                return (*(["(missing)"] * len(ws)), TOP)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise HierarchyError(
                    "an interval hierarchy needs numbers.",
                    value=value,
                    fix="use a tree, mask or ordered hierarchy for text values.",
                )
            x = float(value)
            out = []
            for w in ws:
                if top is not None and x >= top:
                    out.append(f">={_num(top)}")
                elif bottom is not None and x < bottom:
                    out.append(f"<{_num(bottom)}")
                else:
                    lo = math.floor((x - origin) / w) * w + origin
                    out.append(f"[{_num(lo)}, {_num(lo + w)})")
            return (*out, TOP)

        spec = {"widths": ws, "top": top, "bottom": bottom, "origin": origin}
        return cls("intervals", len(ws) + 1, spec, label)

    @classmethod
    def dates(cls, levels: Sequence[str] = ("month", "year")) -> Hierarchy:
        """Dates generalised to ``month`` (``2018-05``), ``year`` (``2018``), ``decade``, then ``*``.

        Example:
            >>> import datetime
            >>> Hierarchy.dates().labeller(datetime.date(2018, 5, 11))
            ('2018-05', '2018', '*')
        """
        order = ("month", "year", "decade")
        chosen = list(levels)
        if not chosen or any(x not in order for x in chosen):
            raise HierarchyError(
                f"date levels must be taken from {list(order)}; got {chosen}.",
                fix='write levels = ["month", "year"].',
            )
        if [order.index(x) for x in chosen] != sorted(order.index(x) for x in chosen) or len(
            set(chosen)
        ) != len(chosen):
            raise HierarchyError(
                f"date levels must go from fine to coarse without repeats; got {chosen}.",
                fix='write levels = ["month", "year", "decade"].',
            )

        def label(value: Any) -> tuple[str, ...]:
            if value is None:
                return (*(["(missing)"] * len(chosen)), TOP)
            day = _as_date(value)
            out = []
            for level in chosen:
                if level == "month":
                    out.append(f"{day.year:04d}-{day.month:02d}")
                elif level == "year":
                    out.append(f"{day.year:04d}")
                else:
                    out.append(f"{day.year // 10 * 10:04d}s")
            return (*out, TOP)

        return cls("dates", len(chosen) + 1, {"levels": chosen}, label)

    @classmethod
    def mask(cls, masked: Sequence[int] = (1, 2), *, char: str = "*") -> Hierarchy:
        """Codes with their last ``masked[l]`` characters replaced by ``*``, then ``*``.

        Example:
            >>> Hierarchy.mask([1, 2]).labeller("13053")
            ('1305*', '130**', '*')
        """
        steps = list(masked)
        if (
            not steps
            or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in steps)
            or steps != sorted(set(steps))
        ):
            raise HierarchyError(
                f"masked character counts must be increasing positive integers; got {steps}.",
                fix="write masked = [1, 2] (1305*, then 130**).",
            )

        def label(value: Any) -> tuple[str, ...]:
            if value is None:
                return (*(["(missing)"] * len(steps)), TOP)
            text = _text(value)
            out = []
            for s in steps:
                keep = max(len(text) - s, 0)
                out.append(text[:keep] + char * (len(text) - keep))
            return (*out, TOP)

        return cls("mask", len(steps) + 1, {"masked": steps}, label)

    @classmethod
    def ordered(cls, order: Sequence[str], sizes: Sequence[int]) -> Hierarchy:
        """Ordered categories grouped ``sizes[l]`` consecutive at a time, then ``*``.

        Each size must be a multiple of the one before. A group is labelled ``first..last``.

        Example:
            >>> h = Hierarchy.ordered(["low", "mid", "high", "top"], [2])
            >>> h.labeller("mid")
            ('low..mid', '*')
        """
        names = [str(x) for x in order]
        if len(set(names)) != len(names) or not names:
            raise HierarchyError("the order must list each category once.")
        ss = list(sizes)
        if not ss or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in ss):
            raise HierarchyError(
                f"group sizes must be positive integers; got {ss}.", fix="write sizes = [2, 4]."
            )
        for a, b in itertools.pairwise(ss):
            if b % a:
                raise HierarchyError(
                    f"group size {b} is not a multiple of {a}, so groups would not nest.",
                    fix="use sizes that divide each other, e.g. [2, 4].",
                )
        position = {name: i for i, name in enumerate(names)}

        def label(value: Any) -> tuple[str, ...]:
            key = MISSING_KEY if value is None else _text(value)
            if key not in position:
                raise HierarchyError(
                    "the value is not in the declared order.",
                    value=key if value is not None else "(missing)",
                    fix="add it to the order list.",
                )
            i = position[key]
            out = []
            for s in ss:
                lo = i // s * s
                hi = min(lo + s, len(names)) - 1
                out.append(names[lo] if lo == hi else f"{names[lo]}..{names[hi]}")
            return (*out, TOP)

        return cls("ordered", len(ss) + 1, {"order": names, "sizes": ss}, label)

    @classmethod
    def identity(cls) -> Hierarchy:
        """No generalisation but withholding: level 0 is the value, level 1 is ``*``."""
        return cls("identity", 1, {}, lambda value: (TOP,))

    def located(self, source: str) -> Hierarchy:
        """The same hierarchy, remembering the file it was declared in (for error messages)."""
        return Hierarchy(self.kind, self.depth, self.spec, self.labeller, source)

    # -- application ---------------------------------------------------------------------------

    def apply(self, column: str, values: Sequence[Any]) -> Levels:
        """Apply the hierarchy to a column's distinct ``values`` and validate it.

        Raises:
            HierarchyError: naming the file, column and value when a value is not covered, a
                value gets the wrong number of levels, or the levels are not monotone.
        """
        distinct = _sorted_distinct(values)
        chains = []
        for value in distinct:
            try:
                chain = self.labeller(value)
            except HierarchyError as exc:
                raise HierarchyError(
                    exc.what.split(": ", 1)[-1],
                    column=column,
                    value=exc.value if exc.value is not None else value,
                    file=self.source,
                    fix=exc.fix,
                ) from None
            if len(chain) != self.depth:
                raise HierarchyError(
                    f"the value has {len(chain)} levels where the hierarchy has {self.depth}.",
                    column=column,
                    value=value,
                    file=self.source,
                )
            chains.append(chain)
        labels = [tuple("(missing)" if v is None else _text(v) for v in distinct)]
        for level in range(self.depth):
            labels.append(tuple(c[level] for c in chains))
        _check_monotone(column, distinct, labels, self.source)
        numeric = bool(distinct) and all(
            isinstance(v, int | float) and not isinstance(v, bool)
            for v in distinct
            if v is not None
        )
        return _levels(column, distinct, labels, numeric)


def _check_monotone(
    column: str, values: Sequence[Any], labels: Sequence[tuple[str, ...]], source: str | None
) -> None:
    for level in range(1, len(labels) - 1):
        parent: dict[str, tuple[str, Any]] = {}
        for i, label in enumerate(labels[level]):
            up = labels[level + 1][i]
            seen = parent.setdefault(label, (up, values[i]))
            if seen[0] != up:
                raise HierarchyError(
                    f"levels are not monotone: label {label!r} at level {level} goes to "
                    f"{seen[0]!r} (for {seen[1]!r}) and to {up!r} at level {level + 1}.",
                    column=column,
                    value=values[i],
                    file=source,
                    fix="give every value under one label the same label at the next level.",
                )


def _levels(
    column: str, values: Sequence[Any], labels: Sequence[tuple[str, ...]], numeric: bool
) -> Levels:
    codes = []
    spans = []
    numbers = [float(v) for v in values if v is not None] if numeric else []
    full = (max(numbers) - min(numbers)) if numbers else 0.0
    n_distinct = len(values)
    for level, row in enumerate(labels):
        index: dict[str, int] = {}
        codes.append(tuple(index.setdefault(x, len(index)) for x in row))
        groups: dict[str, list[Any]] = {}
        for value, label in zip(values, row, strict=True):
            groups.setdefault(label, []).append(value)
        span_of: dict[str, float] = {}
        for label, members in groups.items():
            if level == 0:
                span_of[label] = 0.0
            elif label == TOP:
                span_of[label] = 1.0
            elif numeric and full > 0:
                nums = [float(v) for v in members if v is not None]
                span_of[label] = (max(nums) - min(nums)) / full if nums else 0.0
            else:
                span_of[label] = (len(members) - 1) / (n_distinct - 1) if n_distinct > 1 else 0.0
        spans.append(tuple(span_of[x] for x in row))
    return Levels(column, tuple(values), tuple(labels), tuple(codes), tuple(spans), numeric)


def _sorted_distinct(values: Sequence[Any]) -> list[Any]:
    present = {v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))}
    has_missing = len(present) < len(set(values)) or any(v is None for v in values)
    try:
        ordered = sorted(present)
    except TypeError:
        ordered = sorted(present, key=str)
    return [*ordered, None] if has_missing else ordered


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    return str(value)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _as_date(value: Any) -> datetime.date:
    if isinstance(value, datetime.date):
        return value
    try:
        return datetime.date.fromisoformat(str(value)[:10])
    except ValueError:
        raise HierarchyError(
            "a date hierarchy needs dates (YYYY-MM-DD).",
            value=value,
            fix="declare the column as a date, or use another hierarchy.",
        ) from None
