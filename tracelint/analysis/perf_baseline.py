"""The performance baseline (``tracelint baseline save``): the key metrics of one or more runs
with their samples, the workload's fingerprint, findings identities, git commit, hardware.

Kind ``tracelint-perf-baseline`` (see :mod:`tracelint.engine.baseline` for the accepted-
findings baseline, a different file). Read back through a typed msgspec schema.
"""
from __future__ import annotations

import json
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

import msgspec
import numpy as np

from .. import __version__
from ..efficiency.coverage import merge_summaries
from ..engine.baseline import BASELINE_VERSION, PERF_KIND, decode_typed, read_bytes
from ..io import write_atomic
from .buckets import ITERATION, TraceProfile
from .kernel_calls import PREFIX as CALLS
from .kernel_calls import metric as calls_metric
from .stats import GatePolicy, clean_json, num

#: Samples kept per metric and run; longer runs keep this many evenly spaced order statistics.
MAX_SAMPLES = 4000
#: Kernels (by normalised name) kept in the fingerprint's kernel mix.
TOP_KERNELS = 40


def key_metrics(p: TraceProfile, *, max_buckets: int = 16, min_class_share: float = 0.01
                ) -> dict[str, dict[str, Any]]:
    """The key metrics of one run: {name: {q, samples, unit, better, scope}}.

    * ``iteration.p50`` / ``.p99``: steady iteration times;
    * ``bucket[<key>].p50`` / ``.p99``: the ``max_buckets`` longest other buckets with >= 2
      steady instances (TTFT/TPOT and --bucket patterns always);
    * ``gpu_time``: median GPU time per steady iteration (whole trace, one sample, without
      iterations); ``gpu_time[<class>]`` the same per kernel class with >= 1 % of GPU time;
    * ``kernel_calls[<class>]``: that class's kernel calls, compared call by call with the
      same kernel and launch configuration (kernel_calls.py).
    """
    out: dict[str, dict[str, Any]] = {}
    buckets = [b for b in p.buckets.values() if len(b.steady) >= (1 if b.key == ITERATION else 2)]
    fixed = [b for b in buckets if b.kind in ("iteration", "pattern", "serving")]
    rest = sorted((b for b in buckets if b.kind == "range"), key=lambda b: -float(b.steady.sum()))
    for b in fixed + rest[: max(0, max_buckets - len(fixed))]:
        name = "iteration" if b.kind == "iteration" else f"bucket[{b.key}]"
        for q in (50, 99):
            out[f"{name}.p{q}"] = _metric(b.steady, q, "steady")
    it = p.iteration
    if it is not None and it.gpu_ns is not None:
        gpu = it.gpu_ns[it.cold:].astype(float)
        cls = {c: a[it.cold:].astype(float) for c, a in it.class_ns.items()}
        scope = "per_iteration"
    else:
        gpu = np.array([float(p.gpu_total_ns)])
        cls = {c: np.array([float(v)]) for c, v in p.class_ns.items()}
        scope = "trace"
    out["gpu_time"] = _metric(gpu, 50, scope)
    total = float(gpu.sum())
    for c, v in sorted(cls.items()):
        if total > 0 and float(v.sum()) / total >= min_class_share:
            out[f"gpu_time[{c}]"] = _metric(v, 50, scope)
            if p.calls.get(c):
                out[f"{CALLS}[{c}]"] = calls_metric(p.calls[c])
    return out


def _metric(samples: np.ndarray, q: int, scope: str) -> dict[str, Any]:
    return {"q": q, "samples": np.asarray(samples, dtype=float), "unit": "ns", "better": "lower",
            "scope": scope}


def _keep(samples: np.ndarray) -> list[float]:
    s = np.sort(np.asarray(samples, dtype=float))
    if len(s) > MAX_SAMPLES:
        s = np.quantile(s, np.linspace(0, 1, MAX_SAMPLES))
    return [round(float(x), 1) for x in s]


# ----- the workload fingerprint ----------------------------------------------------------------

_UNNAMED = re.compile(r"^device \d+$")


def producer_family(producer: str) -> str:
    """'Nsight Systems 2022.4.2' -> 'Nsight Systems'; 'Kineto (cupti 22, ...)' -> 'Kineto'."""
    return re.split(r"\s*[(\d]", str(producer or ""), maxsplit=1)[0].strip() or "unknown"


def fingerprint(p: TraceProfile) -> dict[str, Any]:
    """What the workload is: hardware, producer, bucket names, kernel mix (shares of time)."""
    devices = sorted({"unnamed GPU" if _UNNAMED.match(d) else d for d in p.meta.get("devices", [])})
    v = p.meta.get("versions", {})
    tot: dict[str, float] = {}
    for k in p.kernels.values():
        tot[k.key] = tot.get(k.key, 0.0) + float(k.durations.sum())
    all_ns = sum(tot.values()) or 1.0
    top = sorted(tot.items(), key=lambda kv: -kv[1])[:TOP_KERNELS]
    gpu = sum(p.class_ns.values()) or 1.0
    return {"devices": devices, "format": v.get("format", ""),
            "producer": producer_family(v.get("producer", "")),
            "buckets": sorted(p.buckets), "world_size": p.meta.get("world_size"),
            "class_mix": {c: round(x / gpu, 4) for c, x in sorted(p.class_ns.items())},
            "kernel_mix": {k: round(x / all_ns, 4) for k, x in top}}


def mix_overlap(a: dict[str, float], b: dict[str, float]) -> float:
    """Share of time the two mixes have in common: sum over names of min(share_a, share_b)."""
    return float(sum(min(a[k], b[k]) for k in set(a) & set(b)))


def comparability(base: dict[str, Any], cur: dict[str, Any], *, min_overlap: float = 0.5
                  ) -> list[str]:
    """Why the current run is not the baseline's workload (empty: comparable)."""
    why = []
    if base.get("devices") and cur.get("devices") and base["devices"] != cur["devices"]:
        why.append(f"hardware differs: baseline {base['devices']}, current {cur['devices']}")
    for k in ("format", "producer"):
        if base.get(k) and cur.get(k) and base[k] != cur[k]:
            why.append(f"{k} differs: baseline {base[k]!r}, current {cur[k]!r}")
    if base.get("kernel_mix") and cur.get("kernel_mix"):
        ov = mix_overlap(base["kernel_mix"], cur["kernel_mix"])
        if ov < min_overlap:
            why.append(f"kernel mix differs: only {ov:.0%} of GPU time is in kernels both runs have")
    bb, cb = set(base.get("buckets") or ()), set(cur.get("buckets") or ())
    if bb and len(bb & cb) / len(bb) < min_overlap:      # new annotations are no mismatch
        why.append(f"bucket names differ: {len(bb & cb)} of {len(bb)} baseline buckets present")
    return why


# ----- the document ------------------------------------------------------------------------------

def git_commit(cwd: str | Path | None = None) -> dict[str, Any] | None:
    """HEAD commit (and whether the tree is dirty) when cwd is in a git repo, else None."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10)
        return {"commit": head.stdout.strip(),
                "dirty": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None}
    except (OSError, subprocess.SubprocessError):
        return None


def _findings_union(profiles: Sequence[TraceProfile]) -> tuple[list[dict[str, Any]], bool]:
    seen: dict[str, dict[str, Any]] = {}
    ran = bool(profiles) and all(p.lint is not None for p in profiles)
    for p in profiles:
        for ident, info in (p.lint or {}).items():
            e = seen.setdefault(ident, {"identity": ident, "rule": info.get("rule", ""),
                                        "key": info.get("key", ""), "runs": 0})
            e["runs"] += 1
    return sorted(seen.values(), key=lambda e: (e["rule"], e["identity"])), ran


def make_baseline(profiles: Sequence[TraceProfile], *, patterns: Sequence[str] = (),
                  policy: GatePolicy | None = None, cwd: str | Path | None = None,
                  max_buckets: int = 16) -> dict[str, Any]:
    """The baseline document for one or more runs of the same workload."""
    policy = (policy or GatePolicy()).validate()
    per_run = [key_metrics(p, max_buckets=max_buckets) for p in profiles]
    names: list[str] = []
    for m in per_run:
        names += [k for k in m if k not in names]
    metrics = {}
    for k in names:
        ref = next(m[k] for m in per_run if k in m)
        metrics[k] = {"q": ref["q"], "unit": ref["unit"], "better": ref["better"],
                      "scope": ref["scope"],
                      "runs": [num(_stat(m[k])) if k in m else None for m in per_run],
                      "samples": [_keep(m[k]["samples"]) if k in m else [] for m in per_run]}
        if "calls" in ref:           # paired metrics keep every run's calls, in call order
            metrics[k]["calls"] = [{key: [int(x) for x in v] for key, v in m[k]["calls"].items()}
                                   if k in m else {} for m in per_run]
    findings, ran = _findings_union(profiles)
    first = profiles[0].meta if profiles else {}
    return {
        "kind": PERF_KIND, "version": BASELINE_VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "tracelint": __version__, "git": git_commit(cwd),
        "hardware": {"devices": first.get("devices", [])}, "versions": first.get("versions", {}),
        "fingerprint": fingerprint(profiles[0]) if profiles else {},
        "sources": [p.source for p in profiles], "runs": len(profiles),
        "options": {"buckets": list(patterns), **policy.to_dict(), "max_buckets": max_buckets},
        "metrics": metrics, "findings_checked": ran, "findings": findings,
        "shapes": merge_summaries(p.meta.get("shapes") for p in profiles),
    }


def _stat(m: dict[str, Any]) -> float:
    from ..timeline.summary import percentile
    return percentile(m["samples"], m["q"])


def save_baseline(path: str | Path, doc: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(clean_json(doc), indent=1, allow_nan=False) + "\n")


class _Metric(msgspec.Struct, forbid_unknown_fields=False):
    runs: list[Optional[float]]
    samples: list[list[float]] = []
    q: float = 50.0
    unit: str = "ns"
    better: Literal["lower", "higher"] = "lower"
    scope: Optional[str] = None
    calls: list[dict[str, list[float]]] = []


class _Finding(msgspec.Struct, forbid_unknown_fields=False):
    identity: str
    rule: str = ""
    key: str = ""
    runs: int = 1


class _Fingerprint(msgspec.Struct, forbid_unknown_fields=False):
    devices: list[str] = []
    format: str = ""
    producer: str = ""
    buckets: list[str] = []
    kernel_mix: dict[str, float] = {}
    class_mix: dict[str, float] = {}


class _PerfBaseline(msgspec.Struct, forbid_unknown_fields=False):
    kind: Literal["tracelint-perf-baseline"]
    version: Literal[2]
    metrics: dict[str, _Metric]
    runs: int = 1
    options: dict[str, Any] = {}
    fingerprint: _Fingerprint = msgspec.field(default_factory=_Fingerprint)
    findings_checked: bool = False
    findings: list[_Finding] = []


def read_metrics_baseline(path: str | Path) -> dict[str, Any]:
    """A performance baseline, checked field by field (one-line error naming the field)."""
    data = read_bytes(path)
    decode_typed(path, data, PERF_KIND, _PerfBaseline, min_version=BASELINE_VERSION)
    return json.loads(data)
