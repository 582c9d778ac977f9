"""Per-kernel hardware counters (Nsight Compute CSV, CUPTI range profiler in a Kineto trace)
turned into the facts a microarchitecture evidence layer shows.

Why: raw counters mix units (percent of peak, instruction counts, bytes) and names differ by
tool. Percent-of-peak metrics are averaged over the kernel's launches; counts and bytes are
summed; the FP instruction counters Kineto's `kineto__cuda_core_flops` alias records become
the FP32 / FP16 / FP64 shares of the CUDA-core FP instructions (an FMA counts once: shares of
instructions, not of FLOPs), which is what says whether a GEMM ran in FP32 on CUDA cores.
Only percent facts are compared with a rule's expectation (low < 50 % <= high).
"""
from __future__ import annotations

import pandas as pd

from .finding import Measure

#: CUPTI SASS thread-instruction counters per precision (kineto__cuda_core_flops).
_FP_OPS = {"fp64": ("dadd", "dfma", "dmul"), "fp32": ("fadd", "ffma", "fmul"),
           "fp16": ("hadd", "hfma", "hmul")}
_FP_METRIC = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"


def counter_facts(rows: pd.DataFrame) -> tuple[dict[str, Measure], pd.Series]:
    """(facts for an Evidence, the percent-valued series an expectation is judged on).

    rows: kernel, launch, metric, value, unit (one row per launch and metric).
    """
    facts: dict[str, Measure] = {}
    percent: dict[str, float] = {}
    for metric, g in rows.groupby("metric", sort=True):
        unit = str(g["unit"].iat[0] or "")
        if unit == "%" or unit.lower() in ("ratio", "") and "pct" in str(metric):
            value = round(float(g["value"].mean()), 2)
            percent[str(metric)] = value
            facts[str(metric)] = Measure(value, "%")
        elif unit in ("count", "bytes", "inst", "byte", "warp", "cycle"):
            facts[str(metric)] = Measure(float(g["value"].sum()), "bytes" if "byte" in unit else "count")
        else:
            facts[str(metric)] = Measure(round(float(g["value"].mean()), 3), unit)
    by_metric = rows.groupby("metric")["value"].sum()
    per_precision = {p: sum(float(by_metric.get(_FP_METRIC.format(op), 0.0)) for op in ops)
                     for p, ops in _FP_OPS.items()}
    total = sum(per_precision.values())
    have_fp = any(_FP_METRIC.format(op) in by_metric.index for ops in _FP_OPS.values() for op in ops)
    if have_fp and total > 0:
        for p, n in per_precision.items():
            share = round(100.0 * n / total, 2)
            facts[f"{p}_share_of_fp_instructions"] = Measure(share, "%")
            percent[f"{p}_share_of_fp_instructions"] = share
    return facts, pd.Series(percent, dtype=float)
