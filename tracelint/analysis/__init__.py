"""Baselines and A/B comparison: buckets (iterations, phases, requests), distributions,
confidence intervals and regression gates. See docs/statistics.md for every definition."""
from .buckets import (Bucket, TraceProfile, build_buckets, cold_prefix,  # noqa: F401
                      normalise_kernel_name, normalise_range_name, profile)
from .diff import DiffResult, diff_profiles  # noqa: F401
from .gate import GateResult, run_gate  # noqa: F401
from .perf_baseline import make_baseline, read_metrics_baseline, save_baseline  # noqa: F401
from .stats import GatePolicy, compare, min_samples  # noqa: F401

__all__ = ["Bucket", "TraceProfile", "build_buckets", "cold_prefix", "normalise_kernel_name",
           "normalise_range_name", "profile", "DiffResult", "diff_profiles", "GatePolicy",
           "GateResult", "compare", "min_samples", "make_baseline", "read_metrics_baseline",
           "run_gate", "save_baseline"]
