"""Findings and their three evidence layers: the contract between rules and reporters.

Every number a finding carries is a Measure with a unit, so reporters never guess units.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]


class Layer(str, Enum):
    SYSTEM = "system"
    KERNEL = "kernel"
    MICROARCH = "microarch"


LAYERS = (Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH)


@dataclass(frozen=True)
class Measure:
    """A number with its unit: ns, bytes, %, count, GB/s, ratio, ..."""

    value: float | int
    unit: str

    def to_dict(self) -> dict[str, Any]:
        v = self.value
        if isinstance(v, float) and v.is_integer() and self.unit in ("ns", "bytes", "count"):
            v = int(v)
        return {"value": v, "unit": self.unit}


@dataclass
class Evidence:
    """One layer's evidence: measured facts, or why it is missing and how to capture it.

    status: measured | not_captured | not_applicable | estimated. `estimated`: computed from a
    model (e.g. FLOPs from op shapes over a datasheet peak), not observed; it carries the
    formula and its inputs, and the verdict weighs it below measured evidence.
    """

    status: str
    summary: str = ""
    facts: dict[str, Measure] = field(default_factory=dict)
    capture_hint: str | None = None
    # True when the measured facts support the finding, False when they contradict it,
    # None when they neither support nor contradict (or nothing was measured).
    supports: bool | None = None
    formula: str | None = None                               # estimated: how it was computed
    inputs: dict[str, Any] = field(default_factory=dict)     # estimated: what went in

    @classmethod
    def measured(cls, summary: str, supports: bool | None = True, **facts: Measure) -> "Evidence":
        return cls("measured", summary, dict(facts), None, supports)

    @classmethod
    def not_captured(cls, summary: str, capture_hint: str) -> "Evidence":
        return cls("not_captured", summary, {}, capture_hint, None)

    @classmethod
    def not_applicable(cls, summary: str) -> "Evidence":
        return cls("not_applicable", summary, {}, None, None)

    @classmethod
    def estimated(cls, summary: str, formula: str, inputs: dict[str, Any] | None = None,
                  supports: bool | None = True, **facts: Measure) -> "Evidence":
        return cls("estimated", summary, dict(facts), None, supports, formula, dict(inputs or {}))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"status": self.status, "summary": self.summary,
                             "facts": {k: m.to_dict() for k, m in self.facts.items()}}
        if self.capture_hint:
            d["capture_hint"] = self.capture_hint
        if self.supports is not None:
            d["supports"] = self.supports
        if self.formula:
            d["formula"] = self.formula
        if self.inputs:
            d["inputs"] = self.inputs
        return d


@dataclass
class Where:
    """Where a finding happened; None for what the trace cannot say."""

    device: int | None = None
    stream: int | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    pid: int | None = None
    tid: int | None = None
    nvtx_path: list[str] = field(default_factory=list)
    iteration: int | None = None
    file: str | None = None
    line: int | None = None
    function: str | None = None
    kernel: str | None = None
    rank: int | None = None
    # What `line` is: "call" (the line making the call), "def" (the function's first line:
    # torch.profiler names frames so), "start" (the line running when profiling began),
    # "native" (a native call-stack frame: function and binary, no line).
    line_kind: str | None = None
    callee: str | None = None          # what the frame was calling (`item`, `mse_loss`)
    library: bool | None = None        # True: no user frame on the stack, this is library code
    module_path: list[str] = field(default_factory=list)   # nn.Module nesting, outermost first

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for k, v in self.__dict__.items():
            if v is None or (isinstance(v, list) and not v):
                continue
            out[k] = v.item() if hasattr(v, "item") else v   # numpy scalars -> Python
        return out

    def source_text(self) -> str:
        """The source location in words that say what the line is, or "" when unknown:
        "at train.py:7 in `log_loss()`", "in `log_loss()`, defined at train.py:6",
        "in module-level code of train.py"."""
        if not self.file:
            return ""
        fn, lib = self.function or "", " (library code)" if self.library else ""
        at = f"{self.file}:{self.line}" if self.line is not None and self.line >= 0 else self.file
        if fn == "<module>":
            text = f"at {at} (module level)" if self.line_kind == "call" else \
                f"in module-level code of {self.file}"
        elif not fn or fn == self.file:
            text = f"at {at}"
        elif self.line is None and self.line_kind is None:     # e.g. a JSON path in the trace
            text = f"at {at} ({fn})"
        elif self.line_kind == "native":      # nsys --cudabacktrace: a function, no line
            text = f"in `{fn}` of {self.file} (native frame: the trace names no source line)"
        elif self.line_kind == "def":
            text = f"in `{fn}()`, defined at {at}"
        elif self.line_kind == "start":
            text = f"in `{fn}()` of {self.file} (line {self.line} was running when profiling started)"
        else:
            text = f"at {at} in `{fn}()`"
        if self.callee and self.line_kind != "call":
            text += f", calling `{self.callee}`"
        return text + lib


VERDICT_ADVICE = {
    "agree": "The measured layers agree: act on the finding.",
    "conflict": ("The layers disagree: measure the workload and its shape distribution "
                 "(per-bucket latency, kernel shapes) before changing kernels."),
    "partial": ("Only some layers were captured: the finding rests on them alone; capture "
                "the missing layers (see each layer's hint) before a costly change."),
}


@dataclass
class Finding:
    rule: str                      # TL001
    slug: str                      # launch-gap
    title: str
    severity: Severity
    message: str                   # one sentence with the key numbers
    impact_ns: int                 # time lost (or at stake), ns
    span_ns: int                   # the denominator for impact_share
    where: Where
    evidence: dict[Layer, Evidence]
    fix: str = ""
    counter_example: str = ""
    occurrences: int = 1           # how many instances this finding aggregates
    windows: list[tuple[int, int]] = field(default_factory=list)   # top instance windows, ns
    metrics: dict[str, Measure] = field(default_factory=dict)      # headline numbers
    cases: list[dict[str, Any]] = field(default_factory=list)      # matched case-library entries
    key: str = ""                  # rule-chosen stable identity (kernel name, api, bucket)
    # Projected saving of the rule's fix, replayed on the run's graph (engine/savings.py);
    # None with saving_note when the fix cannot be stated as an edit; with a saving, saving_note
    # is the rule's caveat on it (what the replay leaves out). impact_ns is the time the
    # finding's events touch; saving_ns what the replay says the fix saves (knock-on included).
    saving_ns: int | None = None
    saving_share: float | None = None
    saving_iterations: dict[int, int] = field(default_factory=dict)
    saving_note: str = ""
    # The upper end where the replay of the fix is a lower bound and a faster variant can be
    # stated (pinned copies at the host link's peak, whatif/pinned.py); None otherwise.
    saving_upper_ns: int | None = None

    @property
    def impact_share(self) -> float:
        return self.impact_ns / self.span_ns if self.span_ns > 0 else 0.0

    @property
    def verdict(self) -> str:
        measured = [e for e in self.evidence.values() if e.status == "measured"]
        if any(e.supports is False for e in measured):
            return "conflict"
        # an estimate neither confirms nor refutes on its own: it counts as not yet measured
        missing = [e for e in self.evidence.values() if e.status in ("not_captured", "estimated")]
        return "partial" if missing else "agree"

    def fingerprint(self) -> str:
        """Stable across runs of the same workload: no timestamps, only identity."""
        w = self.where
        parts = [self.rule, self.key, str(w.rank), str(w.device), str(w.stream),
                 "/".join(w.nvtx_path), w.file or "", str(w.line or "")]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule, "slug": self.slug, "title": self.title,
            "severity": self.severity.value, "message": self.message,
            "impact_ns": int(self.impact_ns),
            "impact_share": round(self.impact_share, 6),
            "occurrences": self.occurrences,
            "where": self.where.to_dict(),
            "windows": [{"start_ns": int(s), "end_ns": int(e)} for s, e in self.windows],
            "metrics": {k: m.to_dict() for k, m in self.metrics.items()},
            "evidence": {layer.value: self.evidence[layer].to_dict() for layer in LAYERS
                         if layer in self.evidence},
            "verdict": self.verdict, "verdict_advice": VERDICT_ADVICE[self.verdict],
            "fix": self.fix, "counter_example": self.counter_example,
            "cases": self.cases, "fingerprint": self.fingerprint(),
            "saving_ns": None if self.saving_ns is None else int(self.saving_ns),
            "saving_share": None if self.saving_share is None else round(self.saving_share, 6),
            "saving_iterations": [{"step": int(k), "saving_ns": int(v)}
                                  for k, v in sorted(self.saving_iterations.items())],
            "saving_note": self.saving_note,
            "saving_upper_ns": None if self.saving_upper_ns is None else int(self.saving_upper_ns),
        }
