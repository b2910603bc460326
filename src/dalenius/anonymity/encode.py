"""The frequency set: a table reduced, inside DuckDB, to its distinct coded rows and their counts.

Each quasi-identifier's distinct values get dense codes (their index in the hierarchy's sorted
values), each sensitive attribute's values get dense codes in sorted order, and one ``GROUP BY``
over those codes gives the frequency set the lattice search and the loss metrics work on. A lattice
node is then evaluated by mapping the base codes to the node's levels with array lookups — no
second pass over the data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dalenius.anonymity.hierarchy import Hierarchy, Levels
from dalenius.anonymity.models import IntArray, Sensitive
from dalenius.anonymity.source import SOURCE_TABLE, Loaded, quote


@dataclass
class Encoded:
    """A table's frequency set over coded quasi-identifiers and sensitive attributes.

    Attributes:
        qis: quasi-identifier columns, in order.
        levels: each quasi-identifier's hierarchy applied to its values.
        base: per quasi-identifier, the level-0 code of each frequency row.
        count: records per frequency row.
        sensitive_codes: per sensitive attribute, the code of each frequency row.
        sensitive: the encoded sensitive attributes (with their original distributions).
        n: records in the table.
    """

    qis: tuple[str, ...]
    levels: tuple[Levels, ...]
    base: tuple[IntArray, ...]
    count: IntArray
    sensitive_codes: tuple[IntArray, ...]
    sensitive: tuple[Sensitive, ...]
    n: int

    @property
    def heights(self) -> tuple[int, ...]:
        """The top level of each quasi-identifier's hierarchy."""
        return tuple(lv.height for lv in self.levels)

    def level_codes(self, attribute: int, level: int) -> IntArray:
        """Per frequency row, the code of its label at ``level`` of quasi-identifier ``attribute``."""
        table = np.asarray(self.levels[attribute].codes[level], dtype=np.int64)
        return np.asarray(table[self.base[attribute]], dtype=np.int64)


def mapping_table_name(column_index: int) -> str:
    """Name of the DuckDB table that maps a quasi-identifier's values to codes and labels."""
    return f"__map_q{column_index}"


def sensitive_table_name(column_index: int) -> str:
    """Name of the DuckDB table that maps a sensitive attribute's values to codes."""
    return f"__map_s{column_index}"


def encode(
    loaded: Loaded,
    qis: Sequence[str],
    hierarchies: Mapping[str, Hierarchy],
    sensitive: Sequence[str],
    ordered: set[str],
    *,
    with_sensitive: bool = True,
) -> Encoded:
    """Apply the hierarchies, register the mapping tables and build the frequency set.

    Without ``with_sensitive`` the sensitive attributes' mapping tables are registered but the
    frequency set leaves them out (k-anonymity alone needs only the class sizes, and the set is
    then much smaller).

    Raises:
        HierarchyError: when a hierarchy misses a value of its column or is not monotone.
    """
    levels = []
    for i, col in enumerate(qis):
        values = loaded.con.sql(
            f"SELECT DISTINCT {quote(col)} AS v FROM {SOURCE_TABLE}"
        ).to_arrow_table()
        lv = hierarchies[col].apply(col, values.column("v").to_pylist())
        levels.append(lv)
        index = {v: j for j, v in enumerate(lv.values)}
        column = values.column("v")
        codes = [index[v] for v in column.to_pylist()]
        table = pa.table(
            {
                "v": column,
                "c": pa.array(codes, type=pa.int32()),
                **{
                    f"l{lvl}": pa.array([lv.labels[lvl][c] for c in codes], type=pa.string())
                    for lvl in range(lv.height + 1)
                },
            }
        )
        loaded.con.register(mapping_table_name(i), table)
    for j, col in enumerate(sensitive):
        loaded.con.execute(
            f"CREATE OR REPLACE TEMP TABLE {sensitive_table_name(j)} AS "
            f"SELECT v, dense_rank() OVER (ORDER BY v) - 1 AS c FROM "
            f"(SELECT DISTINCT {quote(col)} AS v FROM {SOURCE_TABLE})"
        )
    if not with_sensitive:
        sensitive = []
    q_select = ", ".join(f"m{i}.c AS q{i}" for i in range(len(qis)))
    s_select = "".join(f", s{j}.c AS s{j}" for j in range(len(sensitive)))
    joins = "".join(
        f" JOIN {mapping_table_name(i)} m{i} ON src.{quote(c)} IS NOT DISTINCT FROM m{i}.v"
        for i, c in enumerate(qis)
    ) + "".join(
        f" JOIN {sensitive_table_name(j)} s{j} ON src.{quote(c)} IS NOT DISTINCT FROM s{j}.v"
        for j, c in enumerate(sensitive)
    )
    sql = f"SELECT {q_select}{s_select}, count(*) AS n FROM {SOURCE_TABLE} src{joins} GROUP BY ALL"
    arrays = loaded.con.execute(sql).fetchnumpy()
    count = np.asarray(arrays["n"], dtype=np.int64)
    s_codes = tuple(np.asarray(arrays[f"s{j}"], dtype=np.int64) for j in range(len(sensitive)))
    sens = tuple(
        Sensitive(
            name,
            np.bincount(codes, weights=count).astype(np.int64),
            name in ordered,
        )
        for name, codes in zip(sensitive, s_codes, strict=True)
    )
    return Encoded(
        qis=tuple(qis),
        levels=tuple(levels),
        base=tuple(np.asarray(arrays[f"q{i}"], dtype=np.int64) for i in range(len(qis))),
        count=count,
        sensitive_codes=s_codes,
        sensitive=sens,
        n=int(count.sum()),
    )


def sensitive_totals(
    loaded: Loaded, sensitive: Sequence[str], ordered: set[str]
) -> list[Sensitive]:
    """Each sensitive attribute's distribution in the original table (mapping tables registered)."""
    out = []
    for j, col in enumerate(sensitive):
        rows = loaded.con.execute(
            f"SELECT s.c, count(*) FROM {SOURCE_TABLE} src JOIN {sensitive_table_name(j)} s "
            f"ON src.{quote(col)} IS NOT DISTINCT FROM s.v GROUP BY ALL ORDER BY 1"
        ).fetchall()
        totals = np.zeros(len(rows), dtype=np.int64)
        for code, n in rows:
            totals[int(code)] = int(n)
        out.append(Sensitive(col, totals, col in ordered))
    return out
