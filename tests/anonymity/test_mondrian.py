"""Mondrian: every released partition satisfies the models; strict keeps equal values together."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from dalenius.anonymity import DistinctLDiversity, KAnonymity, TCloseness, anonymize, check
from dalenius.core.errors import ConfigurationError


def table(n: int, seed: int = 3) -> pd.DataFrame:
    rng = random.Random(seed)
    return pd.DataFrame(
        {
            "age": [rng.randint(18, 90) for _ in range(n)],
            "hours": [rng.choice([10, 20, 30, 40, 40, 40, 50, 60]) for _ in range(n)],
            "sex": [rng.choice("MF") for _ in range(n)],
            "disease": [rng.choice(["flu", "cold", "cancer", "heart"]) for _ in range(n)],
        }
    )


@pytest.mark.parametrize("mode", ["strict", "relaxed"])
@pytest.mark.parametrize(
    "models",
    [[KAnonymity(5)], [KAnonymity(3), DistinctLDiversity(2)], [KAnonymity(4), TCloseness(0.4)]],
)
def test_every_partition_satisfies_the_models(mode: str, models: list) -> None:  # type: ignore[type-arg]
    df = table(400)
    release = anonymize(
        df,
        quasi_identifiers=["age", "hours", "sex"],
        sensitive=["disease"],
        models=models,
        algorithm="mondrian",
        mondrian=mode,
    )
    out = release.to_pandas()
    assert len(out) == len(df)  # Mondrian suppresses nothing
    report = check(out, ["age", "hours", "sex"], ["disease"])
    k = next(m.k for m in models if isinstance(m, KAnonymity))
    assert report.k >= k
    assert release.report.loss["ncp"] < 0.5
    if mode == "strict":
        # records with equal quasi-identifiers are never cut apart
        released = out["age"].astype(str) + "|" + out["hours"].astype(str) + "|" + out["sex"]
        raw = df["age"].astype(str) + "|" + df["hours"].astype(str) + "|" + df["sex"]
        assert (released.groupby(raw).nunique() == 1).all()


def test_mondrian_is_finer_than_the_lattice_here() -> None:
    from dalenius.anonymity import Hierarchy

    df = table(400)
    lattice = anonymize(
        df,
        quasi_identifiers=["age", "hours"],
        k=5,
        hierarchies={
            "age": Hierarchy.intervals([5, 10, 20, 40]),
            "hours": Hierarchy.intervals([20, 40]),
        },
    )
    mondrian = anonymize(df, quasi_identifiers=["age", "hours"], k=5, algorithm="mondrian")
    assert mondrian.report.loss["ncp"] < lattice.report.loss["ncp"]


def test_a_table_that_cannot_satisfy_the_models_is_refused() -> None:
    df = table(50).assign(disease="flu")
    with pytest.raises(ConfigurationError, match="whole table does not satisfy"):
        anonymize(
            df,
            quasi_identifiers=["age"],
            sensitive=["disease"],
            models=[DistinctLDiversity(2)],
            algorithm="mondrian",
        )


@pytest.mark.parametrize(
    ("models", "oracle_models"),
    [
        ([KAnonymity(4)], [("k", 4)]),
        ([KAnonymity(3), DistinctLDiversity(2)], [("k", 3), ("l", 2)]),
        ([TCloseness(0.35)], [("t", 0.35)]),
    ],
)
def test_strict_mondrian_cuts_the_records_as_the_definition_does(
    models: list,  # type: ignore[type-arg]
    oracle_models: list,  # type: ignore[type-arg]
) -> None:
    """Strict Mondrian runs on the weighted frequency set; the partitions are the records' ones."""
    from tests.anonymity import oracle

    df = table(300, seed=11)
    qis = ["age", "hours", "sex"]
    release = anonymize(
        df, quasi_identifiers=qis, sensitive=["disease"], models=models, algorithm="mondrian"
    )
    out = release.to_pandas()
    released = out[qis].astype(str).agg("|".join, axis=1)
    found = {frozenset(ix) for ix in released.groupby(released).indices.values()}
    points = list(
        zip(
            df["age"].rank(method="dense").astype(int),
            df["hours"].rank(method="dense").astype(int),
            df["sex"].eq("M"),
            strict=True,
        )
    )
    expected = set(oracle.mondrian_strict(points, list(df["disease"]), oracle_models))
    assert len(expected) > 8
    assert found == expected
