"""``check``: which privacy models a table satisfies as it is, and with what parameters.

One ``GROUP BY`` over the quasi-identifiers and the sensitive attributes, inside DuckDB, yields the
count of every (class, sensitive values) combination; window functions number the classes and the
sensitive values. Every measure (k, α, ℓ, c, t, β, δ, the risks) is then read off those counts in
numpy — so a million-row table costs one aggregation, not one pass per model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dalenius.anonymity.models import ClassStats, Sensitive
from dalenius.anonymity.source import SOURCE_TABLE, Loaded, check_distinct, load, quote
from dalenius.core.errors import ConfigurationError


@dataclass(frozen=True)
class SensitiveReport:
    """What the table reveals about one sensitive attribute.

    Attributes:
        attribute: the sensitive column.
        distinct_l: the smallest number of distinct values in a class (distinct ℓ).
        entropy_l: the smallest exp(H(S | class)) (entropy ℓ; not truncated to an integer).
        recursive_c: for ℓ = ``distinct_l`` (when ≥ 2), the largest r1 / (r_ℓ + … + r_m) over
            the classes: the table is recursive (c,ℓ)-diverse for every c strictly above it.
        alpha: the largest share of one value in a class ((α,k)-anonymity holds for α ≥ it).
        t: the largest EMD between a class and the original table (t-closeness for t ≥ it).
        ordered: whether t used the ordered-distance EMD.
        beta: the largest relative gain (p − q) / q (basic β-likeness for β ≥ it).
        delta: the largest |ln(p / q)| (δ-disclosure for δ strictly above it; ∞ when a class
            lacks a value).
    """

    attribute: str
    distinct_l: int
    entropy_l: float
    recursive_c: float | None
    alpha: float
    t: float
    ordered: bool
    beta: float
    delta: float


@dataclass(frozen=True)
class CheckReport:
    """The privacy models a table satisfies as it is (see :func:`check`).

    Attributes:
        rows: records in the table.
        classes: equivalence classes (distinct quasi-identifier combinations).
        k: the smallest class size (the table is k-anonymous for this k and any smaller).
        quasi_identifiers: the columns that formed the classes.
        sensitive: one :class:`SensitiveReport` per sensitive attribute.
        sample_uniques: records alone in their class, as a share of all records.
        prosecutor_max: the largest re-identification risk of one record, 1 / k.
        prosecutor_avg: the average risk, classes / rows.
    """

    rows: int
    classes: int
    k: int
    quasi_identifiers: tuple[str, ...]
    sensitive: tuple[SensitiveReport, ...] = field(default_factory=tuple)
    sample_uniques: float = 0.0
    prosecutor_max: float = 0.0
    prosecutor_avg: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready object."""
        out = asdict(self)
        out["quasi_identifiers"] = list(self.quasi_identifiers)
        for s in out["sensitive"]:
            for key in ("delta", "t", "beta", "entropy_l"):
                if isinstance(s[key], float) and math.isinf(s[key]):
                    s[key] = "inf"
        return out

    def rows_for_display(self) -> list[tuple[str, str]]:
        """(measure, value) pairs, in reading order."""
        out = [
            ("rows", f"{self.rows:,}"),
            ("equivalence classes", f"{self.classes:,}"),
            ("k-anonymity: k", f"{self.k}"),
            ("sample uniques", f"{self.sample_uniques:.2%}"),
            (
                "prosecutor risk (max / avg)",
                f"{self.prosecutor_max:.4g} / {self.prosecutor_avg:.4g}",
            ),
        ]
        for s in self.sensitive:
            a = s.attribute
            out += [
                (f"{a}: distinct ℓ", f"{s.distinct_l}"),
                (f"{a}: entropy ℓ", f"{s.entropy_l:.4g}"),
                (
                    f"{a}: recursive (c,ℓ={s.distinct_l})",
                    "n/a (ℓ < 2)" if s.recursive_c is None else f"c > {s.recursive_c:.4g}",
                ),
                (f"{a}: (α,k) α", f"{s.alpha:.4g}"),
                (f"{a}: t-closeness t ({'ordered' if s.ordered else 'equal'} EMD)", f"{s.t:.4g}"),
                (f"{a}: β-likeness β", f"{s.beta:.4g}"),
                (f"{a}: δ-disclosure δ", f"> {s.delta:.4g}"),
            ]
        return out

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{_esc(k)}</td><td style='text-align:right'>{_esc(v)}</td></tr>"
            for k, v in self.rows_for_display()
        )
        return f"<table><thead><tr><th>measure</th><th>value</th></tr></thead>{rows}</table>"


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def check(
    data: Any,
    quasi_identifiers: Sequence[str],
    sensitive: Sequence[str] = (),
    *,
    ordered: Sequence[str] | None = None,
) -> CheckReport:
    """Report the largest k, ℓ, and smallest t, β, δ, α the table satisfies as it is.

    Args:
        data: a catalog table, duckdb relation, pandas/Polars DataFrame, pyarrow Table or path.
        quasi_identifiers: the columns an attacker may know.
        sensitive: the columns to protect (each judged on its own).
        ordered: sensitive columns whose values are ordered, for the ordered-distance EMD of
            t-closeness; by default the numeric ones.

    Example:
        >>> import pandas as pd
        >>> df = pd.DataFrame({"zip": ["130**"] * 4 + ["1485*"] * 4,
        ...                    "disease": ["Heart", "Heart", "Flu", "Flu"] + ["Cancer"] * 4})
        >>> r = check(df, ["zip"], ["disease"])
        >>> r.k, r.sensitive[0].distinct_l
        (4, 1)
    """
    loaded = load(data)
    return check_loaded(loaded, quasi_identifiers, sensitive, ordered=ordered)


def check_loaded(
    loaded: Loaded,
    quasi_identifiers: Sequence[str],
    sensitive: Sequence[str] = (),
    *,
    ordered: Sequence[str] | None = None,
) -> CheckReport:
    """:func:`check` on an input already loaded into DuckDB."""
    qis = [loaded.column(c, "quasi-identifier") for c in quasi_identifiers]
    sens = [loaded.column(c, "sensitive") for c in sensitive]
    if not qis:
        raise ConfigurationError(
            "no quasi-identifiers were given.", fix="name the columns an attacker may know."
        )
    check_distinct(qis, "quasi-identifier")
    check_distinct(sens, "sensitive")
    both = sorted(set(qis) & set(sens))
    if both:
        raise ConfigurationError(
            f"the column(s) {both} are both quasi-identifier and sensitive.",
            fix="declare each column in one role only.",
        )
    if loaded.rows == 0:
        raise ConfigurationError("the table is empty.", fix="check the data source.")
    ordered_set = (
        {loaded.column(c, "ordered sensitive") for c in ordered}
        if ordered is not None
        else {c for c in sens if loaded.is_numeric(c)}
    )
    stats = _grouped_stats(loaded, qis, sens, ordered_set)
    return _report(loaded.rows, qis, stats)


def _grouped_stats(
    loaded: Loaded, qis: Sequence[str], sens: Sequence[str], ordered: set[str]
) -> ClassStats:
    q_cols = ", ".join(quote(c) for c in qis)
    # Class ids by a hash join on the distinct quasi-identifier tuples (no sort of the data);
    # sensitive codes are ranks over the (few) distinct sensitive values, so ordered EMD works.
    loaded.con.execute(
        f"CREATE OR REPLACE TEMP TABLE __classes AS SELECT {q_cols}, row_number() OVER () - 1 "
        f"AS __cls FROM (SELECT DISTINCT {q_cols} FROM {SOURCE_TABLE})"
    )
    for i, c in enumerate(sens):
        loaded.con.execute(
            f"CREATE OR REPLACE TEMP TABLE __sens{i} AS SELECT v, dense_rank() OVER (ORDER BY v) "
            f"- 1 AS code FROM (SELECT DISTINCT {quote(c)} AS v FROM {SOURCE_TABLE})"
        )
    on = " AND ".join(f"t.{quote(c)} IS NOT DISTINCT FROM k.{quote(c)}" for c in qis)
    s_joins = "".join(
        f" JOIN __sens{i} s{i} ON t.{quote(c)} IS NOT DISTINCT FROM s{i}.v"
        for i, c in enumerate(sens)
    )
    s_cols = "".join(f", s{i}.code AS s{i}" for i in range(len(sens)))
    sql = (
        f"SELECT k.__cls AS cls{s_cols}, count(*) AS n FROM {SOURCE_TABLE} t "
        f"JOIN __classes k ON {on}{s_joins} GROUP BY ALL"
    )
    arrays = loaded.con.execute(sql).fetchnumpy()
    cls = np.asarray(arrays["cls"], dtype=np.int64)
    count = np.asarray(arrays["n"], dtype=np.int64)
    codes = [np.asarray(arrays[f"s{i}"], dtype=np.int64) for i in range(len(sens))]
    sensitive = [
        Sensitive(name, np.bincount(code, weights=count).astype(np.int64), name in ordered)
        for name, code in zip(sens, codes, strict=True)
    ]
    return ClassStats(cls, count, codes, sensitive)


def _report(rows: int, qis: Sequence[str], stats: ClassStats) -> CheckReport:
    size = stats.size
    k = int(size.min())
    per_sensitive = []
    for pair in stats.pairs:
        distinct_l = int(pair.distinct.min())
        recursive_c = None
        if distinct_l >= 2:
            tail = pair.tail(distinct_l)
            recursive_c = float(np.max(pair.max_count / tail))
        per_sensitive.append(
            SensitiveReport(
                attribute=pair.sensitive.name,
                distinct_l=distinct_l,
                entropy_l=float(pair.entropy_l.min()),
                recursive_c=recursive_c,
                alpha=float(np.max(pair.max_count / pair.size)),
                t=float(pair.emd.max()),
                ordered=pair.sensitive.ordered,
                beta=float(pair.beta.max()),
                delta=float(pair.delta.max()),
            )
        )
    uniques = int(size[size == 1].sum())
    return CheckReport(
        rows=rows,
        classes=len(size),
        k=k,
        quasi_identifiers=tuple(qis),
        sensitive=tuple(per_sensitive),
        sample_uniques=uniques / rows,
        prosecutor_max=1.0 / k,
        prosecutor_avg=len(size) / rows,
    )
