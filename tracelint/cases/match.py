"""Matching: the cases of a library that a new finding resembles, best first.

Below the lint workflow (tracelint.api calls it on every lint), so it never lints anything.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Iterable

from .model import Case

from .library import default_libraries, load_libraries
from .preconditions import Preconditions

#: How many resembling cases a finding lists, and the least similarity worth listing.
TOP_CASES = 3
MIN_SIMILARITY = 0.3


# ----- reading a finding's numbers ----------------------------------------------------
def finding_value(f, name: str) -> float | None:
    """A number of a finding by name: headline metrics, then evidence facts, then
    impact_share / impact_ns / occurrences."""
    m = f.metrics.get(name)
    if m is not None:
        return float(m.value)
    for ev in f.evidence.values():
        if name in ev.facts:
            return float(ev.facts[name].value)
    if name == "impact_share":
        return float(f.impact_share)
    if name == "impact_ns":
        return float(f.impact_ns)
    if name == "occurrences":
        return float(f.occurrences)
    return None


def finding_unit(f, name: str) -> str | None:
    m = f.metrics.get(name)
    if m is not None:
        return m.unit
    for ev in f.evidence.values():
        if name in ev.facts:
            return ev.facts[name].unit
    return {"impact_share": "ratio", "impact_ns": "ns", "occurrences": "count"}.get(name)


# ----- matching ---------------------------------------------------------------------------
_GPU_FAMILY = re.compile(r"\b(RTX\d{4}|MI\d{3}[A-Z]?|[A-Z]{1,2}\d{2,3}[A-Z]?)\b")


def gpu_family(name: str | None) -> str | None:
    """'NVIDIA H100 80GB HBM3' -> 'H100'; 'NVIDIA GeForce RTX 3090' -> 'RTX3090'."""
    if not name:
        return None
    m = _GPU_FAMILY.search(str(name).upper().replace("RTX ", "RTX"))
    return m.group(1) if m else None


def _framework(meta) -> str | None:
    prod = (getattr(meta, "producer", "") or "").lower()
    if "pytorch" in prod or getattr(meta, "format", "") == "kineto-json":
        return "pytorch"
    return (getattr(meta, "extra", None) or {}).get("framework")      # "jax" from its importer


def finding_context(f, timeline=None) -> dict[str, str]:
    """What a finding's surroundings say: hardware family, framework, kernel class, phase."""
    from ..timeline.classify import kernel_class
    ctx: dict[str, str] = {}
    if timeline is not None:
        dev = timeline.meta.device(f.where.device) if f.where.device is not None else None
        if dev is None and timeline.meta.devices:
            dev = timeline.meta.devices[0]
        fam = gpu_family(dev.name if dev else None)
        if fam:
            ctx["hardware"] = fam
        fw = _framework(timeline.meta)
        if fw:
            ctx["framework"] = fw
    if f.where.kernel:
        ctx["kernel_class"] = kernel_class(f.where.kernel)
    if f.where.nvtx_path:
        ctx["phase"] = " ".join(f.where.nvtx_path).lower()
    return ctx


def _closeness(a: float, b: float) -> float:
    """1 for equal values, 0.5 at a factor of 2, 1/3 at a factor of 4 (log-ratio)."""
    if a == b:
        return 1.0
    if a <= 0 or b <= 0:
        return 0.0
    return 1.0 / (1.0 + abs(math.log2(a / b)))


def similarity(f, case: Case, ctx: dict[str, str] | None = None) -> float:
    """0..1: metric closeness (log-ratio of the values the case and the finding share;
    shares weigh double) combined 70/30 with context agreement (hardware family, kernel
    class, framework, phase); 0 when the case does not judge the finding's rule."""
    if f.rule not in case.rules:
        return 0.0
    num = den = 0.0
    for m in case.key_metrics:
        v = finding_value(f, m.name)
        if v is None or not math.isfinite(v):
            continue
        unit = finding_unit(f, m.name)
        if unit and m.unit and unit != m.unit:
            continue
        w = 1.0 if (m.unit in ("ratio", "%") or m.name.endswith("share")) else 0.5
        num += w * _closeness(float(m.value), v)
        den += w
    metric = num / den if den else None
    ctx = ctx or {}
    tags = {k: v.lower() for k, v in case.tags.items()}
    cnum = cden = 0.0
    if "hardware" in ctx and tags.get("hardware", "unknown") != "unknown":
        cden += 1.0
        cnum += 1.0 if gpu_family(case.tags["hardware"]) == ctx["hardware"] else 0.0
    if "kernel_class" in ctx and "kernel_class" in tags:
        cden += 1.0
        cnum += 1.0 if tags["kernel_class"] == ctx["kernel_class"] else 0.0
    if "framework" in ctx and tags.get("framework", "unknown") != "unknown":
        cden += 0.5
        cnum += 0.5 if ctx["framework"] in tags["framework"] else 0.0
    if "phase" in ctx and tags.get("workload", "unknown") != "unknown":
        cden += 0.5
        words = set(re.findall(r"[a-z0-9]+", ctx["phase"]))
        cnum += 0.5 if words & set(re.findall(r"[a-z0-9]+", tags["workload"])) else 0.0
    context = cnum / cden if cden else None
    if metric is None and context is None:
        return 0.0
    if metric is None:
        return round(0.5 * context, 3)
    if context is None:
        return round(metric, 3)
    return round(0.7 * metric + 0.3 * context, 3)


def case_entry(case: Case, sim: float, why: list[str] | None = None) -> dict[str, Any]:
    return {"id": case.id, "title": case.title, "fix": case.fix,
            "counter_example": case.counter_example, "similarity": sim,
            "rollback": case.rollback.describe(), "label": case.label,
            "why": list(why or [])}


# ----- preconditions ------------------------------------------------------------------------
def trace_context(timeline) -> dict[str, str]:
    """What the trace as a whole is: device class, vendor, workload kind (timeline.classify)."""
    from ..timeline.classify import distinct_names, trace_vendor, workload_kind
    if timeline is None:
        return {}
    names = distinct_names(timeline)
    return {"device": "gpu" if timeline.has_gpu_activity else "cpu",
            "vendor": trace_vendor(timeline, names), "workload": workload_kind(names)}


def _workload_from_tag(text: str) -> tuple[str, ...]:
    t = text.lower()
    if "train" in t or "backward" in t or "optimizer" in t or "fine-tun" in t or "finetun" in t:
        return ("training",)
    if any(w in t for w in ("prefill", "decode", "serving", "ttft", "tpot", "vllm")):
        return ("serving", "inference")
    if "inference" in t:
        return ("inference", "serving")
    return ()


def preconditions(case: Case) -> Preconditions:
    """The case's applies_when; for a case that declares none, what its tags imply: a GPU
    model in tags.hardware means a GPU trace, tags.workload a workload kind."""
    pre = case.applies_when
    if pre.device != "any" or pre.workload or pre.metrics or pre.vendor != "any":
        return pre
    device = "gpu" if gpu_family(case.tags.get("hardware")) else "any"
    return Preconditions(device=device, workload=_workload_from_tag(case.tags.get("workload", "")))


def match_findings(findings, libraries: Iterable[str | Path] | None = None, timeline=None,
                   top: int = TOP_CASES, min_similarity: float = MIN_SIMILARITY) -> None:
    """Fill each finding's `cases` with up to `top` resembling cases of the same rule, best
    first: [{id, title, fix, counter_example, similarity, rollback}]. `libraries` defaults to
    the built-in one; `timeline` (optional) adds hardware / framework context."""
    cases = load_libraries(default_libraries() if libraries is None else libraries)
    by_rule: dict[str, list[Case]] = {}
    for c in cases:
        for r in c.rules:
            by_rule.setdefault(r, []).append(c)
    trace = trace_context(timeline)
    for f in findings:
        cands = by_rule.get(f.rule)
        if not cands:
            continue
        ctx = finding_context(f, timeline)
        scored = []
        for c in cands:
            ok, why = preconditions(c).check(trace, lambda name: finding_value(f, name))
            if not ok:
                continue
            s = similarity(f, c, ctx)
            if s >= min_similarity:
                scored.append((s, c, [f"same rule {f.rule}", *why]))
        scored.sort(key=lambda sc: (-sc[0], sc[1].id))
        seen = {c.get("id") for c in f.cases}
        f.cases = list(f.cases) + [case_entry(c, s, why) for s, c, why in scored[:top]
                                   if c.id not in seen]
        f.cases = f.cases[:top]


