"""Is a change real, or inside the noise? Confidence intervals for diff and gate.

Every compared metric is a statistic (a percentile q) of *samples*: the steady-state instances
of a bucket (iterations, phases, requests) or the instances of a kernel. Each side (A =
baseline, B = candidate) has one or more runs. Two sources of noise, two intervals:

* **repeated runs** (a side has >= 2 runs): the run is the unit (a tail percentile still
  needs ``min_samples(q)`` samples in each run, or it is just the run's maximum). Per run the statistic gives
  one value; with means m_A, m_B, the between-run standard deviation s (pooled over the sides
  with >= 2 runs) and df its degrees of freedom, the change m_B/m_A - 1 has the interval
  ``(m_B - m_A ± t_{1-a/2, df} * s * sqrt(1/n_A + 1/n_B)) / m_A`` (Student t);
* **single runs** (one run each side): the instances are the unit. Each side's percentile gets
  its exact distribution-free interval [x_(l), x_(u)] (order statistics, binomial coverage
  >= 1 - a); the change interval is [lo_B/hi_A - 1, hi_B/lo_A - 1]. A percentile q has such an
  interval only from ``min_samples(q)`` instances (P50: 6, P90: 35, P99: 367 at 95 %); below
  that it is *not gated*, and the report says how many are needed.

Verdict: *worse* when the whole interval lies above +floor (the smallest change worth
failing on, default 2 %), *better* when below -floor, *no change* when the interval lies
inside ±floor or the point change does, *uncertain* otherwise (a change may be there, the data
cannot tell): only *worse* fails a gate. See docs/statistics.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..errors import TracelintError
from ..timeline.summary import percentile

#: Two-sided 97.5 % Student t quantiles for df = 1..30 (beyond: Cornish-Fisher expansion).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_Z = {0.90: 1.6449, 0.95: 1.9600, 0.99: 2.5758}


@dataclass
class GatePolicy:
    floor: float = 0.02          # smallest relative change a verdict calls worse/better
    confidence: float = 0.95     # of every interval

    def validate(self) -> "GatePolicy":
        if not (isinstance(self.floor, (int, float)) and math.isfinite(self.floor)
                and 0 <= self.floor < 1):
            raise TracelintError(f"floor must be a number in [0, 1), got {self.floor!r}")
        if self.confidence not in _Z:
            raise TracelintError(f"confidence must be one of {sorted(_Z)}, got {self.confidence!r}")
        return self

    def to_dict(self) -> dict[str, float]:
        return {"floor": self.floor, "confidence": self.confidence}


def t_quantile(df: int, confidence: float = 0.95) -> float:
    """Two-sided Student t quantile t_{1-a/2, df}."""
    z = _Z[confidence]
    if confidence == 0.95 and 1 <= df <= len(_T975):
        return _T975[df - 1]
    d = max(int(df), 1)          # Cornish-Fisher: exact to ~1 % from df 3 on
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    return z + g1 / d + g2 / d ** 2 + g3 / d ** 3


def _binom_cdf(n: int, p: float) -> np.ndarray:
    """P(B <= k) for k = 0..n, B ~ Binomial(n, p) (log-space, stable for large n)."""
    k = np.arange(n + 1)
    lg = np.array([math.lgamma(i + 1) for i in range(n + 1)])
    with np.errstate(divide="ignore"):
        logpmf = lg[n] - lg - lg[::-1] + k * math.log(p) + (n - k) * math.log1p(-p)
    return np.cumsum(np.exp(logpmf))


def order_stat_ranks(n: int, q: float, confidence: float = 0.95) -> tuple[int, int] | None:
    """1-based ranks (l, u) with P(x_(l) <= Q_q <= x_(u)) >= confidence, or None when n
    samples cannot give such an interval."""
    if n < 1 or not 0 < q < 1:
        return None
    # B = number of samples below Q_q ~ Binomial(n, q); x_(l) <= Q <= x_(u) iff l <= B <= u - 1
    a2 = (1 - confidence) / 2
    cdf = _binom_cdf(n, q)
    lo = np.flatnonzero(cdf <= a2)         # l - 1 = largest k with P(B <= k) <= a/2
    hi = np.flatnonzero(1 - cdf <= a2)     # u - 1 = smallest k with P(B > k) <= a/2
    if not len(lo) or not len(hi) or hi[0] > n - 1:
        return None
    return int(lo[-1]) + 1, int(hi[0]) + 1


_MIN: dict[tuple[float, float], int] = {}


def min_samples(q: float, confidence: float = 0.95) -> int:
    """Fewest samples with an exact order-statistic interval for percentile q."""
    key = (q, confidence)
    if key not in _MIN:
        a2 = (1 - confidence) / 2
        p = max(q, 1 - q)
        _MIN[key] = int(math.ceil(math.log(a2) / math.log(p)))   # p^n <= a/2
        while order_stat_ranks(_MIN[key], q, confidence) is None:
            _MIN[key] += 1
    return _MIN[key]


def quantile_interval(samples: np.ndarray, q: float, confidence: float = 0.95
                      ) -> tuple[float, float] | None:
    x = np.sort(np.asarray(samples, dtype=float))
    r = order_stat_ranks(len(x), q, confidence)
    return None if r is None else (float(x[r[0] - 1]), float(x[r[1] - 1]))


@dataclass
class Comparison:
    """One metric, A against B."""

    a: float                         # A's value (mean of its runs' statistics)
    b: float
    change: float | None             # b / a - 1
    low: float | None                # confidence interval of the change
    high: float | None
    verdict: str                     # no change | worse | better | uncertain | not gated | missing
    method: str                      # runs | instances | -
    a_runs: list[float] = field(default_factory=list)
    b_runs: list[float] = field(default_factory=list)
    noise: float | None = None       # between-run coefficient of variation (runs method)
    runs_needed: int | None = None   # runs per side for an interval of ±floor at this noise
    why: str = ""                    # why not gated / uncertain

    @property
    def regression(self) -> bool:
        return self.verdict == "worse"

    def to_dict(self) -> dict[str, Any]:
        return {"a": num(self.a), "b": num(self.b), "change": num(self.change),
                "interval": [num(self.low), num(self.high)], "verdict": self.verdict,
                "regression": self.regression, "method": self.method,
                "a_runs": [num(x) for x in self.a_runs], "b_runs": [num(x) for x in self.b_runs],
                "noise": num(self.noise), "runs_needed": self.runs_needed, "why": self.why}


def num(x):
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return round(x, 6) if abs(x) < 1e6 else round(x, 1)


def median(values: Sequence[float]) -> float:
    v = [float(x) for x in values if x is not None and not _isnan(x)]
    return float(np.median(v)) if v else float("nan")


def _isnan(x) -> bool:
    try:
        return math.isnan(x)
    except TypeError:
        return False


def _verdict(change: float, low: float, high: float, floor: float, better: str) -> str:
    if abs(change) <= floor or (low >= -floor and high <= floor):
        return "no change"
    up = "worse" if better == "lower" else "better"
    down = "better" if better == "lower" else "worse"
    if low > floor:
        return up
    if high < -floor:
        return down
    return "uncertain"


def runs_needed(cv: float, floor: float, confidence: float = 0.95, limit: int = 1000) -> int | None:
    """Runs per side so that the t interval half-width is <= floor at between-run noise cv."""
    if cv <= 0:
        return 2
    for n in range(2, limit + 1):
        if t_quantile(2 * n - 2, confidence) * cv * math.sqrt(2 / n) <= floor:
            return n
    return None


def compare(a_samples: Sequence[np.ndarray], b_samples: Sequence[np.ndarray], q: float = 50.0,
            policy: GatePolicy | None = None, better: str = "lower") -> Comparison:
    """Compare percentile q of per-run samples (one array per run) of A and B."""
    policy = policy or GatePolicy()
    A = [np.asarray(s, dtype=float) for s in a_samples if s is not None and len(s)]
    B = [np.asarray(s, dtype=float) for s in b_samples if s is not None and len(s)]
    ar = [percentile(s, q) for s in A]
    br = [percentile(s, q) for s in B]
    a = float(np.mean(ar)) if ar else float("nan")
    b = float(np.mean(br)) if br else float("nan")
    if not A or not B:
        return Comparison(a, b, None, None, None, "missing", "-", ar, br)
    change = _ratio(b, a)
    need = min_samples(q / 100, policy.confidence)
    if len(A) >= 2 or len(B) >= 2:
        short = [len(x) for x in A + B if 1 < len(x) < need]
        if q != 50 and short:
            why = (f"P{q:g} needs >= {need} samples per run (a run has {min(short)}): below "
                   "that it is the run's maximum, which grows with the run's length")
            return Comparison(a, b, change, None, None, "not gated", "runs", ar, br, why=why)
        sides = [v for v in (ar, br) if len(v) >= 2]
        df = sum(len(v) - 1 for v in sides)
        s = math.sqrt(sum(float(np.var(v, ddof=1)) * (len(v) - 1) for v in sides) / df)
        half = t_quantile(df, policy.confidence) * s * math.sqrt(1 / len(ar) + 1 / len(br))
        low, high = max(_ratio(b - half, a), -1.0), _ratio(b + half, a)   # time >= 0
        cv = s / abs(a) if a else float("inf")
        c = Comparison(a, b, change, low, high, "", "runs", ar, br, cv,
                       runs_needed(cv, policy.floor, policy.confidence))
    else:
        ia = quantile_interval(A[0], q / 100, policy.confidence)
        ib = quantile_interval(B[0], q / 100, policy.confidence)
        if len(A[0]) == 1 and len(B[0]) == 1:
            why = "one value per run (no iterations to spread over): repeat the runs"
            return Comparison(a, b, change, None, None, "not gated", "instances", ar, br, why=why)
        if ia is None or ib is None:
            why = (f"P{q:g} needs >= {need} samples per run for a {policy.confidence:.0%} "
                   f"interval (have {len(A[0])} and {len(B[0])}); repeat the runs or record more")
            return Comparison(a, b, change, None, None, "not gated", "instances", ar, br, why=why)
        low, high = _ratio(ib[0], ia[1]), _ratio(ib[1], ia[0])
        c = Comparison(a, b, change, low, high, "", "instances", ar, br)
    c.verdict = _verdict(change, low, high, policy.floor, better)
    if c.verdict == "uncertain":
        c.why = (f"interval {low:+.1%}..{high:+.1%} crosses ±{policy.floor:.0%}"
                 + (f"; {c.runs_needed} runs per side would resolve ±{policy.floor:.0%}"
                    if c.runs_needed else
                    f"; run-to-run noise ±{c.noise:.0%} is too large to resolve ±{policy.floor:.0%}"
                    " with any practical number of runs" if c.method == "runs" else
                    "; repeat the runs to measure the run-to-run noise"))
    return c


def _ratio(x: float, ref: float) -> float:
    if ref == 0:
        return 0.0 if x == 0 else math.copysign(float("inf"), x)
    return x / ref - 1.0


FORMULA = ("repeated runs: Student-t interval of the change of the per-run statistic; single "
           "runs: exact order-statistic intervals of each side's percentile; kernel_calls: "
           "median ratio of calls paired by kernel and launch configuration; regression when "
           "the whole interval lies above +floor (docs/statistics.md)")


def clean_json(x):
    """NaN / inf -> None / "inf" so the JSON is strict."""
    if isinstance(x, dict):
        return {k: clean_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean_json(v) for v in x]
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if x != x:
            return None
        if x in (float("inf"), float("-inf")):
            return "inf" if x > 0 else "-inf"
        return x
    if isinstance(x, np.integer):
        return int(x)
    return x
