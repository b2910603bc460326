"""L4: syntactic anonymity — k-anonymity, ℓ-diversity, t-closeness and their kin, inside DuckDB.

- :func:`check` reports the models a table satisfies as it is (largest k, ℓ; smallest t, β, δ).
- :func:`anonymize` releases a table that satisfies the requested models: optimal full-domain
  generalisation with record suppression (an exact lattice search) or Mondrian partitioning.
- :class:`Hierarchy` declares how a quasi-identifier is generalised.
- :func:`risk` measures re-identification risk (prosecutor, journalist, marketer, uniqueness).

Syntactic anonymity is not differential privacy: it protects against the linkage attacks its
models name, under the assumption that the quasi-identifiers were chosen right; see
docs/anonymity/ for what each model does and does not protect against.
"""

from dalenius.anonymity.anonymize import Release, UnsatisfiableError, anonymize
from dalenius.anonymity.check import CheckReport, check
from dalenius.anonymity.config import Config, config_from_dict, load_config, parse_config
from dalenius.anonymity.hierarchy import Hierarchy, HierarchyError
from dalenius.anonymity.models import (
    AlphaKAnonymity,
    BetaLikeness,
    DeltaDisclosure,
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    RecursiveCLDiversity,
    TCloseness,
)
from dalenius.anonymity.report import Report
from dalenius.anonymity.risk import RiskReport, risk, zayatz_population_uniques

__all__ = [
    "AlphaKAnonymity",
    "BetaLikeness",
    "CheckReport",
    "Config",
    "DeltaDisclosure",
    "DistinctLDiversity",
    "EntropyLDiversity",
    "Hierarchy",
    "HierarchyError",
    "KAnonymity",
    "RecursiveCLDiversity",
    "Release",
    "Report",
    "RiskReport",
    "TCloseness",
    "UnsatisfiableError",
    "anonymize",
    "check",
    "config_from_dict",
    "load_config",
    "parse_config",
    "risk",
    "zayatz_population_uniques",
]
