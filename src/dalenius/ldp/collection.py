"""A collection: one protocol, its public parameters, report validation and estimation from JSON.

This is what a collecting server needs and nothing more, independent of any storage or HTTP: a
:class:`CollectionSpec` is built from the curator's JSON settings, tells clients the public
parameters they must encode with (:meth:`~CollectionSpec.client_parameters`), validates one
report at a time — shape and type only, so a raw value can never be accepted in place of a
report of the right form — (:meth:`~CollectionSpec.validate`), turns a list of validated reports
into estimates with error bars (:meth:`~CollectionSpec.estimate`) and says what a client's reports
cost (:meth:`~CollectionSpec.lifetime_epsilon`).

Memoised protocols (``rappor``, ``1bitmean``, ``dbitflip``) take a *memo tag* with each report:
an opaque string the client derives from its secret and the value (the same value, the same tag).
Reports that share a tag and repeat one memoised response exactly are charged once — the server
checks that they do: a 1BitMean or dBitFlip response is a deterministic function of its tag, so
reports that differ under one tag come from a client that does not memoise (or lies), and every
report under that tag is then charged as a fresh report. RAPPOR's instantaneous responses differ by design;
their tag is charged ε₁ once and ε∞ from the second report on (its permanent response, which the
client keeps per tag, bounds them all, Erlingsson et al. 2014).

Estimates count what is independent, not what was sent: repeats of one memoised response are
one observation (:meth:`CollectionSpec.observations`), so a device that reports the same value
every day does not shrink the error bars as if it were many devices.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from dalenius.core.errors import ConfigurationError
from dalenius.core.loss import as_fraction
from dalenius.ldp._base import FrequencyOracle, check_epsilon
from dalenius.ldp.apple import CountMeanSketch
from dalenius.ldp.choose import FACTORIES, make_oracle
from dalenius.ldp.microsoft import DBitFlip, OneBitMean
from dalenius.ldp.numeric import DuchiMean, PiecewiseMean
from dalenius.ldp.rappor import RapporParams, bit_counts, bit_estimates
from dalenius.ldp.rappor import check_reports as check_rappor
from dalenius.ldp.sfp import FragmentPuzzles, PuzzleReports

FREQUENCY = tuple(FACTORIES)
PROTOCOLS = (
    *FREQUENCY,
    "rappor",
    "cms",
    "hcms",
    "sfp",
    "dbitflip",
    "1bitmean",
    "duchi",
    "piecewise",
)
"""Every protocol a collection can use."""
MEMOISED = ("rappor", "1bitmean", "dbitflip")
_COMMON = frozenset({"protocol", "epsilon", "client_cap"})
ALLOWED: dict[str, frozenset[str]] = {
    **{name: frozenset({"domain"}) for name in FACTORIES},
    "rappor": frozenset({"candidates", "bits", "hashes", "cohorts", "f", "p", "q"}),
    "cms": frozenset({"candidates", "hashes", "width", "salt"}),
    "hcms": frozenset({"candidates", "hashes", "width", "salt"}),
    "sfp": frozenset(
        {
            "alphabet",
            "length",
            "tag_bits",
            "hashes",
            "width",
            "fragment_hashes",
            "fragment_width",
            "word_share",
            "salt",
        }
    ),
    "dbitflip": frozenset({"domain", "bits"}),
    "1bitmean": frozenset({"bound", "points"}),
    "duchi": frozenset({"lower", "upper"}),
    "piecewise": frozenset({"lower", "upper"}),
}
"""The settings each protocol takes (besides protocol, epsilon and client_cap)."""
MAX_DOMAIN = 4096
"""The most domain values or candidates one collection lists."""


def _fail(what: str, fix: str | None = None) -> ConfigurationError:
    return ConfigurationError(what, fix=fix)


def _labels(settings: Mapping[str, Any], key: str) -> list[str]:
    values = settings.get(key)
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise _fail(f"{key} must be a list of strings.", fix=f'send "{key}": ["a", "b", ...].')
    if len(values) < 2:
        raise ConfigurationError(
            f"{key} must have at least 2 values, got {len(values)}.",
            why="with one possible value there is nothing to estimate and nothing to protect.",
            fix="list every value a client may hold (at least two).",
        )
    if len(values) > MAX_DOMAIN or len(set(values)) != len(values):
        raise _fail(f"{key} must hold at most {MAX_DOMAIN} distinct strings.")
    return list(values)


def _int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(f"{name} must be an integer, got {value!r}.")
    return value


def _bits(value: object, length: int, name: str) -> list[int]:
    if (
        not isinstance(value, list)
        or len(value) != length
        or not all(isinstance(b, int) and not isinstance(b, bool) and b in (0, 1) for b in value)
    ):
        raise _fail(f"{name} must be a list of exactly {length} bits (0 or 1).")
    return list(value)


class CollectionSpec:
    """A protocol with its parameters, built from the curator's settings.

    Settings (JSON object): ``protocol``; ``epsilon`` (> 0); ``domain`` (list of value labels) for
    the frequency oracles and ``dbitflip``; ``candidates`` for ``rappor``, ``cms`` and ``hcms``;
    ``alphabet``, ``length``, ``tag_bits`` and the sketches' sizes for ``sfp`` (sequence-fragment
    puzzles: no value list, frequent words are discovered); ``bound`` for ``1bitmean``; ``lower``/``upper`` for ``duchi`` and ``piecewise``; and the
    protocol's own parameters (``bits``, ``hashes``, ``cohorts``, ``f``, ``p``, ``q`` for RAPPOR;
    ``hashes``, ``width`` for the sketches; ``bits`` for dBitFlip; ``points`` for 1BitMean).

    Example:
        >>> spec = CollectionSpec({"protocol": "grr", "epsilon": 1, "domain": ["a", "b", "c"]})
        >>> spec.validate(2)
        2
        >>> spent = spec.lifetime_epsilon([1, 1])  # two reports, no memoisation
        >>> spent == 2 * spec.per_report and spent <= 2
        True
    """

    def __init__(self, settings: Mapping[str, Any]) -> None:
        protocol = settings.get("protocol")
        if protocol not in PROTOCOLS:
            raise _fail(
                f"unknown protocol {protocol!r}.", fix=f"use one of {', '.join(PROTOCOLS)}."
            )
        self.protocol: str = str(protocol)
        self.epsilon = check_epsilon(settings.get("epsilon", "missing"))
        self.settings = dict(settings)
        unknown = sorted(set(self.settings) - ALLOWED[self.protocol] - _COMMON)
        if unknown:
            raise _fail(
                f"{self.protocol} does not take the setting(s) {', '.join(unknown)}.",
                fix=f"use only: {', '.join(sorted(ALLOWED[self.protocol] | _COMMON))}.",
            )
        cap = self.settings.get("client_cap")
        self.client_cap = None if cap is None else as_fraction(cap, "client_cap")
        self.labels: list[str] = []
        self._build()

    def _build(self) -> None:
        """Build the protocol's encoder and estimator from the settings (refusing bad ones).

        Long because it has one arm per local protocol, each building that protocol's encoder and
        estimator from its own parameters.
        """
        s, eps = self.settings, self.epsilon
        p = self.protocol
        if p in FREQUENCY or p == "dbitflip":
            self.labels = _labels(s, "domain")
        if p in FREQUENCY:
            self.oracle: FrequencyOracle = make_oracle(p, len(self.labels), eps)
            self.per_report = self.oracle.epsilon
        elif p == "dbitflip":
            self.dbit = DBitFlip(len(self.labels), bits=_int(s.get("bits", 1), "bits"), epsilon=eps)
            self.per_report = self.dbit.epsilon
        elif p == "rappor":
            self.labels = _labels(s, "candidates")
            self.rappor = RapporParams(
                bits=_int(s.get("bits", 16), "bits"),
                hashes=_int(s.get("hashes", 2), "hashes"),
                cohorts=_int(s.get("cohorts", 64), "cohorts"),
                f=s.get("f", Fraction(1, 2)),
                p=s.get("p", Fraction(1, 2)),
                q=s.get("q", Fraction(3, 4)),
            )
            # ε is the deployment's ε∞ bound; the curator's epsilon caps it.
            if self.rappor.epsilon_inf > eps:
                raise ConfigurationError(
                    f"these RAPPOR parameters give ε∞ = {float(self.rappor.epsilon_inf):.4g}, "
                    f"above the collection's epsilon {float(eps):g}.",
                    fix="raise f, bring p and q closer, use fewer hashes, or raise epsilon.",
                )
            self.per_report = self.rappor.epsilon_one
        elif p in ("cms", "hcms"):
            self.labels = _labels(s, "candidates")
            hashes = _int(s.get("hashes", 64), "hashes")
            if len(self.labels) * hashes > 1 << 24:
                raise _fail(
                    f"{len(self.labels):,} candidates × {hashes} hashes is too many hash "
                    "evaluations for each estimate (the limit is 2^24).",
                    fix="use fewer hashes (64 is the usual) or fewer candidates.",
                )
            self.sketch = CountMeanSketch(
                epsilon=eps,
                hashes=_int(s.get("hashes", 64), "hashes"),
                width=_int(s.get("width", 1024), "width"),
                hadamard=p == "hcms",
                salt=self._salt(),
            )
            self.per_report = self.sketch.epsilon
        elif p == "sfp":
            alphabet = s.get("alphabet", "abcdefghijklmnopqrstuvwxyz")
            if not isinstance(alphabet, str):
                raise _fail("alphabet must be a string of the characters words may use.")
            self.puzzle = FragmentPuzzles(
                epsilon=eps,
                word_share=s.get("word_share", Fraction(1, 2)),
                alphabet=alphabet,
                length=_int(s.get("length", 8), "length"),
                tag_bits=_int(s.get("tag_bits", 8), "tag_bits"),
                hashes=_int(s.get("hashes", 64), "hashes"),
                width=_int(s.get("width", 1024), "width"),
                fragment_hashes=_int(s.get("fragment_hashes", 16), "fragment_hashes"),
                fragment_width=_int(s.get("fragment_width", 1024), "fragment_width"),
                salt=self._salt(),
            )
            self.per_report = self.puzzle.epsilon
        elif p == "1bitmean":
            bound = s.get("bound")
            if isinstance(bound, bool) or not isinstance(bound, int | float):
                raise _fail("1bitmean needs a numeric bound (the largest counter value).")
            self.onebit = OneBitMean(
                epsilon=eps, bound=float(bound), points=_int(s.get("points", 64), "points")
            )
            self.per_report = self.onebit.epsilon
        else:
            bounds = [s.get("lower"), s.get("upper")]
            numeric = [
                float(v) for v in bounds if isinstance(v, int | float) and not isinstance(v, bool)
            ]
            if len(numeric) != 2 or not (
                math.isfinite(numeric[0]) and math.isfinite(numeric[1]) and numeric[0] < numeric[1]
            ):
                raise _fail(f"{p} needs numeric lower < upper bounds of the values.")
            self.mean = DuchiMean(epsilon=eps) if p == "duchi" else PiecewiseMean(epsilon=eps)
            self.per_report = self.mean.epsilon

    def _salt(self) -> bytes:
        """The deployment's hash salt from the settings, drawn from the OS (and kept) if absent."""
        salt = self.settings.get("salt")
        if salt is None:
            salt = os.urandom(32).hex()
            self.settings["salt"] = salt
        if not isinstance(salt, str) or len(salt) != 64:
            raise _fail("salt must be 64 hexadecimal characters.")
        try:
            return bytes.fromhex(salt)
        except ValueError:
            raise _fail("salt must be 64 hexadecimal characters.") from None

    @property
    def memoised(self) -> bool:
        """Whether reports carry memo tags (repeats of one memoised response are free)."""
        return self.protocol in MEMOISED

    def stored_settings(self) -> str:
        """The settings as stored (JSON; includes a generated sketch salt)."""
        return json.dumps(self.settings, sort_keys=True, default=str)

    def client_parameters(self) -> dict[str, Any]:
        """What a client needs to encode: the protocol's public parameters."""
        out: dict[str, Any] = {"protocol": self.protocol, "epsilon": float(self.epsilon)}
        p = self.protocol
        if self.labels:
            out["domain" if p in FREQUENCY or p == "dbitflip" else "candidates"] = self.labels
        if p in FREQUENCY:
            out.update(self.oracle.describe())
        elif p == "rappor":
            out.update(self.rappor.describe())
        elif p in ("cms", "hcms"):
            out.update(
                hashes=self.sketch.hashes, width=self.sketch.width, salt=self.settings["salt"]
            )
        elif p == "sfp":
            out.update(self.puzzle.describe(), salt=self.settings["salt"])
        elif p == "dbitflip":
            out.update(bits=self.dbit.bits, buckets=self.dbit.buckets)
        elif p == "1bitmean":
            out.update(bound=self.onebit.bound, points=self.onebit.points)
        else:
            out.update(
                lower=self.settings["lower"],
                upper=self.settings["upper"],
                report_bound=self.mean.report_bound(),
            )
        out["epsilon_per_report"] = float(self.per_report)
        out["memoised"] = self.memoised
        return out

    # -- one report ---------------------------------------------------------------------------

    def validate(self, report: Any) -> Any:
        """The report in canonical JSON form, or a :class:`ConfigurationError` naming the shape."""
        p = self.protocol
        if p in FREQUENCY:
            arr = _as_int_array(report, p)
            return self.oracle.check_reports(arr[None]).tolist()[0]
        if p == "rappor":
            if not isinstance(report, dict) or set(report) != {"cohort", "bits"}:
                raise _fail('a rappor report is {"cohort": j, "bits": [...]}.')
            bits = _bits(report["bits"], self.rappor.bits, "bits")
            check_rappor([_int(report["cohort"], "cohort")], [bits], self.rappor)
            return {"cohort": report["cohort"], "bits": bits}
        if p in ("cms", "hcms"):
            return self._validate_sketch(report, self.sketch)
        if p == "sfp":
            if not isinstance(report, dict) or set(report) != {"word", "position", "fragment"}:
                raise _fail(
                    'an sfp report is {"word": {"row", "column", "sign"}, "position": l, '
                    '"fragment": {"row", "column", "sign"}}.'
                )
            position = _int(report["position"], "position")
            if not 0 <= position < self.puzzle.positions:
                raise _fail(f"position must be in 0..{self.puzzle.positions - 1}.")
            return {
                "word": self._validate_sketch(report["word"], self.puzzle.word),
                "position": position,
                "fragment": self._validate_sketch(report["fragment"], self.puzzle.fragment),
            }
        if p == "dbitflip":
            if not isinstance(report, dict) or set(report) != {"buckets", "bits"}:
                raise _fail('a dbitflip report is {"buckets": [...], "bits": [...]}.')
            buckets = report["buckets"]
            if not isinstance(buckets, list) or not all(
                isinstance(b, int) and not isinstance(b, bool) for b in buckets
            ):
                raise _fail("buckets must be a list of integers.")
            bits = _bits(report["bits"], self.dbit.bits, "bits")
            self.dbit.check_reports([buckets], [bits])
            return {"buckets": buckets, "bits": bits}
        if p == "1bitmean":
            if isinstance(report, bool) or report not in (0, 1) or not isinstance(report, int):
                raise _fail("a 1bitmean report is one bit, 0 or 1.")
            return report
        if isinstance(report, bool) or not isinstance(report, int | float):
            raise _fail(f"a {p} report is one number.")
        bound = self.mean.report_bound()
        if not math.isfinite(report) or abs(report) > bound * (1 + 1e-12):
            raise _fail(f"a {p} report is a number in [-{bound:.6g}, {bound:.6g}].")
        if p == "duchi" and not math.isclose(abs(report), bound, rel_tol=1e-9):
            raise _fail(f"a duchi report is exactly ±{bound:.17g}.")
        return float(report)

    @staticmethod
    def _validate_sketch(report: Any, sk: CountMeanSketch) -> Any:
        if sk.hadamard:
            if not isinstance(report, dict) or set(report) != {"row", "column", "sign"}:
                raise _fail('an hcms report is {"row": j, "column": l, "sign": ±1}.')
            row, col, sign = (_int(report[k], k) for k in ("row", "column", "sign"))
            sk.check_reports([row], [col], [sign])
            return {"row": row, "column": col, "sign": sign}
        if not isinstance(report, dict) or set(report) != {"row", "signs"}:
            raise _fail('a cms report is {"row": j, "signs": [...]}.')
        signs = report["signs"]
        if not isinstance(signs, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in signs
        ):
            raise _fail(f"signs must be a list of exactly {sk.width} integers ±1.")
        row = _int(report["row"], "row")
        sk.check_reports([row], [0], [signs])
        return {"row": row, "signs": signs}

    # -- accounting ------------------------------------------------------------------------

    def lifetime_epsilon(
        self, reports_per_tag: Iterable[int], distinct_per_tag: Iterable[int] | None = None
    ) -> Fraction:
        """A client's lifetime ε from how many reports it sent under each memo tag, and how many
        of them differ (``distinct_per_tag``; all of them when not given).

        Non-memoised protocols: ε per report. RAPPOR: ε₁ for a tag used once, ε∞ for a tag used
        more (all reports of one value are post-processing of its permanent response).
        1BitMean and dBitFlip: ε for a tag whose reports all repeat one response exactly (a
        memoised response, however often it is sent); ε per report for a tag whose reports
        differ — its client does not memoise, so each report was randomised afresh.
        (A client that does not memoise but whose fresh responses happen to coincide cannot be
        told from one that does; the guarantee of a device rests on its client memoising, which
        the server checks whenever the responses differ.)
        """
        counts = list(reports_per_tag)
        distinct = list(distinct_per_tag) if distinct_per_tag is not None else counts
        total = Fraction(0)
        for count, different in zip(counts, distinct, strict=True):
            if count <= 0:
                continue
            if self.protocol == "rappor":
                total += self.rappor.epsilon_one if count == 1 else self.rappor.epsilon_inf
            elif self.memoised:
                total += self.per_report * (1 if different <= 1 else count)
            else:
                total += self.per_report * count
        return total

    @property
    def observations(self) -> str:
        """What one independent observation is, for estimates: ``"tag"`` (RAPPOR: the reports of
        one tag share one permanent response), ``"response"`` (1BitMean, dBitFlip: exact
        repeats of a memoised response are one) or ``"report"`` (every report is fresh).
        """
        if self.protocol == "rappor":
            return "tag"
        return "response" if self.memoised else "report"

    # -- estimation ------------------------------------------------------------------------

    def estimate(self, reports: Sequence[Any], confidence: float = 0.95) -> dict[str, Any]:
        """Estimates with error bars from validated reports (JSON-ready)."""
        p, n = self.protocol, len(reports)
        if p in FREQUENCY:
            arr = np.asarray(reports, dtype=np.int64)
            if p in ("grr", "hr"):
                arr = arr.reshape(-1)
            elif n == 0:
                arr = arr.reshape(0, 3 if p in ("olh", "blh") else len(self.labels))
            est = self.oracle.estimate(arr, confidence)
            return _rows(
                self.labels, est.counts, est.half_width, np.sqrt(est.variance), n, confidence
            )
        if p == "dbitflip":
            chosen = np.asarray([r["buckets"] for r in reports], dtype=np.int64).reshape(
                n, self.dbit.bits
            )
            bits = np.asarray([r["bits"] for r in reports], dtype=np.uint8).reshape(
                n, self.dbit.bits
            )
            counts = self.dbit.estimate_counts(chosen, bits)
            var = self.dbit.variance(np.clip(counts, 0, n) if n else counts)
            return _rows(
                self.labels, counts, _z(confidence) * np.sqrt(var), np.sqrt(var), n, confidence
            )
        if p == "rappor":
            return self._estimate_rappor(reports, confidence)
        if p in ("cms", "hcms"):
            sk = self.sketch
            est = sk.estimate(sk.sketch(*_sketch_arrays(reports, sk)), n, self.labels, confidence)
            return _rows(
                self.labels, est.counts, est.half_width, np.sqrt(est.variance), n, confidence
            )
        if p == "sfp":
            return self._estimate_sfp(reports, confidence)
        return self._estimate_mean(reports, confidence)

    def _estimate_sfp(self, reports: Sequence[Any], confidence: float) -> dict[str, Any]:
        puzzle, n = self.puzzle, len(reports)
        arrays = PuzzleReports(
            _sketch_arrays([r["word"] for r in reports], puzzle.word),
            np.asarray([r["position"] for r in reports], dtype=np.int64).reshape(n),
            _sketch_arrays([r["fragment"] for r in reports], puzzle.fragment),
        )
        found = puzzle.discover(puzzle.aggregate(arrays), confidence=confidence)
        out = _rows(found.words, found.counts, found.half_width, found.stderr, n, confidence)
        out["candidates"] = found.candidates
        out["fragments_kept"] = found.fragments_kept
        return out

    def _estimate_rappor(self, reports: Sequence[Any], confidence: float) -> dict[str, Any]:
        from dalenius.ldp.rappor_decode import decode

        n = len(reports)
        cohorts = np.asarray([r["cohort"] for r in reports], dtype=np.int64)
        bits = np.asarray([r["bits"] for r in reports], dtype=np.uint8).reshape(n, self.rappor.bits)
        counts, totals = bit_counts(cohorts, bits, self.rappor)
        if n == 0:
            zero = np.zeros(len(self.labels))
            return _rows(self.labels, zero, zero, zero, 0, confidence)
        bit_estimates(counts, totals, self.rappor)
        result = decode(counts, totals, self.labels, self.rappor)
        out = _rows(
            self.labels, result.counts, _z(confidence) * result.stderr, result.stderr, n, confidence
        )
        for row, detected, pvalue in zip(out["rows"], result.detected, result.pvalues, strict=True):
            row["detected"] = bool(detected)
            row["p_value"] = float(pvalue)
        out["unexplained"] = result.unexplained
        return out

    def _estimate_mean(self, reports: Sequence[Any], confidence: float) -> dict[str, Any]:
        n = len(reports)
        if n == 0:
            return {
                "kind": "mean",
                "reports": 0,
                "confidence": confidence,
                "mean": None,
                "lower": None,
                "upper": None,
                "stderr": None,
            }
        if self.protocol == "1bitmean":
            est = self.onebit.estimate(np.asarray(reports, dtype=np.int64), confidence)
            scale, shift = 1.0, 0.0
        else:
            est = self.mean.estimate(np.asarray(reports, dtype=np.float64), confidence)
            lo, hi = float(self.settings["lower"]), float(self.settings["upper"])
            scale, shift = (hi - lo) / 2, (hi + lo) / 2
        mean = est.mean * scale + shift
        half = est.half_width * scale
        return {
            "kind": "mean",
            "reports": n,
            "confidence": confidence,
            "mean": mean,
            "lower": mean - half,
            "upper": mean + half,
            "stderr": math.sqrt(est.variance) * scale,
        }


def _z(confidence: float) -> float:
    from dalenius.ldp._base import z_for

    return z_for(confidence)


def _sketch_arrays(
    reports: Sequence[Any], sk: CountMeanSketch
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Validated sketch reports (JSON form) as the arrays :meth:`CountMeanSketch.sketch` takes."""
    n = len(reports)
    rows = np.asarray([r["row"] for r in reports], dtype=np.int64).reshape(n)
    signs: np.ndarray[Any, Any]
    if sk.hadamard:
        cols = np.asarray([r["column"] for r in reports], dtype=np.int64).reshape(n)
        signs = np.asarray([r["sign"] for r in reports], dtype=np.int8).reshape(n)
    else:
        cols = np.zeros(n, dtype=np.int64)
        signs = np.asarray([r["signs"] for r in reports], dtype=np.int8).reshape(n, sk.width)
    return rows, cols, signs


def _as_int_array(report: Any, protocol: str) -> np.ndarray[Any, Any]:
    def ints(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    if ints(report) or (isinstance(report, list) and report and all(ints(v) for v in report)):
        return np.asarray(report, dtype=np.int64)
    shape = {"grr": "one integer", "hr": "one integer", "olh": "[a, b, y]", "blh": "[a, b, y]"}
    raise _fail(f"a {protocol} report is {shape.get(protocol, 'a list of bits')}.")


def _rows(
    labels: Sequence[str],
    counts: np.ndarray[Any, Any],
    half: np.ndarray[Any, Any],
    stderr: np.ndarray[Any, Any],
    n: int,
    confidence: float,
) -> dict[str, Any]:
    """Each value's estimate and error bar; ``rows`` is ``None`` when there are no reports.

    With no reports every estimate would be 0 with an interval of width 0, which reads as a
    confident zero; ``None`` says "no reports yet" (as a mean collection's ``mean`` does).
    """
    if n == 0:
        return {"kind": "frequency", "reports": 0, "confidence": confidence, "rows": None}
    rows = [
        {
            "value": label,
            "estimate": float(c),
            "lower": float(c - h),
            "upper": float(c + h),
            "stderr": float(s),
            "frequency": float(c / n),
        }
        for label, c, h, s in zip(labels, counts, half, stderr, strict=True)
    ]
    return {"kind": "frequency", "reports": n, "confidence": confidence, "rows": rows}


def independent(observations: str, rows: Iterable[tuple[str, str, Any]]) -> list[Any]:
    """The independent observations among ``(client, memo tag, report)`` rows, in arrival order
    of their tags (:attr:`CollectionSpec.observations` says what one is).

    ``"report"``: every report. ``"tag"`` (RAPPOR): the first report of each client's tag.
    ``"response"`` (1BitMean, dBitFlip): one report for a tag whose reports repeat one response
    exactly, every report of a tag whose reports differ (its client does not memoise).

    Example:
        >>> rows = [("a", "t", 1), ("a", "t", 1), ("b", "t", 0), ("b", "t", 1)]
        >>> independent("response", rows)
        [1, 0, 1]
    """
    if observations == "report":
        return [report for _, _, report in rows]
    tags: dict[tuple[str, str], list[Any]] = {}
    for client, memo, report in rows:
        tags.setdefault((client, memo), []).append(report)
    kept: list[Any] = []
    for reports in tags.values():
        same = all(r == reports[0] for r in reports)
        kept.extend(reports[:1] if observations == "tag" or same else reports)
    return kept
