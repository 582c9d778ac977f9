"""A case of the library: one performance failure, written down so the next person does not
repeat it. `case.yaml` holds the human story (symptom, key metrics, observation, judgement,
fix, counter-example, rollback trigger, tags) and the machine contract (excerpt, expected
findings, provenance). The format is documented in docs/cases.md.

load_case() validates and raises CaseError with one line `path: field: problem`; save_case()
writes the canonical YAML (stable key order, block text for multi-line strings).
"""
from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import TracelintError
from ..io import write_atomic
from .preconditions import Preconditions
from .yaml_style import dump_yaml
from .preconditions import parse as parse_preconditions

SCHEMA = "tracelint-case/1"
CASE_FILE = "case.yaml"
ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{2,63}$")
RULE_RE = re.compile(r"^[A-Z]{2,5}\d{3}$")
FORMATS = ("kineto-json", "nsys-sqlite", "jax-json", "rocprofv3-json")
DIRECTIONS = ("above", "below")
METHODS = ("generated", "cut")
TODO = "TODO"
#: The tags every case carries (values may be "unknown"); others are free-form.
KNOWN_TAGS = ("hardware", "framework", "model", "workload")

WHERE_KEYS = ("nvtx_path", "iteration", "file", "line", "function", "kernel", "device", "stream")
TOP_FIELDS = ("schema", "id", "title", "symptom", "key_metrics", "observation", "judgement", "fix",
              "counter_example", "rollback", "tags", "applies_when", "excerpt", "expected",
              "provenance")
REQUIRED = ("id", "title", "symptom", "key_metrics", "observation", "judgement", "fix",
            "counter_example", "rollback", "tags", "excerpt", "expected", "provenance")


#: libyaml's loader when PyYAML was built with it (5-10x faster), else the pure-Python one.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class CaseError(TracelintError):
    """An unreadable or invalid case / library: one line, `path: field: problem`."""


# ----- the data ---------------------------------------------------------------------------
@dataclass
class Metric:
    """A key metric: measured from the trace (source: measured) or reported by people
    (source: reported, e.g. TTFT from the serving dashboard); baseline is the value before."""

    name: str
    value: float
    unit: str
    baseline: float | None = None
    source: str = "reported"          # measured | reported
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "value": _num(self.value), "unit": self.unit}
        if self.baseline is not None:
            d["baseline"] = _num(self.baseline)
        d["source"] = self.source
        if self.note:
            d["note"] = self.note
        return d


@dataclass
class Rollback:
    """Undo the change when `metric` goes `direction` (above | below) `threshold` `unit`."""

    metric: str
    threshold: float
    direction: str
    unit: str = ""
    note: str = ""

    def describe(self) -> str:
        sign = ">" if self.direction == "above" else "<"
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.metric} {sign} {_fmt_num(self.threshold)}{unit}"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"metric": self.metric, "threshold": _num(self.threshold),
                             "unit": self.unit, "direction": self.direction}
        if self.note:
            d["note"] = self.note
        return d


@dataclass
class Excerpt:
    """The trimmed trace next to case.yaml; window_ns is the window it was cut around (in the
    source trace's time base, which the excerpt keeps)."""

    file: str
    format: str
    window_ns: tuple[int, int] | None = None
    context_ns: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"file": self.file, "format": self.format}
        if self.window_ns is not None:
            d["window_ns"] = [int(self.window_ns[0]), int(self.window_ns[1])]
        if self.context_ns is not None:
            d["context_ns"] = int(self.context_ns)
        return d


@dataclass
class Expected:
    """A finding the excerpt must produce: the rule, optional [min, max] per metric
    (finding.metrics, evidence facts, or impact_share), and optional `where` fields
    (nvtx_path, iteration, file, line, function, kernel (a substring), device, stream)."""

    rule: str
    metrics: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    where: dict[str, Any] = field(default_factory=dict)   # finding.where fields that must match

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"rule": self.rule}
        if self.where:
            d["where"] = dict(self.where)
        if self.metrics:
            d["metrics"] = {k: {**({"min": _num(lo)} if lo is not None else {}),
                                **({"max": _num(hi)} if hi is not None else {})}
                            for k, (lo, hi) in self.metrics.items()}
        return d


@dataclass
class Case:
    id: str
    title: str
    symptom: str
    key_metrics: list[Metric]
    observation: str
    rules: list[str]                  # judgement.rules
    judgement: str                    # judgement.text
    fix: str
    counter_example: str
    rollback: Rollback
    tags: dict[str, str]
    excerpt: Excerpt
    expected: list[Expected]
    provenance: dict[str, Any]
    applies_when: Preconditions = field(default_factory=Preconditions)
    path: Path | None = None          # the case folder (not saved)

    # ----- derived ------------------------------------------------------------------------
    @property
    def folder(self) -> Path:
        if self.path is None:
            raise CaseError(f"case {self.id}: not saved in a library folder")
        return self.path

    @property
    def excerpt_path(self) -> Path:
        return self.folder / self.excerpt.file

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.key_metrics if m.name == name), None)

    def todos(self) -> list[str]:
        """Fields that still hold a TODO marker (a template not yet filled in)."""
        out = []
        for name in ("title", "symptom", "observation", "judgement", "fix", "counter_example"):
            value = getattr(self, name)
            if _is_todo(value):
                out.append("judgement.text" if name == "judgement" else name)
        if _is_todo(self.rollback.metric) or _is_todo(self.rollback.note):
            out.append("rollback")
        out += [f"tags.{k}" for k, v in self.tags.items() if _is_todo(v)]
        out += [f"key_metrics.{m.name}" for m in self.key_metrics if _is_todo(m.note) or _is_todo(m.name)]
        return out

    @property
    def synthetic(self) -> bool:
        """Generated from a synthetic workload (an illustration), not cut from a real trace."""
        return self.provenance.get("method") == "generated"

    @property
    def label(self) -> str:
        """What kind of evidence the case rests on, shown wherever the case is named."""
        return "illustrative (synthetic excerpt)" if self.synthetic else "real trace"

    def provenance_line(self) -> str:
        p = self.provenance
        parts = []
        if p.get("command"):
            verb = "generated by" if self.synthetic else "cut by"
            parts.append(f"{verb} `{p['command']}`")
        if p.get("source"):
            w = p.get("window_ns")
            win = f" window {w[0]}:{w[1]} ns" if isinstance(w, list) and len(w) == 2 else ""
            parts.append(f"cut from {p['source']}{win}")
        if p.get("origin"):
            parts.append(f"published at {p['origin']}")
        if p.get("licence"):
            parts.append(f"licence {p['licence']}")
        if p.get("redacted"):
            parts.append(f"scrubbed: {p['redacted']}")
        return "; ".join(parts) or str(p.get("method", ""))

    def to_dict(self) -> dict[str, Any]:
        d = {
            "schema": SCHEMA, "id": self.id, "title": self.title, "symptom": self.symptom,
            "key_metrics": [m.to_dict() for m in self.key_metrics],
            "observation": self.observation,
            "judgement": {"rules": list(self.rules), "text": self.judgement},
            "fix": self.fix, "counter_example": self.counter_example,
            "rollback": self.rollback.to_dict(), "tags": dict(self.tags),
            "applies_when": self.applies_when.to_dict(),
            "excerpt": self.excerpt.to_dict(),
            "expected": {"findings": [e.to_dict() for e in self.expected]},
            "provenance": dict(self.provenance),
        }
        if d["applies_when"] == Preconditions().to_dict():   # none declared: the tags decide
            del d["applies_when"]
        return d


# ----- loading and validation -------------------------------------------------------------
def load_case(path: str | Path) -> Case:
    """Read and validate a case folder (or its case.yaml). Raises CaseError (one line)."""
    p = Path(path)
    file = p / CASE_FILE if p.is_dir() else p
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CaseError(f"{file}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseError(f"{file}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = yaml.load(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise CaseError(f"{file}: invalid YAML: {where}{exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise CaseError(f"{file}: invalid YAML: {' '.join(str(exc).split())}") from None
    case = case_from_dict(data, str(file))
    case.path = file.parent
    return case


def case_from_dict(data: Any, origin: str = "<case>") -> Case:
    v = _Validator(origin)
    if not isinstance(data, dict):
        v.fail("", f"expected a mapping of case fields, got {_type(data)}")
    v.known(data, TOP_FIELDS, "")
    for name in REQUIRED:
        if name not in data or data[name] is None:
            v.fail(name, "missing (every case needs it; see docs/cases.md)")
    schema = data.get("schema", SCHEMA)
    if schema != SCHEMA:
        v.fail("schema", f"unsupported {schema!r} (this tracelint reads {SCHEMA})")
    cid = v.text(data, "id")
    if not ID_RE.match(cid):
        v.fail("id", f"{cid!r} is not a slug (lowercase letters, digits and '-', 3-64 chars)")

    metrics_raw = data["key_metrics"]
    if not isinstance(metrics_raw, list) or not metrics_raw:
        v.fail("key_metrics", "expected a non-empty list of {name, value, unit}")
    metrics = []
    for i, m in enumerate(metrics_raw):
        where = f"key_metrics[{i}]"
        if not isinstance(m, dict):
            v.fail(where, f"expected a mapping with name, value, unit, got {_type(m)}")
        v.known(m, ("name", "value", "unit", "baseline", "source", "note"), where)
        source = v.text(m, "source", where, default="reported")
        if source not in ("measured", "reported"):
            v.fail(f"{where}.source", f"must be measured or reported, not {source!r}")
        metrics.append(Metric(name=v.text(m, "name", where), value=v.number(m, "value", where),
                              unit=v.text(m, "unit", where, allow_empty=True),
                              baseline=v.number(m, "baseline", where, optional=True),
                              source=source, note=v.text(m, "note", where, default="")))
    names = [m.name for m in metrics]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        v.fail("key_metrics", f"duplicate metric name(s) {dup}")

    j = data["judgement"]
    if not isinstance(j, dict):
        v.fail("judgement", "expected a mapping with rules (list of rule ids) and text")
    v.known(j, ("rules", "text"), "judgement")
    rules = j.get("rules")
    if isinstance(rules, str):
        rules = [rules]
    if not isinstance(rules, list) or not rules:
        v.fail("judgement.rules", "expected a non-empty list of rule ids such as [TL003]")
    for r in rules:
        if not isinstance(r, str) or not RULE_RE.match(r):
            v.fail("judgement.rules", f"{r!r} is not a rule id such as TL003")

    rb = data["rollback"]
    if not isinstance(rb, dict):
        v.fail("rollback", "expected a mapping with metric, threshold, direction (above|below)")
    v.known(rb, ("metric", "threshold", "unit", "direction", "note"), "rollback")
    direction = v.text(rb, "direction", "rollback")
    if direction not in DIRECTIONS:
        v.fail("rollback.direction", f"must be above or below, not {direction!r}")
    rollback = Rollback(metric=v.text(rb, "metric", "rollback"),
                        threshold=v.number(rb, "threshold", "rollback"), direction=direction,
                        unit=v.text(rb, "unit", "rollback", default=""),
                        note=v.text(rb, "note", "rollback", default=""))

    tags = data["tags"]
    if not isinstance(tags, dict):
        v.fail("tags", "expected a mapping such as {hardware: H100, framework: pytorch, ...}")
    for k in KNOWN_TAGS:
        if k not in tags:
            v.fail(f"tags.{k}", "missing (use 'unknown' when it is not known)")
    for k, val in tags.items():
        if not isinstance(k, str) or not isinstance(val, (str, int, float)) or isinstance(val, bool):
            v.fail(f"tags.{k}", f"tag values are strings, got {_type(val)}")
    tags = {str(k): str(val) for k, val in tags.items()}

    ex = data["excerpt"]
    if not isinstance(ex, dict):
        v.fail("excerpt", "expected a mapping with file and format")
    v.known(ex, ("file", "format", "window_ns", "context_ns"), "excerpt")
    efile = v.text(ex, "file", "excerpt")
    if "/" in efile or "\\" in efile or efile in (".", "..", CASE_FILE):
        v.fail("excerpt.file", f"{efile!r} must be a plain file name inside the case folder")
    fmt = v.text(ex, "format", "excerpt")
    if fmt not in FORMATS:
        v.fail("excerpt.format", f"must be one of {', '.join(FORMATS)}, not {fmt!r}")
    window = ex.get("window_ns")
    if window is not None:
        if (not isinstance(window, list) or len(window) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in window)
                or window[1] < window[0]):
            v.fail("excerpt.window_ns", "expected [start, end] integer ns with start <= end")
        window = (int(window[0]), int(window[1]))
    ctx = ex.get("context_ns")
    if ctx is not None and (not isinstance(ctx, int) or isinstance(ctx, bool) or ctx < 0):
        v.fail("excerpt.context_ns", "expected a non-negative integer (ns)")
    excerpt = Excerpt(efile, fmt, window, ctx)

    exp = data["expected"]
    if not isinstance(exp, dict):
        v.fail("expected", "expected a mapping with findings: [{rule: TL00x, metrics: ...}]")
    v.known(exp, ("findings",), "expected")
    ef = exp.get("findings")
    if not isinstance(ef, list) or not ef:
        v.fail("expected.findings", "expected a non-empty list of {rule, metrics}")
    expected = []
    for i, e in enumerate(ef):
        where = f"expected.findings[{i}]"
        if isinstance(e, str):
            e = {"rule": e}
        if not isinstance(e, dict):
            v.fail(where, f"expected a mapping with rule and optional metrics, got {_type(e)}")
        v.known(e, ("rule", "metrics", "where"), where)
        rule = v.text(e, "rule", where)
        if not RULE_RE.match(rule):
            v.fail(f"{where}.rule", f"{rule!r} is not a rule id such as TL003")
        if rule not in rules:
            v.fail(f"{where}.rule", f"{rule} is not in judgement.rules {rules}")
        ranges: dict[str, tuple[float | None, float | None]] = {}
        for mname, rng in (e.get("metrics") or {}).items():
            mw = f"{where}.metrics.{mname}"
            if not isinstance(rng, dict) or not rng:
                v.fail(mw, "expected {min: x, max: y} (either may be left out)")
            v.known(rng, ("min", "max"), mw)
            lo = v.number(rng, "min", mw, optional=True)
            hi = v.number(rng, "max", mw, optional=True)
            if lo is not None and hi is not None and lo > hi:
                v.fail(mw, f"min {lo} is above max {hi}")
            ranges[str(mname)] = (lo, hi)
        wh = e.get("where") or {}
        if not isinstance(wh, dict):
            v.fail(f"{where}.where", "expected a mapping such as {nvtx_path: [prefill]}")
        v.known(wh, WHERE_KEYS, f"{where}.where")
        expected.append(Expected(rule, ranges, dict(wh)))

    prov = data["provenance"]
    if not isinstance(prov, dict):
        v.fail("provenance", "expected a mapping: method (generated|cut), command or source")
    method = v.text(prov, "method", "provenance")
    if method not in METHODS:
        v.fail("provenance.method", f"must be generated or cut, not {method!r}")
    if method == "generated" and not prov.get("command"):
        v.fail("provenance.command", "a generated excerpt names the command that regenerates it")
    if method == "cut" and not prov.get("source"):
        v.fail("provenance.source", "a cut excerpt names the trace it was cut from")

    return Case(id=cid, title=v.text(data, "title"), symptom=v.text(data, "symptom"),
                key_metrics=metrics, observation=v.text(data, "observation"), rules=list(rules),
                judgement=v.text(j, "text", "judgement"), fix=v.text(data, "fix"),
                counter_example=v.text(data, "counter_example"), rollback=rollback, tags=tags,
                excerpt=excerpt, expected=expected, provenance=dict(prov),
                applies_when=parse_preconditions(data.get("applies_when"), v))


class _Validator:
    def __init__(self, origin: str):
        self.origin = origin

    def fail(self, where: str, problem: str):
        prefix = f"{self.origin}: {where}: " if where else f"{self.origin}: "
        raise CaseError(prefix + " ".join(str(problem).split()))

    def known(self, d: dict, allowed: tuple[str, ...], where: str) -> None:
        for k in d:
            if k not in allowed:
                hint = difflib.get_close_matches(str(k), allowed, n=1)
                extra = f" (did you mean {hint[0]!r}?)" if hint else f" (known: {', '.join(allowed)})"
                self.fail(f"{where}.{k}" if where else str(k), "unknown field" + extra)

    def text(self, d: dict, key: str, where: str = "", default: str | None = None,
             allow_empty: bool = False) -> str:
        name = f"{where}.{key}" if where else key
        if key not in d or d[key] is None:
            if default is not None:
                return default
            self.fail(name, "missing")
        val = d[key]
        if isinstance(val, bool) or not isinstance(val, (str, int, float)):
            self.fail(name, f"expected text, got {_type(val)}")
        val = str(val).strip()
        if not val and not allow_empty and default is None:
            self.fail(name, "empty")
        return val

    def number(self, d: dict, key: str, where: str, optional: bool = False) -> float | None:
        name = f"{where}.{key}"
        if key not in d or d[key] is None:
            if optional:
                return None
            self.fail(name, "missing")
        val = d[key]
        if isinstance(val, bool) or not isinstance(val, (int, float)) or not math.isfinite(val):
            self.fail(name, f"expected a number, got {val!r}")
        return val


def _type(x: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "text", type(None): "nothing"}.get(type(x), type(x).__name__)


def _is_todo(value: Any) -> bool:
    return isinstance(value, str) and value.strip().upper().startswith(TODO)


def _num(x: float | int) -> float | int:
    if isinstance(x, float) and x.is_integer() and abs(x) < 2**53:
        return int(x)
    return x


def _fmt_num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


# ----- saving -----------------------------------------------------------------------------
HEADER = ("# tracelint case ({schema}); the format: docs/cases.md\n"
          "# Replay it with `tracelint case check DIR` (DIR: the library folder).\n")


def case_yaml(case: Case, header: str | None = None) -> str:
    head = header if header is not None else HEADER.format(schema=SCHEMA)
    return head + dump_yaml(case.to_dict())


def save_case(case: Case, folder: str | Path | None = None, header: str | None = None) -> Path:
    """Write case.yaml into `folder` (default: the case's own folder); returns its path.
    The result is validated by reading it back, so a saved case always loads."""
    folder = Path(folder) if folder is not None else case.folder
    case.path = folder
    text = case_yaml(case, header)
    case_from_dict(yaml.safe_load(text), str(folder / CASE_FILE))
    path = folder / CASE_FILE
    write_atomic(path, text)
    path.chmod(0o644)                 # the temp file it was renamed from is private (0600)
    return path
