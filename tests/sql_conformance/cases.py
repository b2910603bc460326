"""The SQL conformance table: each query either answered or refused with its specific error.

Answered cases carry an independent pandas computation of the exact, clipped, bounded answer
(what Dalenius must compute before noise). Generated families cross aggregates with filters and
groupings; hand-written cases cover joins, subqueries, CTEs, post-processing and BigQuery's syntax.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

Frame = pd.DataFrame
Expected = Callable[[Frame, dict[str, Frame]], dict[tuple[Any, ...], tuple[Any, ...]]]


@dataclass(frozen=True)
class Answered:
    """A query Dalenius answers; ``expected`` maps each group key tuple to the output row."""

    name: str
    dataset: str
    sql: str
    expected: Expected
    delta: float | None = None
    ordered: bool = False


@dataclass(frozen=True)
class Refused:
    """A query Dalenius refuses before reading data, with this error."""

    name: str
    dataset: str
    sql: str
    clause: str | None
    fragment: str
    privacy: bool = False
    delta: float | None = None


@dataclass(frozen=True)
class Agg:
    """One aggregate: its SQL, and how pandas computes it on a group's rows."""

    sql: str
    fn: Callable[[Frame], Any]
    quantile: tuple[str, float | str] | None = field(default=None)


def clip(s: pd.Series, lo: float, hi: float) -> pd.Series:
    return s.dropna().clip(lo, hi)


def mean_or_mid(s: pd.Series, lo: float, hi: float) -> float:
    c = clip(s, lo, hi)
    return float(c.mean()) if len(c) else (lo + hi) / 2


def variance(s: pd.Series, lo: float, hi: float, ddof: int, sqrt: bool) -> float:
    c = clip(s, lo, hi)
    top = ((hi - lo) / 2) ** 2
    v = (
        top / 3
        if len(c) < 1 + ddof
        else float(((c - (lo + hi) / 2) ** 2).mean() - (c - (lo + hi) / 2).mean() ** 2)
    )
    if ddof and len(c) >= 2:
        v = v * len(c) / (len(c) - 1)
    v = min(max(v, 0.0), top)
    return math.sqrt(v) if sqrt else v


# Bounds as the fixtures declare them.
ADULT = {
    "age": (17, 80),
    "capital_gain": (0, 99999),
    "capital_loss": (0, 5000),
    "hours_per_week": (1.5, 60.25),
    "education_num": (1, 16),
}
PUMS = {"age": (0, 100), "educ": (1, 16), "income": (0, 500000)}


def adult_aggs() -> list[Agg]:
    b = ADULT
    return [
        Agg("COUNT(*)", len),
        Agg("COUNT(occupation)", lambda d: int(d.occupation.notna().sum())),
        Agg("SUM(capital_loss)", lambda d: int(clip(d.capital_loss, *b["capital_loss"]).sum())),
        Agg(
            "SUM(hours_per_week)",
            lambda d: float(clip(d.hours_per_week, *b["hours_per_week"]).sum()),
        ),
        Agg("AVG(age)", lambda d: mean_or_mid(d.age, *b["age"])),
        Agg("AVG(capital_gain)", lambda d: mean_or_mid(d.capital_gain, *b["capital_gain"])),
        Agg("VAR_POP(age)", lambda d: variance(d.age, *b["age"], 0, False)),
        Agg(
            "STDDEV(hours_per_week)",
            lambda d: variance(d.hours_per_week, *b["hours_per_week"], 1, True),
        ),
        Agg("MEDIAN(age)", None, ("age", 0.5)),  # type: ignore[arg-type]
        Agg("QUANTILE(hours_per_week, 0.75)", None, ("hours_per_week", 0.75)),  # type: ignore[arg-type]
        Agg("MIN(age)", None, ("age", "min")),  # type: ignore[arg-type]
        Agg("MAX(education_num)", None, ("education_num", "max")),  # type: ignore[arg-type]
    ]


def pums_aggs() -> list[Agg]:
    b = PUMS
    return [
        Agg("COUNT(*)", len),
        Agg("COUNT(DISTINCT pid)", lambda d: int(d.pid.nunique())),
        Agg("SUM(income)", lambda d: float(clip(d.income, *b["income"]).sum())),
        Agg("AVG(income)", lambda d: mean_or_mid(d.income, *b["income"])),
        Agg("AVG(age)", lambda d: mean_or_mid(d.age, *b["age"])),
        Agg("VAR_SAMP(age)", lambda d: variance(d.age, *b["age"], 1, False)),
        Agg("STDDEV_POP(income)", lambda d: variance(d.income, *b["income"], 0, True)),
        Agg("SUM(CASE WHEN married = 1 THEN 1 ELSE 0 END)", lambda d: int((d.married == 1).sum())),
        Agg("COUNT(income)", lambda d: int(d.income.notna().sum())),
        Agg("MEDIAN(income)", None, ("income", 0.5)),  # type: ignore[arg-type]
        Agg("MIN(age)", None, ("age", "min")),  # type: ignore[arg-type]
        Agg("MAX(educ)", None, ("educ", "max")),  # type: ignore[arg-type]
    ]


@dataclass(frozen=True)
class Grouping:
    sql: str | None
    key: Callable[[Frame], pd.Series] | None
    keys: list[Any] | None  # None: private keys (observed groups)


ADULT_GROUPS = [
    Grouping(None, None, None),
    Grouping("sex", lambda d: d.sex, ["Female", "Male", "Unknown"]),
    Grouping(
        "race",
        lambda d: d.race,
        ["Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White"],
    ),
    Grouping(
        "LEAST((age / 10) * 10, 60)",
        lambda d: np.minimum((d.age // 10) * 10, 60),
        [10, 20, 30, 40, 50, 60],
    ),
    Grouping("occupation", lambda d: d.occupation, None),
]
PUMS_GROUPS = [
    Grouping(None, None, None),
    Grouping("sex", lambda d: d.sex, [0, 1]),
    Grouping("race", lambda d: d.race, [1, 2, 3, 4, 5, 6]),
    Grouping("educ / 4", lambda d: d.educ // 4, [0, 1, 2, 3, 4]),
    Grouping(
        "CASE WHEN age < 30 THEN 'young' ELSE 'older' END",
        lambda d: np.where(d.age < 30, "young", "older"),
        ["young", "older"],
    ),
]
ADULT_WHERE = [
    (None, lambda d: pd.Series(True, index=d.index)),
    ("age >= 40", lambda d: d.age >= 40),
    (
        "sex = 'Female' AND hours_per_week > 30",
        lambda d: (d.sex == "Female") & (d.hours_per_week > 30),
    ),
    (
        "education IN ('Bachelors', 'Masters') OR capital_gain > 0",
        lambda d: d.education.isin(["Bachelors", "Masters"]) | (d.capital_gain > 0),
    ),
]
PUMS_WHERE = [
    (None, lambda d: pd.Series(True, index=d.index)),
    ("age BETWEEN 25 AND 60", lambda d: d.age.between(25, 60)),
    ("income > 20000 OR married = 1", lambda d: (d.income > 20000) | (d.married == 1)),
    ("NOT (sex = 1) AND educ >= 9", lambda d: (d.sex != 1) & (d.educ >= 9)),
]


# Public keys the WHERE rules out on the key column alone form no group (docs/sql.md, "Group keys"):
# the keys left for each (WHERE, GROUP BY) pair that narrows them, worked out by hand. Every other
# pair answers every key; a CASE whose results are all literals keeps them all.
NARROWED: dict[tuple[str | None, str | None], list[Any]] = {
    ("age >= 40", "LEAST((age / 10) * 10, 60)"): [40, 50, 60],
    ("sex = 'Female' AND hours_per_week > 30", "sex"): ["Female"],
    ("NOT (sex = 1) AND educ >= 9", "sex"): [0],
    ("NOT (sex = 1) AND educ >= 9", "educ / 4"): [2, 3, 4],
}


def expected_grouped(
    table: str, where: Callable[[Frame], pd.Series], grouping: Grouping, aggs: list[Agg]
) -> Expected:
    def compute(_: Frame, frames: dict[str, Frame]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
        d = frames[table]
        d = d[where(d).fillna(False).astype(bool)]
        if grouping.sql is None:
            return {(): tuple(_value(a, d) for a in aggs)}
        assert grouping.key is not None
        key = pd.Series(grouping.key(d), index=d.index)
        if grouping.keys is None:
            groups = {k: d[key == k] for k in key.dropna().unique()}
            if key.isna().any():
                groups[None] = d[key.isna()]
        else:
            groups = {k: d[key == k] for k in grouping.keys}
        return {(_plain(k),): (_plain(k), *(_value(a, g) for a in aggs)) for k, g in groups.items()}

    return compute


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _value(agg: Agg, d: Frame) -> Any:
    if agg.quantile is not None:
        return ("quantile", agg.quantile, d)
    return agg.fn(d)


def generated() -> list[Answered]:
    cases: list[Answered] = []
    families = [
        ("adult", "adult", adult_aggs(), ADULT_GROUPS, ADULT_WHERE),
        ("pums", "pums", pums_aggs(), PUMS_GROUPS, PUMS_WHERE),
    ]
    for dataset, table, aggs, groups, wheres in families:
        for a, agg in enumerate(aggs):
            for g, grouping in enumerate(groups):
                where_sql, where_fn = wheres[(a + g) % len(wheres)]
                narrowed = NARROWED.get((where_sql, grouping.sql))
                if narrowed is not None:
                    grouping = replace(grouping, keys=narrowed)  # noqa: PLW2901
                select = ([grouping.sql] if grouping.sql else []) + [agg.sql]
                sql = f"SELECT {', '.join(select)} FROM {table}"
                if where_sql:
                    sql += f" WHERE {where_sql}"
                if grouping.sql:
                    sql += f" GROUP BY {grouping.sql}"
                cases.append(
                    Answered(
                        name=f"{dataset}-{a}-{g}",
                        dataset=dataset,
                        sql=sql,
                        expected=expected_grouped(table, where_fn, grouping, [agg]),
                        delta=1e-6 if grouping.sql and grouping.keys is None else None,
                    )
                )
    return cases


def _edu(frames: dict[str, Frame]) -> Frame:
    return frames["adult"].merge(frames["edu_levels"], on="education")


def _pums_names(frames: dict[str, Frame]) -> Frame:
    return frames["pums"].merge(frames["educ_names"], on="educ")


def f_adult_workclass_contains(part: str) -> Callable[[Frame], pd.Series]:
    """Rows whose workclass contains ``part`` (case-insensitively); NULL rows are neither."""

    def rows(d: Frame) -> pd.Series:
        return d.workclass.notna() & d.workclass.str.lower().str.contains(part, na=False)

    return rows


def _above(frames: dict[str, Frame], level: str, years: int) -> int:
    """How many education values of ``level`` have more than ``years`` years (join partners)."""
    table = frames["edu_levels"]
    return int(((table.level == level) & (table.years > years)).sum())


def handwritten() -> list[Answered]:
    b = ADULT
    p = PUMS
    levels = ["none", "primary", "secondary", "college", "graduate"]
    has_gov = f_adult_workclass_contains("gov")

    def gov(d: Frame) -> pd.Series:  # NOT LIKE is false on NULL, like LIKE
        return d.workclass.notna() & ~has_gov(d)

    return [
        # Modifiers the binder once dropped silently (each answered as written).
        Answered(
            "not-like",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE workclass NOT LIKE '%gov%'",
            lambda d, _: {(): (int(gov(d).sum()),)},
        ),
        Answered(
            "not-ilike",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE workclass NOT ILIKE '%GOV%'",
            lambda d, _: {(): (int(gov(d).sum()),)},
        ),
        Answered(
            "not-like-operator",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE workclass !~~ '%gov%'",
            lambda d, _: {(): (int(gov(d).sum()),)},
        ),
        Answered(
            "not-like-in-case-bins",
            "adult",
            "SELECT SUM(CASE WHEN workclass NOT LIKE '%gov%' THEN 1 ELSE 0 END) FROM adult",
            lambda d, _: {(): (int(gov(d).sum()),)},
        ),
        Answered(
            "between-symmetric",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE age BETWEEN SYMMETRIC 40 AND 30",
            lambda d, _: {(): (int(d.age.between(30, 40).sum()),)},
        ),
        Answered(
            "between-symmetric-columns",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE 40 BETWEEN SYMMETRIC age AND education_num",
            lambda d, _: {(): (int(((d.education_num <= 40) & (d.age >= 40)).sum()),)},
        ),
        Answered(
            "percentile-desc",
            "adult",
            "SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age DESC) FROM adult",
            lambda d, _: {(): (("quantile", ("age", 0.1), d),)},
        ),
        Answered(
            "var-alias",
            "adult",
            "SELECT VAR(age), VARIANCE(age), VAR_SAMP(age), VAR_POP(age) FROM adult",
            lambda d, _: {
                (): (
                    variance(d.age, *b["age"], 1, False),
                    variance(d.age, *b["age"], 1, False),
                    variance(d.age, *b["age"], 1, False),
                    variance(d.age, *b["age"], 0, False),
                )
            },
        ),
        Answered(
            "trailing-comment",
            "adult",
            "SELECT COUNT(*) FROM adult; -- all rows",
            lambda d, _: {(): (len(d),)},
        ),
        Answered(
            "clause-text-in-literal",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE workclass <> 'SELECT WITH DIFFERENTIAL_PRIVACY' -- SELECT WITH DIFFERENTIAL_PRIVACY",
            lambda d, _: {(): (int((d.workclass.notna() & (d.workclass != "x")).sum()),)},
        ),
        Answered(
            "several-aggregates",
            "adult",
            "SELECT COUNT(*) AS n, SUM(capital_gain) AS g, AVG(hours_per_week) AS h, MEDIAN(age) AS m FROM adult WHERE race = 'Black'",
            lambda _, f: {
                (): (
                    int((f["adult"].race == "Black").sum()),
                    float(
                        clip(
                            f["adult"][f["adult"].race == "Black"].capital_gain, *b["capital_gain"]
                        ).sum()
                    ),
                    mean_or_mid(
                        f["adult"][f["adult"].race == "Black"].hours_per_week, *b["hours_per_week"]
                    ),
                    ("quantile", ("age", 0.5), f["adult"][f["adult"].race == "Black"]),
                )
            },
        ),
        Answered(
            "join-public-lookup",
            "adult",
            "SELECT l.level, COUNT(*), AVG(a.age) FROM adult a JOIN edu_levels l ON a.education = l.education GROUP BY l.level",
            lambda _, f: {
                (k,): (
                    k,
                    int((_edu(f).level == k).sum()),
                    mean_or_mid(_edu(f)[_edu(f).level == k].age, *b["age"]),
                )
                for k in levels
            },
        ),
        Answered(
            "group-by-constant",
            "adult",
            "SELECT 'all' AS g, COUNT(*) FROM adult GROUP BY 1",
            lambda _, f: {("all",): ("all", len(f["adult"]))},
        ),
        Answered(
            "group-by-constant-number-and-column",
            "pums",
            "SELECT 2 AS g, sex, COUNT(*) FROM pums GROUP BY 1, 2",
            lambda _, f: {(2, s): (2, s, int((f["pums"].sex == s).sum())) for s in (0, 1)},
        ),
        Answered(
            "in-public-subquery",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE education IN "
            "(SELECT education FROM edu_levels WHERE years > 12)",
            lambda _, f: {
                (): (
                    int(
                        f["adult"]
                        .education.isin(f["edu_levels"][f["edu_levels"].years > 12].education)
                        .sum()
                    ),
                )
            },
        ),
        Answered(
            "not-in-null-operand",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE workclass NOT IN "
            "(SELECT education FROM edu_levels WHERE years > 3)",
            # A NULL workclass is NOT IN nothing: the test is NULL, and the row is dropped.
            lambda _, f: {(): (int(f["adult"].workclass.notna().sum()),)},
        ),
        Answered(
            "not-exists-public-correlated",
            "adult",
            "SELECT a.sex, COUNT(*) FROM adult a WHERE a.age > 30 AND NOT EXISTS "
            "(SELECT 1 FROM edu_levels l WHERE l.education = a.education AND l.level = 'college') "
            "GROUP BY a.sex",
            lambda _, f: {
                (s,): (
                    s,
                    int(
                        (
                            (f["adult"].sex == s)
                            & (f["adult"].age > 30)
                            & ~f["adult"].education.isin(
                                f["edu_levels"][f["edu_levels"].level == "college"].education
                            )
                        ).sum()
                    ),
                )
                for s in ("Female", "Male", "Unknown")
            },
        ),
        Answered(
            "not-in-public-chain",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE education NOT IN (SELECT e1.education FROM "
            "edu_levels e1 JOIN edu_levels e2 ON e1.level = e2.level WHERE e2.education = 'Masters')",
            lambda _, f: {
                (): (
                    int(
                        (
                            ~f["adult"].education.isin(
                                f["edu_levels"][
                                    f["edu_levels"].level
                                    == f["edu_levels"].set_index("education").level["Masters"]
                                ].education
                            )
                        ).sum()
                    ),
                )
            },
        ),
        Answered(
            "public-chain-written-first",
            "adult",
            "SELECT e1.level, COUNT(*), SUM(a.age) FROM edu_levels e1 "
            "JOIN edu_levels e2 ON e1.level = e2.level JOIN adult a ON a.education = e2.education "
            "WHERE e1.years > 8 GROUP BY e1.level",
            lambda _, f: {
                (k,): (
                    k,
                    int((_edu(f).level == k).sum() * _above(f, k, 8)),
                    int(_edu(f)[_edu(f).level == k].age.clip(*b["age"]).sum() * _above(f, k, 8)),
                )
                for k in levels
            },
        ),
        Answered(
            "join-public-bounded-column",
            "adult",
            "SELECT SUM(l.years) FROM adult a JOIN edu_levels l ON a.education = l.education WHERE a.sex = 'Male'",
            lambda _, f: {(): (int(_edu(f)[_edu(f).sex == "Male"].years.sum()),)},
        ),
        Answered(
            "left-join-public",
            "adult",
            "SELECT COUNT(*), COUNT(l.level) FROM adult a LEFT JOIN edu_levels l ON a.education = l.education",
            lambda _, f: {(): (len(f["adult"]), len(_edu(f)))},
        ),
        Answered(
            "join-public-with-repeated-keys",
            "pums",
            "SELECT COUNT(*), SUM(p.income) FROM pums p JOIN educ_names n ON p.educ = n.educ",
            lambda _, f: {
                (): (len(_pums_names(f)), float(clip(_pums_names(f).income, *p["income"]).sum()))
            },
        ),
        Answered(
            "join-private-on-unit",
            "pums",
            "SELECT p.sex, COUNT(*), AVG(v.income) FROM pums p JOIN visits v ON p.pid = v.pid GROUP BY p.sex",
            lambda _, f: {
                (s,): (
                    s,
                    int((f["pums"].sex == s).sum()),
                    mean_or_mid(f["pums"][f["pums"].sex == s].income, *p["income"]),
                )
                for s in (0, 1)
            },
        ),
        Answered(
            "exists-on-unit",
            "pums",
            "SELECT sex, COUNT(*), SUM(age) FROM pums p WHERE EXISTS "
            "(SELECT * FROM visits v WHERE v.pid = p.pid AND v.income > 50000) GROUP BY sex",
            lambda _, f: {
                (s,): (
                    s,
                    int(((f["pums"].sex == s) & (f["pums"].income > 50000)).sum()),
                    int(f["pums"][(f["pums"].sex == s) & (f["pums"].income > 50000)].age.sum()),
                )
                for s in (0, 1)
            },
        ),
        Answered(
            "not-in-on-unit",
            "pums",
            "SELECT COUNT(*) FROM pums WHERE pid NOT IN (SELECT pid FROM visits WHERE income < 2e4)",
            lambda _, f: {(): (int((~(f["pums"].income < 20000)).sum()),)},
        ),
        Answered(
            "subquery-derived-column",
            "pums",
            "SELECT AVG(k) FROM (SELECT income / 1000 AS k FROM pums WHERE age > 30) t",
            lambda _, f: {
                (): (
                    mean_or_mid(
                        clip(f["pums"][f["pums"].age > 30].income, *p["income"]) / 1000, 0, 500
                    ),
                )
            },
        ),
        Answered(
            "cte-filter-and-group",
            "adult",
            "WITH young AS (SELECT sex, age, hours_per_week AS h FROM adult WHERE age < 30) SELECT sex, COUNT(*), AVG(h) FROM young GROUP BY sex",
            lambda _, f: {
                (s,): (
                    s,
                    int(((f["adult"].age < 30) & (f["adult"].sex == s)).sum()),
                    mean_or_mid(
                        f["adult"][(f["adult"].age < 30) & (f["adult"].sex == s)].hours_per_week,
                        *b["hours_per_week"],
                    ),
                )
                for s in ("Female", "Male", "Unknown")
            },
        ),
        Answered(
            "per-unit-aggregate",
            "pums",
            "SELECT AVG(n), SUM(s) FROM (SELECT pid, COUNT(*) AS n, SUM(income) AS s FROM pums GROUP BY pid) t",
            lambda _, f: {(): (1.0, float(clip(f["pums"].income, *p["income"]).sum()))},
        ),
        Answered(
            "per-unit-aggregate-grouped-by-value",
            "pums",
            "SELECT n, COUNT(*) FROM (SELECT pid, COUNT(*) AS n FROM pums GROUP BY pid) t GROUP BY n",
            lambda _, f: {(0,): (0, 0), (1,): (1, len(f["pums"])), (2,): (2, 0)},
        ),
        Answered(
            "having-order-limit",
            "adult",
            "SELECT education, COUNT(*) AS n FROM adult GROUP BY education HAVING COUNT(*) > 1000 ORDER BY n DESC LIMIT 3",
            lambda _, f: {
                (k,): (k, int(v)) for k, v in f["adult"].education.value_counts().head(3).items()
            },
            ordered=True,
        ),
        Answered(
            "order-by-hidden-aggregate",
            "adult",
            "SELECT race FROM adult GROUP BY race ORDER BY AVG(age) DESC LIMIT 2",
            lambda _, f: {
                (k,): (k,)
                for k in f["adult"]
                .assign(a=f["adult"].age.clip(*b["age"]))
                .groupby("race")
                .a.mean()
                .sort_values(ascending=False)
                .head(2)
                .index
            },
            ordered=True,
        ),
        Answered(
            "post-processing-round-and-clamp",
            "adult",
            "SELECT ROUND(AVG(age), 1) AS a, GREATEST(COUNT(*) - 32000, 0) AS c FROM adult",
            lambda _, f: {
                (): (
                    round(mean_or_mid(f["adult"].age, *b["age"]) + 1e-12, 1),
                    max(len(f["adult"]) - 32000, 0),
                )
            },
        ),
        Answered(
            "case-bins-with-else",
            "adult",
            "SELECT CASE WHEN hours_per_week < 35 THEN 'part' ELSE 'full' END AS t, COUNT(*) FROM adult GROUP BY t",
            lambda _, f: {
                ("part",): ("part", int((f["adult"].hours_per_week < 35).sum())),
                ("full",): ("full", int((f["adult"].hours_per_week >= 35).sum())),
            },
        ),
        Answered(
            "private-keys-expression",
            "pums",
            "SELECT FLOOR(income / 100000) AS band, COUNT(*) FROM pums GROUP BY band",
            lambda _, f: {
                (int(k),): (int(k), int(v))
                for k, v in (f["pums"].income // 100000).value_counts().items()
            },
            delta=1e-6,
        ),
        Answered(
            "bigquery-syntax",
            "pums",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, privacy_unit_column = pid) "
            "sex, COUNT(*), AVG(income, contribution_bounds_per_group => (0, 100000)) FROM pums GROUP BY sex",
            lambda _, f: {
                (s,): (
                    s,
                    int((f["pums"].sex == s).sum()),
                    mean_or_mid(f["pums"][f["pums"].sex == s].income, 0, 100000),
                )
                for s in (0, 1)
            },
        ),
        Answered(
            "bigquery-sum-per-unit",
            "pums",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_groups_contributed = 1) SUM(income, contribution_bounds_per_group => (0, 50000)) FROM pums",
            lambda _, f: {(): (float(f["pums"].income.clip(0, 50000).sum()),)},
        ),
        Answered(
            "count-distinct-unit-grouped",
            "pums",
            "SELECT married, COUNT(DISTINCT pid) FROM pums GROUP BY married",
            lambda _, f: {(m,): (m, int((f["pums"].married == m).sum())) for m in (0, 1)},
        ),
        Answered(
            "sum-of-product-with-derived-bounds",
            "pums",
            "SELECT SUM(age * educ) FROM pums",
            lambda _, f: {
                (): (int((f["pums"].age.clip(0, 100) * f["pums"].educ.clip(1, 16)).sum()),)
            },
        ),
        Answered(
            "integer-division-inside-subquery",
            "adult",
            "SELECT COUNT(*) FROM (SELECT age FROM adult WHERE age / 10 = 3 AND age % 7 <> 0) t",
            lambda _, f: {
                (): (int(((f["adult"].age // 10 == 3) & (f["adult"].age % 7 != 0)).sum()),)
            },
        ),
        Answered(
            "null-key-from-coalesce",
            "adult",
            "SELECT COALESCE(workclass, 'missing') AS w, COUNT(*) FROM adult GROUP BY w",
            lambda _, f: {
                (k,): (k, int(v))
                for k, v in f["adult"].workclass.fillna("missing").value_counts().items()
            },
        ),
        Answered(
            "negative-round-digits",
            "adult",
            "SELECT ROUND(COUNT(*), -2) AS n, ROUND(AVG(age), -1) AS a FROM adult",
            lambda _, f: {
                (): (
                    float(round(len(f["adult"]), -2)),
                    float(round(mean_or_mid(f["adult"].age, *b["age"]), -1)),
                )
            },
        ),
        Answered(
            "qualified-names-and-aliases",
            "adult",
            "SELECT a.sex AS s, COUNT(a.age) AS n FROM adult AS a WHERE a.age > 60 GROUP BY s",
            lambda _, f: {
                (s,): (s, int(((f["adult"].age > 60) & (f["adult"].sex == s)).sum()))
                for s in ("Female", "Male", "Unknown")
            },
        ),
    ]


def refused() -> list[Refused]:
    return [
        Refused(
            "select-star",
            "adult",
            "SELECT * FROM adult",
            "SELECT",
            "SELECT * returns individual rows",
            True,
        ),
        Refused(
            "bare-column",
            "adult",
            "SELECT age FROM adult",
            "SELECT",
            "neither aggregated nor in GROUP BY",
            True,
        ),
        Refused(
            "bare-column-with-agg",
            "adult",
            "SELECT age, COUNT(*) FROM adult",
            "SELECT",
            "neither aggregated",
            True,
        ),
        Refused(
            "unknown-table",
            "adult",
            "SELECT COUNT(*) FROM nosuch",
            "FROM",
            "unknown table 'nosuch'",
        ),
        Refused(
            "unknown-column",
            "adult",
            "SELECT COUNT(agee) FROM adult",
            "SELECT",
            "unknown column 'agee'",
        ),
        Refused(
            "unknown-column-where",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE agee > 3",
            "WHERE",
            "unknown column 'agee'",
        ),
        Refused(
            "unsupported-aggregate",
            "adult",
            "SELECT MODE(age) FROM adult",
            "SELECT",
            "not supported",
        ),
        Refused(
            "unbounded-sum",
            "adult",
            "SELECT SUM(fnlwgt) FROM adult",
            "SELECT",
            "no public bounds",
            True,
        ),
        Refused(
            "avg-of-text",
            "adult",
            "SELECT AVG(education) FROM adult",
            "SELECT",
            "needs a numeric argument",
        ),
        Refused(
            "private-keys-without-delta",
            "adult",
            "SELECT occupation, COUNT(*) FROM adult GROUP BY occupation",
            "GROUP BY",
            "needs a delta",
            True,
        ),
        Refused(
            "random",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE RANDOM() > 0.5",
            "WHERE",
            "not supported",
        ),
        Refused(
            "type-mismatch",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE age > '40'",
            "WHERE",
            "cannot compare a int with a str",
        ),
        Refused(
            "cast",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE CAST(sex AS INT) = 1",
            "WHERE",
            "CAST",
        ),
        Refused(
            "non-boolean-where",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE age",
            "WHERE",
            "not true/false",
        ),
        Refused(
            "in-subquery",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE age IN (SELECT 1)",
            "WHERE",
            "the subquery reads no table",
        ),
        Refused(
            "self-join",
            "adult",
            "SELECT COUNT(*) FROM adult a JOIN adult b ON a.age = b.age",
            "JOIN",
            "two private tables",
            True,
        ),
        Refused(
            "cross-join",
            "adult",
            "SELECT COUNT(*) FROM adult CROSS JOIN edu_levels",
            "JOIN",
            "not supported",
        ),
        Refused(
            "right-join",
            "adult",
            "SELECT COUNT(*) FROM adult a RIGHT JOIN edu_levels l ON a.education = l.education",
            "JOIN",
            "not supported",
        ),
        Refused(
            "join-inequality",
            "adult",
            "SELECT COUNT(*) FROM adult a JOIN edu_levels l ON a.education <> l.education",
            "JOIN",
            "one equality",
        ),
        Refused(
            "join-type-mismatch",
            "adult",
            "SELECT COUNT(*) FROM adult a JOIN edu_levels l ON a.age = l.education",
            "JOIN",
            "compares a int with a str",
        ),
        Refused(
            "public-rows-private-with",
            "adult",
            "WITH a AS (SELECT * FROM adult) SELECT COUNT(*) FROM edu_levels",
            "FROM",
            "public tables only",
        ),
        Refused(
            "exists-private-uncorrelated",
            "pums",
            "SELECT COUNT(*) FROM pums WHERE EXISTS (SELECT * FROM visits WHERE income > 400000)",
            "WHERE",
            "must be correlated on the privacy unit",
            True,
        ),
        Refused(
            "in-private-not-on-unit",
            "pums",
            "SELECT COUNT(*) FROM pums p WHERE p.age IN (SELECT v.pid FROM visits v)",
            "WHERE",
            "must be correlated on the privacy unit",
            True,
        ),
        Refused(
            "exists-private-row-unit",
            "adult",
            "SELECT COUNT(*) FROM edu_levels l JOIN adult a ON a.education = l.education "
            "WHERE EXISTS (SELECT * FROM adult b WHERE b.age = a.age)",
            "WHERE",
            "must be correlated on the privacy unit",
            True,
        ),
        Refused(
            "exists-inside-or",
            "pums",
            "SELECT COUNT(*) FROM pums p WHERE age > 30 OR EXISTS "
            "(SELECT * FROM visits v WHERE v.pid = p.pid)",
            "WHERE",
            "only as a condition of WHERE joined to the others by AND",
        ),
        Refused(
            "scalar-subquery",
            "pums",
            "SELECT COUNT(*) FROM pums WHERE income BETWEEN (SELECT AVG(income) FROM visits) AND 1",
            "WHERE",
            "a subquery as a value is answered only beside a comparison or arithmetic operator",
            True,
        ),
        Refused(
            "exists-aggregate",
            "pums",
            "SELECT COUNT(*) FROM pums p WHERE EXISTS "
            "(SELECT COUNT(*) FROM visits v WHERE v.pid = p.pid)",
            "WHERE",
            "cannot select an aggregate",
            True,
        ),
        Refused(
            "exists-grouped",
            "pums",
            "SELECT COUNT(*) FROM pums p WHERE EXISTS "
            "(SELECT v.pid FROM visits v WHERE v.pid = p.pid GROUP BY v.pid)",
            "WHERE",
            "GROUP BY is not supported in an EXISTS or IN subquery",
            True,
        ),
        Refused(
            "in-two-columns",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE education IN (SELECT education, level FROM edu_levels)",
            "WHERE",
            "selects one column",
        ),
        Refused(
            "in-other-type",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE age IN (SELECT education FROM edu_levels)",
            "WHERE",
            "IN compares a int with a str",
        ),
        Refused(
            "subquery-no-alias",
            "adult",
            "SELECT COUNT(*) FROM (SELECT age FROM adult)",
            "FROM",
            "needs an alias",
        ),
        Refused(
            "subquery-limit",
            "adult",
            "SELECT COUNT(*) FROM (SELECT age FROM adult LIMIT 10) t",
            "LIMIT",
            "inside a subquery",
            False,
        ),
        Refused(
            "subquery-group-not-unit",
            "adult",
            "SELECT AVG(n) FROM (SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex) t",
            "GROUP BY",
            "privacy unit",
            True,
        ),
        Refused(
            "per-unit-group-by-other",
            "pums",
            "SELECT AVG(n) FROM (SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex) t",
            "GROUP BY",
            "GROUP BY the privacy unit",
            True,
        ),
        Refused("distinct", "adult", "SELECT DISTINCT sex FROM adult", "SELECT", "DISTINCT", True),
        Refused(
            "window",
            "adult",
            "SELECT SUM(age) OVER () FROM adult",
            "SELECT",
            "window functions",
            True,
        ),
        Refused("nested-aggregate", "adult", "SELECT SUM(COUNT(*)) FROM adult", "SELECT", "nested"),
        Refused(
            "quantile-out-of-range",
            "adult",
            "SELECT QUANTILE(age, 1.5) FROM adult",
            "SELECT",
            "between 0 and 1",
        ),
        Refused(
            "order-position",
            "adult",
            "SELECT COUNT(*) FROM adult ORDER BY 3",
            "ORDER BY",
            "does not name",
        ),
        Refused(
            "limit-expression",
            "adult",
            "SELECT COUNT(*) FROM adult LIMIT 1 + 1",
            "LIMIT",
            "non-negative integer",
        ),
        Refused(
            "group-position",
            "adult",
            "SELECT COUNT(*) FROM adult GROUP BY 7",
            "GROUP BY",
            "does not name",
        ),
        Refused(
            "group-by-aggregate",
            "adult",
            "SELECT COUNT(*) FROM adult GROUP BY COUNT(*)",
            "GROUP BY",
            "cannot contain aggregates",
        ),
        Refused("qualified-table", "adult", "SELECT COUNT(*) FROM x.adult", "FROM", "qualified"),
        Refused(
            "unknown-alias",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE b.age > 1",
            "WHERE",
            "unknown table or alias 'b'",
        ),
        Refused(
            "ambiguous-column",
            "adult",
            "SELECT COUNT(education) FROM adult a JOIN edu_levels l ON a.education = l.education",
            "SELECT",
            "ambiguous",
        ),
        Refused(
            "unbounded-division",
            "pums",
            "SELECT SUM(income / age) FROM pums",
            "SELECT",
            "cannot be derived",
            True,
        ),
        Refused(
            "unit-column-mismatch",
            "pums",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = age) COUNT(*) FROM pums",
            "WITH DIFFERENTIAL_PRIVACY",
            "does not match",
            True,
        ),
        Refused(
            "unknown-option",
            "pums",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, sensitivity = 3) COUNT(*) FROM pums",
            "WITH DIFFERENTIAL_PRIVACY",
            "unknown option",
        ),
        Refused(
            "bounds-without-clause",
            "pums",
            "SELECT SUM(income, contribution_bounds_per_group => (0, 10)) FROM pums",
            "SELECT",
            "belongs to SELECT WITH DIFFERENTIAL_PRIVACY",
        ),
        Refused(
            "bigquery-mixed",
            "pums",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*), MEDIAN(age) FROM pums",
            "SELECT",
            "mixes",
        ),
        Refused("syntax", "adult", "SELECT COUNT(* FROM adult", "SELECT", "syntax error"),
        Refused("empty", "adult", "   ", "statement", "empty"),
        Refused(
            "two-statements",
            "adult",
            "SELECT COUNT(*) FROM adult; SELECT 1",
            "statement",
            "one statement",
        ),
        Refused("delete", "adult", "DELETE FROM adult", "statement", "only SELECT"),
        Refused(
            "with-recursive",
            "adult",
            "WITH RECURSIVE t AS (SELECT 1) SELECT COUNT(*) FROM t",
            "WITH",
            "RECURSIVE",
        ),
        Refused(
            "no-aggregate",
            "adult",
            "SELECT sex FROM adult GROUP BY sex HAVING sex <> 'Male'",
            "SELECT",
            "asks only for the groups, and these are public",
            False,
        ),
        Refused(
            "no-aggregate-no-group",
            "adult",
            "SELECT 'x' FROM adult",
            "SELECT",
            "no aggregate",
            True,
        ),
        Refused(
            "like-on-number",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE age LIKE '1%'",
            "WHERE",
            "LIKE applies to text",
        ),
        Refused(
            "join-on-per-unit-aggregate",
            "pums",
            "SELECT COUNT(*) FROM (SELECT pid, COUNT(*) AS n FROM pums GROUP BY pid) t JOIN educ_names e ON t.n = e.educ",
            "JOIN",
            "cannot be joined",
            True,
        ),
        Refused(
            "join-int-with-float",
            "pums",
            "SELECT COUNT(*) FROM pums p JOIN educ_names e ON p.income = e.educ",
            "JOIN",
            "compares a float with a int",
        ),
        Refused(
            "self-referencing-cte",
            "adult",
            "WITH t AS (SELECT age FROM t) SELECT COUNT(*) FROM t",
            "WITH",
            "refers to itself",
        ),
        Refused(
            "semi-join",
            "adult",
            "SELECT COUNT(*) FROM adult a SEMI JOIN edu_levels l ON a.education = l.education",
            "JOIN",
            "SEMI JOIN is not supported",
        ),
        Refused(
            "anti-join",
            "adult",
            "SELECT COUNT(*) FROM adult a ANTI JOIN edu_levels l ON a.education = l.education",
            "JOIN",
            "ANTI JOIN is not supported",
        ),
        Refused(
            "natural-join",
            "adult",
            "SELECT COUNT(*) FROM adult a NATURAL JOIN edu_levels l",
            "JOIN",
            "not supported",
        ),
        Refused(
            "tablesample",
            "adult",
            "SELECT COUNT(*) FROM adult TABLESAMPLE 10%",
            "FROM",
            "TABLESAMPLE is not supported",
        ),
        Refused(
            "using-sample",
            "adult",
            "SELECT COUNT(*) FROM adult USING SAMPLE 10%",
            "USING SAMPLE",
            "USING SAMPLE is not supported",
        ),
        Refused(
            "tablesample-in-subquery",
            "adult",
            "SELECT COUNT(*) FROM (SELECT age FROM adult TABLESAMPLE 5%) t",
            "FROM",
            "TABLESAMPLE",
        ),
        Refused(
            "group-by-rollup",
            "adult",
            "SELECT sex, COUNT(*) FROM adult GROUP BY ROLLUP (sex)",
            "GROUP BY",
            "ROLLUP",
        ),
        Refused(
            "group-by-all",
            "adult",
            "SELECT sex, COUNT(*) FROM adult GROUP BY ALL",
            "GROUP BY",
            "GROUP BY ALL",
        ),
        Refused(
            "qualify",
            "adult",
            "SELECT COUNT(*) FROM adult QUALIFY 1 = 1",
            "QUALIFY",
            "QUALIFY is not supported",
        ),
        Refused(
            "floor-digits",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE FLOOR(hours_per_week, 1) > 3",
            "WHERE",
            "not supported",
        ),
        Refused(
            "limit-with-ties",
            "adult",
            "SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY 2 LIMIT 1 WITH TIES",
            "LIMIT",
            "not supported",
        ),
        Refused(
            "unknown-function-named-as-written",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE FLOR(age) > 3",
            "WHERE",
            "the function FLOR is not supported here",
        ),
        Refused(
            "unknown-aggregate-close-names",
            "adult",
            "SELECT VARIANSE(age) FROM adult",
            "SELECT",
            "did you mean VARIANCE",
        ),
        Refused(
            "deep-parentheses",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE " + "(" * 45 + "age > 3" + ")" * 45,
            "WHERE",
            "nested more than",
        ),
        Refused(
            "deep-case",
            "adult",
            "SELECT SUM("
            + "CASE WHEN age > 1 THEN " * 30
            + "1"
            + " ELSE 0 END" * 30
            + ") FROM adult",
            "SELECT",
            "nested more than",
        ),
        Refused(
            "deep-subqueries",
            "adult",
            "SELECT COUNT(*) FROM " + "(SELECT age FROM " * 30 + "adult" + ") t" * 30,
            "FROM",
            "nested more than",
        ),
        Refused(
            "long-or-chain",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE " + " OR ".join(f"age = {i}" for i in range(160)),
            "WHERE",
            "nested more than",
        ),
        Refused(
            "unterminated-comment",
            "adult",
            "SELECT COUNT(*) FROM adult /* no end",
            "FROM",
            "comment is not closed",
        ),
        Refused(
            "unterminated-string",
            "adult",
            "SELECT COUNT(*) FROM adult WHERE sex = 'Male",
            "WHERE",
            "string is not closed",
        ),
        Refused(
            "second-statement-after-comment",
            "adult",
            "SELECT COUNT(*) FROM adult; /* note */ SELECT 1",
            "statement",
            "a second statement starts here",
        ),
        Refused(
            "aggregate-filter",
            "adult",
            "SELECT COUNT(*) FILTER (WHERE age > 30) FROM adult",
            "SELECT",
            "FILTER (WHERE ...) is not supported",
        ),
        Refused(
            "order-inside-aggregate",
            "adult",
            "SELECT SUM(age ORDER BY age) FROM adult",
            "SELECT",
            "ORDER BY inside an aggregate",
        ),
        Refused(
            "asof-join",
            "adult",
            "SELECT COUNT(*) FROM adult a ASOF JOIN edu_levels l ON a.education = l.education",
            "JOIN",
            "ASOF JOIN is not supported",
        ),
        Refused(
            "distinct-on",
            "adult",
            "SELECT DISTINCT ON (sex) COUNT(*) FROM adult",
            "SELECT",
            "DISTINCT ON",
        ),
        Refused(
            "max-groups-contributed-huge",
            "pums",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_groups_contributed = 10000000000) COUNT(*) FROM pums",
            "WITH DIFFERENTIAL_PRIVACY",
            "from 1 to 1,000,000",
        ),
        Refused(
            "round-digits",
            "adult",
            "SELECT ROUND(COUNT(*), -400) FROM adult",
            "SELECT",
            "whole number of digits",
        ),
    ]


def answered() -> list[Answered]:
    return generated() + handwritten()
