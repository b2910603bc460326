"""Re-identification risk of a microdata file, from its equivalence classes over the quasi-identifiers.

Three attacker models (El Emam & Dankar 2008; ARX's risk model):

- **prosecutor** — knows the target is in the file: risk of a record is 1 / (its class size f);
- **journalist** — knows the target is in a larger *population* file (a declared table that
  contains the sample): risk is 1 / F, with F the size of the matching population class;
- **marketer** — links as many records as possible: expected share re-identified,
  (1/n) Σ_classes f / F (F = f without a population, i.e. classes / n).

Sample uniques (records alone in their class) are not necessarily population uniques. When only a
sample is at hand, the share of population uniques is estimated with **Zayatz's** method
(Zayatz 1991, *Estimation of the percent of unique population elements on a microdata file using
the sample*, US Census Bureau SRD Report 91/08; see also Dankar et al. 2012, BMC Medical
Informatics and Decision Making 12:66): the population's class sizes are assumed distributed as the
sample's, and binomial sampling with fraction π = n / N gives

    P(F = 1 | f = 1) = P₁ π / Σᵢ Pᵢ · i π (1 − π)^(i−1),    Pᵢ ∝ (sample classes of size i),

so the estimated population uniques among the sample uniques is u₁ · P(F = 1 | f = 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dalenius.anonymity.source import SOURCE_TABLE, Loaded, check_distinct, load, quote
from dalenius.core.errors import ConfigurationError


@dataclass(frozen=True)
class RiskReport:
    """Re-identification risks of one table (see the module docstring).

    Attributes:
        rows: records.
        classes: equivalence classes.
        sample_uniques: records alone in their class, as a share of the records.
        prosecutor_max: the largest prosecutor risk (1 / smallest class).
        prosecutor_avg: the average prosecutor risk (classes / rows).
        records_at_risk: share of records whose prosecutor risk exceeds ``threshold``.
        threshold: the risk threshold used for ``records_at_risk``.
        journalist_max: the largest journalist risk, with a population table.
        journalist_avg: the average journalist risk, with a population table.
        marketer: the expected share of records re-identified by a marketer.
        population_size: N, the size of the population the sample was drawn from.
        population_uniques: estimated share of the sample's records that are population uniques
            (Zayatz); with a population table, the exact share.
    """

    rows: int
    classes: int
    sample_uniques: float
    prosecutor_max: float
    prosecutor_avg: float
    records_at_risk: float
    threshold: float
    journalist_max: float | None
    journalist_avg: float | None
    marketer: float
    population_size: int
    population_uniques: float

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready object."""
        return asdict(self)

    def rows_for_display(self) -> list[tuple[str, str]]:
        """(measure, value) pairs, in reading order."""
        out = [
            ("records", f"{self.rows:,}"),
            ("equivalence classes", f"{self.classes:,}"),
            ("sample uniques", f"{self.sample_uniques:.2%}"),
            (
                "prosecutor risk: max / average",
                f"{self.prosecutor_max:.4g} / {self.prosecutor_avg:.4g}",
            ),
            (f"records with prosecutor risk > {self.threshold:g}", f"{self.records_at_risk:.2%}"),
        ]
        if self.journalist_max is not None and self.journalist_avg is not None:
            out.append(
                (
                    "journalist risk: max / average",
                    f"{self.journalist_max:.4g} / {self.journalist_avg:.4g}",
                )
            )
        out += [
            ("marketer risk", f"{self.marketer:.4g}"),
            ("population size", f"{self.population_size:,}"),
            ("population uniques (share of records)", f"{self.population_uniques:.2%}"),
        ]
        return out

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in self.rows_for_display())
        return f"<table><thead><tr><th>risk</th><th></th></tr></thead>{rows}</table>"


def zayatz_population_uniques(
    class_sizes: Sequence[int] | np.ndarray, population_size: int
) -> float:
    """Zayatz's estimate of how many sample records are population uniques (a count).

    Example:
        >>> zayatz_population_uniques([1, 1, 2, 3], 4 + 3)  # π = 1: every sample unique is one
        2.0
    """
    sizes = np.asarray(class_sizes, dtype=np.int64)
    n = int(sizes.sum())
    if population_size < n:
        raise ConfigurationError(
            f"the population ({population_size:,}) cannot be smaller than the sample ({n:,}).",
            fix="give the size of the population the sample was drawn from.",
        )
    uniques = int(np.count_nonzero(sizes == 1))
    if uniques == 0:
        return 0.0
    pi = n / population_size
    if pi >= 1:
        return float(uniques)
    counts = np.bincount(sizes)
    i = np.arange(len(counts), dtype=np.float64)
    p_i = counts / counts.sum()
    denominator = float((p_i * i * pi * (1 - pi) ** np.maximum(i - 1, 0)).sum())
    p_unique = p_i[1] * pi / denominator
    return float(uniques * p_unique)


def risk(
    data: Any,
    quasi_identifiers: Sequence[str],
    *,
    population: Any = None,
    population_size: int | None = None,
    threshold: float = 0.2,
) -> RiskReport:
    """Re-identification risks of ``data`` by its quasi-identifiers.

    Args:
        data: the sample (any input :func:`dalenius.anonymity.check` accepts).
        quasi_identifiers: the columns an attacker may know.
        population: optional population table with the same columns (journalist risk, exact
            population uniqueness).
        population_size: N for Zayatz's estimate when no population table is given (default:
            the sample is the population).
        threshold: prosecutor risk above which a record counts as at risk.
    """
    if not 0 < threshold <= 1:
        raise ConfigurationError(f"threshold must be in (0, 1]; got {threshold!r}.")
    loaded = load(data)
    qis = [loaded.column(c, "quasi-identifier") for c in quasi_identifiers]
    check_distinct(qis, "quasi-identifier")
    if loaded.rows == 0:
        raise ConfigurationError("the table is empty.")
    sizes = _class_sizes(loaded, qis)
    n = loaded.rows
    at_risk = float(sizes[1.0 / sizes > threshold].sum()) / n
    journalist_max = journalist_avg = None
    marketer = len(sizes) / n
    if population is not None:
        pop = load(population)
        pop_q = [pop.column(c, "population quasi-identifier") for c in qis]
        f, big = _matched_population_sizes(loaded, qis, pop, pop_q)
        journalist_max = float(np.max(1.0 / big))
        journalist_avg = float((f / big).sum() / n)
        marketer = journalist_avg
        population_size = pop.rows
        uniques = float(f[big == 1].sum()) / n
    else:
        population_size = population_size or n
        uniques = zayatz_population_uniques(sizes, population_size) / n
    return RiskReport(
        rows=n,
        classes=len(sizes),
        sample_uniques=float(np.count_nonzero(sizes == 1)) / n,
        prosecutor_max=float(1.0 / sizes.min()),
        prosecutor_avg=len(sizes) / n,
        records_at_risk=at_risk,
        threshold=threshold,
        journalist_max=journalist_max,
        journalist_avg=journalist_avg,
        marketer=marketer,
        population_size=int(population_size),
        population_uniques=uniques,
    )


def _class_sizes(loaded: Loaded, qis: Sequence[str]) -> np.ndarray:
    cols = ", ".join(quote(c) for c in qis)
    arrays = loaded.con.execute(
        f"SELECT count(*) AS n FROM {SOURCE_TABLE} GROUP BY {cols} ORDER BY ALL"
    ).fetchnumpy()
    return np.asarray(arrays["n"], dtype=np.float64)


def _matched_population_sizes(
    sample: Loaded, qis: Sequence[str], pop: Loaded, pop_q: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Per sample class: its size and the size of the matching population class."""
    pop_table = pop.con.sql(
        f"SELECT {', '.join(f'{quote(p)} AS {quote(q)}' for p, q in zip(pop_q, qis, strict=True))}, "
        f"count(*) AS big FROM {SOURCE_TABLE} GROUP BY ALL"
    ).to_arrow_table()
    sample.con.register("__population", pop_table)
    cond = " AND ".join(f"s.{quote(c)} IS NOT DISTINCT FROM p.{quote(c)}" for c in qis)
    arrays = sample.con.execute(
        f"SELECT count(*) AS n, any_value(p.big) AS big FROM {SOURCE_TABLE} s "
        f"LEFT JOIN __population p ON {cond} GROUP BY {', '.join(f's.{quote(c)}' for c in qis)} "
        "ORDER BY n"
    ).fetchnumpy()
    big = np.asarray(arrays["big"], dtype=np.float64)
    f = np.asarray(arrays["n"], dtype=np.float64)
    if np.isnan(big).any() or (big < f).any():
        raise ConfigurationError(
            "the population table does not contain the sample: some sample class is larger than "
            "its population class.",
            fix="give a population table that includes every record of the sample.",
        )
    return f, big
