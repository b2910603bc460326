"""L1: noise mechanisms — exact samplers and their privacy maps, derivations in docs/mechanisms/.

Every sampler here is exact (integer and rational arithmetic decide every random choice), draws
its bits from the operating system's cryptographic generator, and is vectorised. Real-valued
releases are float-safe: outputs lie on a data-independent power-of-two grid. Calibration rounds
toward safety: noise scales up, losses up, accuracy lower bounds down.

Every mechanism offers ``release`` (or ``select``/``privatize``), ``error_bar(confidence)`` and
``loss``; additive ones also ``scale`` (Laplace) or ``sigma``/``sigma2`` (Gaussian).
"""

from dalenius.mechanisms.calibration import (
    accuracy_lower_bound,
    discrete_accuracy_lower_bound,
    discrete_gaussian_delta,
    discrete_gaussian_sigma2,
    gaussian_delta_analytic,
    gaussian_epsilon_analytic,
    gaussian_epsilon_classic,
    gaussian_rho,
    gaussian_sigma2_zcdp,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
    gaussian_sigma_zcdp,
    laplace_delta,
    laplace_epsilon,
    laplace_epsilon_approx,
    laplace_scale,
    laplace_scale_approx,
)
from dalenius.mechanisms.exponential import (
    ExponentialMechanism,
    PermuteAndFlip,
    QuantileRelease,
    bounds_from_bin_counts,
    quantile_from_bin_counts,
    report_noisy_max,
)
from dalenius.mechanisms.gaussian import (
    GridGaussian,
    IntegerGaussian,
    discrete_gaussian,
)
from dalenius.mechanisms.gaussian_process import GaussianProcessMechanism, KernelAxis
from dalenius.mechanisms.laplace import (
    GridLaplace,
    IntegerLaplace,
    discrete_laplace,
)
from dalenius.mechanisms.perturbation import RecordPerturbation
from dalenius.mechanisms.randomized_response import RandomizedResponse

__all__ = [
    "ExponentialMechanism",
    "GaussianProcessMechanism",
    "GridGaussian",
    "GridLaplace",
    "IntegerGaussian",
    "IntegerLaplace",
    "KernelAxis",
    "PermuteAndFlip",
    "QuantileRelease",
    "RandomizedResponse",
    "RecordPerturbation",
    "accuracy_lower_bound",
    "bounds_from_bin_counts",
    "discrete_accuracy_lower_bound",
    "discrete_gaussian",
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma2",
    "discrete_laplace",
    "gaussian_delta_analytic",
    "gaussian_epsilon_analytic",
    "gaussian_epsilon_classic",
    "gaussian_rho",
    "gaussian_sigma2_zcdp",
    "gaussian_sigma_analytic",
    "gaussian_sigma_classic",
    "gaussian_sigma_zcdp",
    "laplace_delta",
    "laplace_epsilon",
    "laplace_epsilon_approx",
    "laplace_scale",
    "laplace_scale_approx",
    "quantile_from_bin_counts",
    "report_noisy_max",
]
