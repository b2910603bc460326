"""The attacker's one operation on a published file: find the records that match what they know.

Both microdata attacks start here. The attacker coarsens their own records (a voter roll, what
they know about a neighbour) with the release's published scheme and looks up the released
records with the same labels — the *equivalence class* a known person falls in. From the class
the linking attack reads how many records could be the person, and the homogeneity attack reads
which sensitive values the person could have. Nothing here reads data other than the
:class:`~dalenius.attacks.published.Published` file and the attacker's table.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from dalenius.attacks.published import Published


@dataclass(frozen=True)
class Classes:
    """The released records grouped by their quasi-identifier labels.

    Attributes:
        of_record: the class of each released record.
        sizes: the number of records in each class.
        values: the sensitive values' counts in each class.
        index: the class of each tuple of labels.
    """

    of_record: np.ndarray
    sizes: np.ndarray
    values: list[Counter[Any]]
    index: dict[tuple[Any, ...], int]


@dataclass(frozen=True)
class Matches:
    """Where each of the attacker's records falls in a published file.

    Attributes:
        classes: the release's classes.
        of_known: the class each known record matches, or -1 when no released record matches.
    """

    classes: Classes
    of_known: np.ndarray

    @property
    def matched(self) -> np.ndarray:
        """Whether each known record matches at least one released record."""
        return self.of_known >= 0

    def candidates(self) -> np.ndarray:
        """How many released records each known record could be (0 when none matches)."""
        out = np.zeros(len(self.of_known), dtype=np.int64)
        hit = self.matched
        out[hit] = self.classes.sizes[self.of_known[hit]]
        return out


def classes(published: Published) -> Classes:
    """Group the released records by their quasi-identifier labels.

    Example:
        >>> import pyarrow as pa
        >>> from dalenius.attacks.published import Key, Published
        >>> t = pa.table({"zip": ["130**", "130**", "148**"], "d": ["Flu", "Flu", "Heart"]})
        >>> p = Published("raw", "raw", t, {"zip": Key("zip", list)}, "d")
        >>> c = classes(p)
        >>> c.sizes.tolist(), [dict(v) for v in c.values]
        ([2, 1], [{'Flu': 2}, {'Heart': 1}])
    """
    index: dict[tuple[Any, ...], int] = {}
    of_record = np.empty(published.table.num_rows, dtype=np.int64)
    values: list[Counter[Any]] = []
    sensitive = published.table.column(published.sensitive).to_pylist()
    for i, (key, value) in enumerate(zip(published.record_keys(), sensitive, strict=True)):
        c = index.get(key)
        if c is None:
            c = index[key] = len(values)
            values.append(Counter())
        of_record[i] = c
        values[c][value] += 1
    sizes = np.asarray([sum(v.values()) for v in values], dtype=np.int64)
    return Classes(of_record, sizes, values, index)


def match(published: Published, known: pa.Table, grouped: Classes | None = None) -> Matches:
    """The class of the release each of the attacker's records falls in."""
    grouped = grouped or classes(published)
    of_known = np.fromiter(
        (grouped.index.get(k, -1) for k in published.keys_of(known)),
        dtype=np.int64,
        count=known.num_rows,
    )
    return Matches(grouped, of_known)
