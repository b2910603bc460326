"""RAPPOR's decoder: which candidate strings explain the per-bit estimates, and how often.

Steps (following the CCS 2014 paper):

1. Per cohort ``j`` and bit ``i``, the unbiased estimate ``t̂[j, i]`` of how many Bloom filters
   have the bit set, with its variance (:func:`dalenius.ldp.rappor.bit_estimates`).
2. A linear model: ``t[j, i] = Σ_s (N_j/N)·X[j, s, i]·x_s``, where ``X`` holds the candidates'
   Bloom bits and ``x_s`` is the number of clients holding candidate ``s`` (cohorts are assigned
   uniformly, so each cohort holds its share ``N_j/N`` of every string). Rows are weighted by
   ``1/√Var``.
3. Selection by a **non-negative LASSO** (scikit-learn's ``LassoLarsIC`` with ``positive=True``
   and the BIC; the noise variance is 1 after weighting, so the criterion needs no estimate of
   it). scikit-learn is the field's well-kept implementation of the LARS path with a positivity
   constraint; the original RAPPOR analysis uses glmnet with lower limit 0 to the same effect.
4. **Refit** of the selected candidates by weighted least squares (``numpy.linalg.lstsq``), which
   removes the LASSO's shrinkage; standard errors from ``(XᵀWX)⁻¹``.
5. **Selection with false-discovery control**: one-sided p-values ``P[Z > x̂_s/se_s]`` and the
   Benjamini–Hochberg procedure at level ``fdr`` decide which candidates are reported as present.

Candidates the analyst did not list cannot be found; mass they carry shows up as unexplained
residual (reported as ``unexplained``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from dalenius.core.errors import ConfigurationError, MissingExtraError
from dalenius.ldp.rappor import RapporParams, bit_estimates, bloom_matrix


@dataclass(frozen=True)
class RapporDecoding:
    """Estimated counts of candidate strings.

    Attributes:
        candidates: the candidate strings, in the order given.
        counts: estimated number of clients holding each (0 for those not selected).
        stderr: standard error of each count (0 for those not selected).
        pvalues: one-sided p-values (1 for those not selected).
        detected: whether the candidate passed the false-discovery control.
        reports: the number of reports decoded.
        unexplained: the share of the estimated Bloom bits the model leaves unexplained.
    """

    candidates: list[str]
    counts: npt.NDArray[np.float64]
    stderr: npt.NDArray[np.float64]
    pvalues: npt.NDArray[np.float64]
    detected: npt.NDArray[np.bool_]
    reports: int
    unexplained: float


def benjamini_hochberg(pvalues: npt.NDArray[np.float64], level: float) -> npt.NDArray[np.bool_]:
    """Which hypotheses the Benjamini–Hochberg procedure rejects at false-discovery rate ``level``.

    Example:
        >>> benjamini_hochberg(np.array([0.001, 0.2, 0.03, 0.04]), 0.1).tolist()
        [True, False, True, True]
    """
    m = pvalues.size
    order = np.argsort(pvalues)
    passed = pvalues[order] <= level * np.arange(1, m + 1) / max(m, 1)
    out = np.zeros(m, dtype=bool)
    if passed.any():
        last = int(np.nonzero(passed)[0].max())
        out[order[: last + 1]] = True
    return out


def _design(
    candidates: Sequence[str], params: RapporParams, totals: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    bloom = bloom_matrix(candidates, params).astype(np.float64)  # (m, s, k)
    share = totals / max(int(totals.sum()), 1)
    weighted = bloom * share[:, None, None]
    return weighted.transpose(0, 2, 1).reshape(params.cohorts * params.bits, len(candidates))


def decode(
    counts: npt.NDArray[np.int64],
    totals: npt.NDArray[np.int64],
    candidates: Sequence[str],
    params: RapporParams,
    *,
    fdr: float = 0.05,
) -> RapporDecoding:
    """Decode per-cohort bit counts into candidate counts (see the module docstring)."""
    try:
        from sklearn.linear_model import LassoLarsIC
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise MissingExtraError("scikit-learn", "ldp", "The RAPPOR decoder") from error
    if not candidates or len(set(candidates)) != len(candidates):
        raise ConfigurationError("candidates must be a non-empty list of distinct strings.")
    if not 0 < fdr < 1:
        raise ConfigurationError(f"fdr must be in (0, 1), got {fdr!r}.")
    estimate, variance = bit_estimates(counts, totals, params)
    weights = 1 / np.sqrt(np.maximum(variance.reshape(-1), 1e-12))
    y = estimate.reshape(-1) * weights
    x = _design(candidates, params, totals) * weights[:, None]
    n_reports = int(totals.sum())
    scale = max(float(np.abs(x).max()), 1e-12)
    model = LassoLarsIC(criterion="bic", positive=True, fit_intercept=False, noise_variance=1.0)
    model.fit(x / scale, y)
    selected = np.nonzero(model.coef_ > 0)[0]
    m = len(candidates)
    out_counts, out_se, out_p = np.zeros(m), np.zeros(m), np.ones(m)
    residual = y
    if selected.size:
        sub = x[:, selected]
        beta, *_ = np.linalg.lstsq(sub, y, rcond=None)
        covariance = np.linalg.pinv(sub.T @ sub)
        se = np.sqrt(np.maximum(np.diag(covariance), 0))
        out_counts[selected], out_se[selected] = beta, se
        normal = NormalDist()
        out_p[selected] = [
            1 - normal.cdf(b / s) if s > 0 else 1.0 for b, s in zip(beta, se, strict=True)
        ]
        residual = y - sub @ beta
    detected = benjamini_hochberg(out_p, fdr) & (out_counts > 0)
    total_signal = float(np.sum(y**2))
    unexplained = float(np.sum(residual**2) / total_signal) if total_signal > 0 else 0.0
    return RapporDecoding(
        list(candidates), out_counts, out_se, out_p, detected, n_reports, unexplained
    )
