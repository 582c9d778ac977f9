"""Baselines and A/B comparison: buckets (iterations, phases, requests), distributions,
noise bands and regression gates. See docs/statistics.md for every definition."""
from .buckets import (Bucket, TraceProfile, build_buckets, cold_prefix,  # noqa: F401
                      normalise_kernel_name, normalise_range_name, profile)
from .diff import DiffResult, diff_profiles  # noqa: F401
from .gate import (GatePolicy, GateResult, compare, make_baseline, noise_band,  # noqa: F401
                   read_metrics_baseline, run_gate, save_baseline)

__all__ = ["Bucket", "TraceProfile", "build_buckets", "cold_prefix", "normalise_kernel_name",
           "normalise_range_name", "profile", "DiffResult", "diff_profiles", "GatePolicy",
           "GateResult", "compare", "make_baseline", "noise_band", "read_metrics_baseline",
           "run_gate", "save_baseline"]
