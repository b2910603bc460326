"""Releases: products published whole rather than one query answer at a time.

Each release is planned here — what the engine must count exactly, which mechanism adds the noise,
what loss that costs — from the catalog alone, before any data is read; the engine's session runs
the plan through the data gate and records it in the ledger like any query.

* :mod:`~dalenius.releases.density`: private density curves and surfaces (the Gaussian-process
  mechanism of Hall, Rinaldo & Wasserman).
* :mod:`~dalenius.releases.hierarchy`: consistent hierarchical tables (noisy counts at every level,
  least squares, then non-negative integers that add up, as in the Census TopDown algorithm).
* :mod:`~dalenius.releases.synthetic`: synthetic microdata with MST (noisy 1- and 2-way marginals
  on a privately chosen tree, a tree model, rows sampled from it).
* :mod:`~dalenius.releases.aim`: synthetic microdata with AIM (the marginals a workload needs,
  chosen round by round where the model is worst, on a decomposable model:
  :mod:`~dalenius.releases.junction`).
* :mod:`~dalenius.releases.onthemap`: synthetic origin–destination rows with OnTheMap's
  Multinomial–Dirichlet synthesizer (Machanavajjhala et al. 2008).
* :mod:`~dalenius.releases.perturbation`: every row of a table with each value perturbed (record
  perturbation, course document 004), a private number of rows.
* :mod:`~dalenius.releases.continual`: counts (and clipped sums) per period, published as periods
  close under one lifetime loss (the binary-tree mechanism with Honaker's combination).
"""

from dalenius.releases.aim import AimPlan, AimRequest, plan_aim
from dalenius.releases.continual import (
    ContinualPlan,
    SeriesRequest,
    plan_continual,
)
from dalenius.releases.continual_estimates import ContinualRelease
from dalenius.releases.density import (
    DensityPlan,
    DensityRelease,
    DensityRequest,
    plan_density,
    rho_for,
)
from dalenius.releases.hierarchy import (
    HierarchyPlan,
    HierarchyRelease,
    HierarchyRequest,
    plan_hierarchy,
)
from dalenius.releases.onthemap import OnTheMapPlan, OnTheMapRelease, OnTheMapRequest, plan_onthemap
from dalenius.releases.perturbation import (
    PerturbationPlan,
    PerturbationRelease,
    PerturbationRequest,
    plan_perturbation,
)
from dalenius.releases.synthetic import SyntheticRelease, SynthPlan, SynthRequest, plan_synthetic

__all__ = [
    "AimPlan",
    "AimRequest",
    "ContinualPlan",
    "ContinualRelease",
    "DensityPlan",
    "DensityRelease",
    "DensityRequest",
    "HierarchyPlan",
    "HierarchyRelease",
    "HierarchyRequest",
    "OnTheMapPlan",
    "OnTheMapRelease",
    "OnTheMapRequest",
    "PerturbationPlan",
    "PerturbationRelease",
    "PerturbationRequest",
    "SeriesRequest",
    "SynthPlan",
    "SynthRequest",
    "SyntheticRelease",
    "plan_aim",
    "plan_continual",
    "plan_density",
    "plan_hierarchy",
    "plan_onthemap",
    "plan_perturbation",
    "plan_synthetic",
    "rho_for",
]
