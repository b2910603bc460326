"""The checkers against plain-Python oracles, hand-made cases, and the cases where pyCANON is wrong."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from tests.anonymity import oracle

from dalenius.anonymity import check
from dalenius.core.errors import ConfigurationError


def random_table(seed: int, n: int) -> pd.DataFrame:
    rng = random.Random(seed)
    return pd.DataFrame(
        {
            "a": [rng.choice("xyz") for _ in range(n)],
            "b": [rng.randint(0, 3) for _ in range(n)],
            "s": [rng.choice(["p", "q", "r", "r", "t"]) for _ in range(n)],
            "v": [rng.choice([10, 20, 30, 40, 50, 50]) for _ in range(n)],
        }
    )


@pytest.mark.parametrize("seed", range(8))
def test_every_measure_matches_the_oracle(seed: int) -> None:
    df = random_table(seed, 150)
    report = check(df, ["a", "b"], ["s", "v"])
    groups = oracle.classes(list(df[["a", "b"]].itertuples(index=False, name=None)))
    assert report.k == min(len(m) for m in groups.values())
    assert report.classes == len(groups)
    for rep, column, ordered in (
        (report.sensitive[0], "s", False),
        (report.sensitive[1], "v", True),
    ):
        values = list(df[column])
        q = Counter(values)
        per_class = [Counter(values[i] for i in members) for members in groups.values()]
        assert rep.ordered is ordered
        assert rep.distinct_l == min(len(c) for c in per_class)
        entropy = min(
            math.exp(-sum(x / sum(c.values()) * math.log(x / sum(c.values())) for x in c.values()))
            for c in per_class
        )
        assert rep.entropy_l == pytest.approx(entropy, rel=1e-12)
        emd = oracle.emd_ordered if ordered else oracle.emd_equal
        assert rep.t == pytest.approx(max(emd(c, q) for c in per_class), abs=1e-12)
        assert rep.alpha == pytest.approx(max(max(c.values()) / sum(c.values()) for c in per_class))
        nq = sum(q.values())
        beta = max(
            max(0.0, (c[v] / sum(c.values()) - q[v] / nq) / (q[v] / nq))
            for c in per_class
            for v in c
        )
        assert rep.beta == pytest.approx(beta, rel=1e-12)
        if rep.distinct_l < len(q):
            assert math.isinf(rep.delta)
        if rep.distinct_l >= 2:
            ell = rep.distinct_l
            ratios = []
            for c in per_class:
                r = sorted(c.values(), reverse=True)
                ratios.append(r[0] / sum(r[ell - 1 :]))
            assert rep.recursive_c == pytest.approx(max(ratios))


def test_recursive_diversity_counts_the_tail_from_the_largest() -> None:
    # pyCANON sorts ascending and reports (c, l) = (1, 3) for counts (8, 1, 1); the truth is that
    # (c, 3)-diversity needs 8 < c * 1, i.e. c > 8.
    df = pd.DataFrame({"q": ["g"] * 10, "s": ["a"] * 8 + ["b", "c"]})
    rep = check(df, ["q"], ["s"]).sensitive[0]
    assert rep.distinct_l == 3
    assert rep.recursive_c == 8.0


def test_missing_values_form_their_own_class() -> None:
    # pyCANON drops the missing value of a single quasi-identifier and reports k = 2.
    df = pd.DataFrame({"q": [1, 1, np.nan, 2, 2]})
    assert check(df, ["q"]).k == 1


def test_entropy_l_is_not_truncated() -> None:
    df = pd.DataFrame({"q": ["g"] * 4, "s": ["a", "a", "b", "c"]})
    rep = check(df, ["q"], ["s"]).sensitive[0]
    assert rep.entropy_l == pytest.approx(math.exp(1.5 * math.log(2)))  # 2.83, not 2


def test_t_closeness_is_measured_against_the_original_table() -> None:
    from dalenius.anonymity import Hierarchy, TCloseness, anonymize

    df = pd.DataFrame({"z": ["1", "1", "2", "2", "3", "3"], "s": ["a", "a", "a", "b", "b", "b"]})
    release = anonymize(
        df,
        quasi_identifiers=["z"],
        models=[TCloseness(0.5)],
        sensitive=["s"],
        hierarchies={"z": Hierarchy.identity()},
        suppression_limit=0.4,
    )
    # class z=1 (a, a) is at EMD 0.5 from the original (a: 1/2, b: 1/2); z=3 likewise; z=2 is 0.
    assert release.report.suppressed == 0
    assert release.report.released is not None
    assert release.report.released.sensitive[0].t == pytest.approx(0.5)


def test_bad_input_names_the_column() -> None:
    df = pd.DataFrame({"q": [1, 2], "s": [1, 2]})
    with pytest.raises(ConfigurationError, match="unknown quasi-identifier column 'nope'"):
        check(df, ["nope"])
    with pytest.raises(ConfigurationError, match="both quasi-identifier and sensitive"):
        check(df, ["q"], ["q"])
