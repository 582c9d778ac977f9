"""Case libraries: folders of cases. List them, replay them (`check`), and name the cases a new
finding resembles (`match_findings`).

The built-in library ships inside the package (tracelint/cases/library/), so it is found the
same way from a source checkout and from an installed wheel; a team's own library folders are
added with `default_libraries(extra)` (config: `case-libraries = ["perf-cases"]`).
"""
from __future__ import annotations

import hashlib
import math
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from ..errors import TracelintError
from .excerpt import EXCERPT_NAMES, SIZE_LIMIT_BYTES, cut_to_fit, stored_size, trace_format
from .model import (CASE_FILE, ID_RE, TODO, Case, CaseError, Excerpt, Expected, Metric, Rollback,
                    load_case, save_case)

#: How many resembling cases a finding lists, and the least similarity worth listing.
TOP_CASES = 3
MIN_SIMILARITY = 0.3


# ----- where libraries are ----------------------------------------------------------------
def builtin_library() -> Path:
    """The built-in library folder, resolved relative to the installed package."""
    return Path(str(resources.files("tracelint.cases").joinpath("library")))


def default_libraries(extra: Iterable[str | Path] | None = None) -> list[Path]:
    """The built-in library followed by `extra` folders (a team's own), without duplicates.
    Relative paths are taken as given (the config loader resolves them against the config
    file). A missing extra folder is an error when the library is read, not here."""
    out: list[Path] = []
    seen: set[Path] = set()
    for p in [builtin_library(), *(Path(x) for x in (extra or []))]:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


# ----- reading ----------------------------------------------------------------------------
_CACHE: dict[Path, tuple[tuple, list[Case]]] = {}


def case_folders(library: str | Path) -> list[Path]:
    lib = Path(library)
    if not lib.exists():
        raise CaseError(f"{lib}: case library not found")
    if not lib.is_dir():
        raise CaseError(f"{lib}: not a folder (a case library is a folder of case folders)")
    if (lib / CASE_FILE).is_file():     # a single case folder given as a library
        return [lib]
    return sorted(p.parent for p in lib.glob(f"*/{CASE_FILE}") if not p.parent.name.startswith("."))


def load_library(library: str | Path) -> list[Case]:
    """Every case of one library, validated; CaseError (one line) on the first bad one.
    Cached by the case files' modification times."""
    lib = Path(library)
    folders = case_folders(lib)
    stamp = tuple((str(f), (f / CASE_FILE).stat().st_mtime_ns, (f / CASE_FILE).stat().st_size)
                  for f in folders)
    key = lib.resolve()
    hit = _CACHE.get(key)
    if hit and hit[0] == stamp:
        return list(hit[1])
    cases = [load_case(f) for f in folders]
    seen: dict[str, Path] = {}
    for c in cases:
        if c.id in seen:
            raise CaseError(f"{lib}: duplicate case id {c.id!r} in {seen[c.id].name} and {c.folder.name}")
        seen[c.id] = c.folder
    _CACHE[key] = (stamp, cases)
    return list(cases)


def load_libraries(libraries: Iterable[str | Path]) -> list[Case]:
    out: list[Case] = []
    for lib in libraries:
        out += load_library(lib)
    return out


def find_case(libraries: Iterable[str | Path], case_id: str) -> Case:
    cases = load_libraries(libraries)
    for c in cases:
        if c.id == case_id:
            return c
    import difflib
    near = difflib.get_close_matches(case_id, [c.id for c in cases], n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise CaseError(f"no case {case_id!r} in the library{hint}; see `tracelint case list`")


# ----- replaying --------------------------------------------------------------------------
@dataclass
class CheckResult:
    case: Case
    ok: bool
    reason: str = ""
    findings: list = field(default_factory=list)
    stored_bytes: int = 0


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


def lint_excerpt(path: str | Path, rules_dirs: list[str] | None = None):
    """Load an excerpt through the normal importers and lint it with default settings."""
    from ..engine.config import Config
    from ..engine.runner import lint
    from ..importers import load
    tl = load(path)
    return lint(tl, Config(rules_dirs=list(rules_dirs or [])))


def check_case(case: Case, rules_dirs: list[str] | None = None,
               limit: int = SIZE_LIMIT_BYTES) -> CheckResult:
    """Replay one case: its excerpt must load, fit the size limit and still produce every
    expected finding (with its metrics inside the stated ranges)."""
    todo = case.todos()
    if todo:
        return CheckResult(case, False, f"still a template: fill in {', '.join(todo)}")
    path = case.excerpt_path
    if not path.is_file():
        return CheckResult(case, False, f"excerpt {case.excerpt.file} is missing")
    size = stored_size(path)
    if size > limit:
        return CheckResult(case, False, f"excerpt is {size / 1024:.0f} KiB stored, over the "
                                        f"{limit // 1024} KiB limit", stored_bytes=size)
    try:
        fmt = trace_format(path)
        if fmt != case.excerpt.format:
            return CheckResult(case, False, f"excerpt is {fmt}, case.yaml says {case.excerpt.format}",
                               stored_bytes=size)
        report = lint_excerpt(path, rules_dirs)
    except TracelintError as exc:
        return CheckResult(case, False, f"excerpt does not load: {' '.join(str(exc).split())}",
                           stored_bytes=size)
    findings = report.findings
    for exp in case.expected:
        hits = [f for f in findings if f.rule == exp.rule]
        if not hits:
            fired = sorted({f.rule for f in findings})
            return CheckResult(case, False, f"{exp.rule} no longer fires on the excerpt (fired: "
                                            f"{', '.join(fired) or 'nothing'})", findings, size)
        if exp.where:
            placed = [f for f in hits if _where_matches(f, exp.where)]
            if not placed:
                got = "; ".join(str({k: getattr(f.where, k, None) for k in exp.where}) for f in hits[:3])
                return CheckResult(case, False, f"{exp.rule} fires but not at {exp.where} (got {got})",
                                   findings, size)
            hits = placed
        if exp.metrics:
            ok, why = _any_in_ranges(hits, exp.metrics)
            if not ok:
                return CheckResult(case, False, f"{exp.rule} fires but {why}", findings, size)
    return CheckResult(case, True, "", findings, size)


def _where_matches(f, want: dict[str, Any]) -> bool:
    for key, value in want.items():
        got = getattr(f.where, key, None)
        if key == "kernel":
            if not got or str(value) not in got:
                return False
        elif got != value:
            return False
    return True


def _any_in_ranges(hits, ranges: dict[str, tuple[float | None, float | None]]) -> tuple[bool, str]:
    why = ""
    for f in hits:
        bad = []
        for name, (lo, hi) in ranges.items():
            v = finding_value(f, name)
            if v is None:
                bad.append(f"{name} is not measured")
            elif (lo is not None and v < lo) or (hi is not None and v > hi):
                bad.append(f"{name}={v:g} is outside [{'' if lo is None else f'{lo:g}'}, "
                           f"{'' if hi is None else f'{hi:g}'}]")
        if not bad:
            return True, ""
        why = why or "; ".join(bad)
    return False, why


def check_library(library: str | Path, rules_dirs: list[str] | None = None) -> list[CheckResult]:
    return [check_case(c, rules_dirs) for c in load_library(library)]


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
    return None


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


def case_entry(case: Case, sim: float) -> dict[str, Any]:
    return {"id": case.id, "title": case.title, "fix": case.fix,
            "counter_example": case.counter_example, "similarity": sim,
            "rollback": case.rollback.describe()}


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
    for f in findings:
        cands = by_rule.get(f.rule)
        if not cands:
            continue
        ctx = finding_context(f, timeline)
        scored = [(similarity(f, c, ctx), c) for c in cands]
        scored = [(s, c) for s, c in scored if s >= min_similarity]
        scored.sort(key=lambda sc: (-sc[0], sc[1].id))
        seen = {c.get("id") for c in f.cases}
        f.cases = list(f.cases) + [case_entry(c, s) for s, c in scored[:top] if c.id not in seen]
        f.cases = f.cases[:top]


# ----- adding -------------------------------------------------------------------------------
def slugify(text: str, limit: int = 64) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")
    s = s[:limit].rstrip("-")
    return s if len(s) >= 3 else (s + "-case")[:limit]


def unique_id(library: Path, base: str) -> str:
    cid, n = base, 2
    while (library / cid).exists():
        suffix = f"-{n}"
        cid = base[:64 - len(suffix)] + suffix
        n += 1
    return cid


def prefill_metrics(f, limit: int = 8) -> list:
    """Key metrics from a finding's measured evidence: its headline metrics, its share of the
    span, then the evidence facts that are shares."""
    out: list = []
    seen: set[str] = set()

    def add(name: str, value, unit: str, note: str = "") -> None:
        if name in seen or len(out) >= limit or value is None:
            return
        v = float(value)
        if not math.isfinite(v):
            return
        seen.add(name)
        out.append(Metric(name=name, value=round(v, 6) if unit == "ratio" else v, unit=unit,
                          source="measured", note=note))

    for name, m in f.metrics.items():
        add(name, m.value, m.unit)
    add("impact_share", round(f.impact_share, 4), "ratio", "finding impact / trace span")
    for layer, ev in f.evidence.items():
        if ev.status != "measured":
            continue
        for name, m in ev.facts.items():
            if m.unit == "ratio":
                add(name, m.value, m.unit, f"{getattr(layer, 'value', layer)} evidence")
    return out


def observation_from(f) -> str:
    """The finding's measured evidence, one paragraph per layer."""
    lines = [f.message.rstrip(".") + "."]
    for layer, ev in f.evidence.items():
        name = getattr(layer, "value", str(layer))
        if ev.status == "measured":
            lines.append(f"{name}: {ev.summary}")
        elif ev.status == "not_captured":
            hint = f" (capture: {ev.capture_hint})" if ev.capture_hint else ""
            lines.append(f"{name}: not captured. {ev.summary}{hint}")
    return "\n".join(lines)


def expected_from(f, factor: float = 2.0, where_keys: Iterable[str] = ()):
    """The excerpt's finding as an expectation: its rule, its share-like headline metrics
    within a factor of `factor` (so drift is caught, noise is not), and the `where_keys`
    fields of its location."""
    ranges: dict[str, tuple[float | None, float | None]] = {}
    for name, m in f.metrics.items():
        v = float(m.value)
        if m.unit == "ratio" and v > 0:
            ranges[name] = (round(v / factor, 4), round(min(v * factor, 1.0) if v <= 1 else v * factor, 4))
    where = {}
    for k in where_keys:
        v = getattr(f.where, k, None)
        if v not in (None, []):
            where[k] = list(v) if isinstance(v, (list, tuple)) else v
    return Expected(f.rule, ranges, where)


def _candidate_windows(f) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    w = f.where
    if w.start_ns is not None and w.end_ns is not None:
        out.append((int(w.start_ns), int(w.end_ns)))
    if f.windows:
        if not out:
            out.append((int(f.windows[0][0]), int(f.windows[0][1])))
        union = (int(min(s for s, _ in f.windows)), int(max(e for _, e in f.windows)))
        if union not in out:
            out.append(union)
    return out


def _hardware_name(tl, device: int | None) -> str | None:
    dev = tl.meta.device(device) if device is not None else None
    if dev is None and tl.meta.devices:
        dev = tl.meta.devices[0]
    return dev.name if dev and dev.name else None


def _scan_for_secrets(path: Path) -> tuple[int, int]:
    """(secrets, personal-data hits) in an excerpt; (0, 0) when the scanner is unavailable."""
    try:
        from ..secrets.scan import scan_file
    except ImportError:
        return 0, 0
    res = scan_file(path)
    return len(res.secrets), len(res.personal)


@dataclass
class Added:
    case: Case
    excerpt_bytes: int
    stored_bytes: int
    context_ns: int
    excerpt_finding: Any
    personal_hits: int = 0
    tried: list[str] = field(default_factory=list)


def create_case(trace: str | Path, library: str | Path, *, finding=None, timeline=None,
                rule: str | None = None, window: tuple[int, int] | None = None,
                context_ns: int | None = None, case_id: str | None = None,
                title: str | None = None, fields: dict[str, str] | None = None,
                tags: dict[str, str] | None = None, extra_metrics: list | None = None,
                rollback=None, provenance: dict | None = None, rules_dirs: list[str] | None = None,
                limit: int = SIZE_LIMIT_BYTES, force: bool = False, header: str | None = None,
                expect_where: Iterable[str] = ()) -> Added:
    """Cut an excerpt of `trace` that reproduces a finding and save it as a new case.

    Either `finding` (a Finding of `trace`, with `timeline` its Timeline) or `rule` + `window`
    (ns). The excerpt is cut around the finding's worst instance, then around all its listed
    instances, with `context_ns` (default: the window's own length, at least 200 µs) shrunk to
    fit `limit`; the first excerpt on which the rule fires again is kept. Human fields not
    given in `fields` (symptom, judgement, fix, counter_example, observation) become TODO
    markers with hints; key metrics and the observation are pre-filled from the evidence."""
    trace, library = Path(trace), Path(library)
    fields = dict(fields or {})
    fmt = trace_format(trace)
    if finding is not None:
        rule = finding.rule
        wins = _candidate_windows(finding)
        if not wins:
            raise CaseError(f"finding {finding.rule} has no time window to cut around; use --rule "
                            "with --window")
    else:
        if not rule or window is None:
            raise CaseError("give a finding, or a rule and a window")
        wins = [(int(window[0]), int(window[1]))]
    if library.exists() and not library.is_dir():
        raise CaseError(f"{library}: not a folder")
    stem = re.sub(r"(\.pt\.trace)?\.(json\.gz|json|sqlite|nsys-rep)$", "", trace.name)
    base = case_id or slugify(f"{rule}-{getattr(finding, 'slug', '') or 'case'}-{stem}")
    if not ID_RE.match(base):
        raise CaseError(f"case id {base!r} is not a slug (lowercase letters, digits and '-', 3-64 chars)")
    if case_id and (library / case_id).exists() and not force:
        raise CaseError(f"{library / case_id}: a case with this id exists (pass --force to replace it)")
    cid = case_id or unique_id(library, base)

    tmpdir = Path(tempfile.mkdtemp(prefix=".case-", dir=library if library.is_dir() else None))
    try:
        out = tmpdir / EXCERPT_NAMES[fmt]
        tried: list[str] = []
        got = None
        attempts = []
        for w in wins:
            auto = max(w[1] - w[0], 200_000)
            for c in ([context_ns] if context_ns is not None else [auto, 4 * auto]):
                if (w, c) not in attempts:
                    attempts.append((w, c))
        for w, c in attempts:
            try:
                info = cut_to_fit(trace, out, w, c, limit)
            except CaseError as exc:
                tried.append(f"{w[0]}:{w[1]}±{c} ns: {exc}")
                continue
            report = lint_excerpt(out, rules_dirs)
            hits = sorted((f for f in report.findings if f.rule == rule), key=lambda f: -f.impact_ns)
            if hits:
                got = (w, info, report, hits[0])
                break
            fired = sorted({f.rule for f in report.findings})
            tried.append(f"{w[0]}:{w[1]}±{info.context_ns} ns: {rule} does not fire "
                         f"(fired: {', '.join(fired) or 'nothing'})")
        if got is None:
            raise CaseError(f"no excerpt of {trace.name} reproduces {rule} within the "
                            f"{limit // 1024} KiB limit; tried " + "; ".join(tried)
                            + ". Pass a wider --window or a larger --context-ns")
        w, info, report, ex_f = got
        n_secret, n_personal = _scan_for_secrets(out)
        if n_secret:
            raise CaseError(f"the excerpt holds {n_secret} secret(s) copied from {trace.name} "
                            "(tokens / keys in its metadata); scrub it first (`tracelint redact TRACE -o "
                            "CLEAN`), then add the case from the clean copy")

        src_f = finding if finding is not None else ex_f
        tl = timeline if timeline is not None else report.timeline
        metrics = prefill_metrics(src_f) + list(extra_metrics or [])
        hw = _hardware_name(tl, src_f.where.device)
        auto_tags = {
            "hardware": hw or f"{TODO}: GPU model",
            "framework": "pytorch" if fmt == "kineto-json" else f"{TODO}: framework (pytorch, vLLM, TensorRT, CUDA C++ ...)",
            "model": f"{TODO}: model and size",
            "workload": " / ".join(src_f.where.nvtx_path) if src_f.where.nvtx_path
            else f"{TODO}: workload bucket (e.g. short-prompt prefill, batch 1 decode, training step)",
        }
        if src_f.where.kernel:
            from ..timeline.classify import kernel_class
            auto_tags["kernel_class"] = kernel_class(src_f.where.kernel)
        all_tags = {**auto_tags, **(tags or {})}
        hint_fix = f" The rule's generic advice: {src_f.fix}" if src_f.fix else ""
        hint_ce = f" The rule's: {src_f.counter_example}" if src_f.counter_example else ""
        if rollback is None:
            lead = next((m for m in metrics if m.unit == "ratio"), metrics[0])
            rollback = Rollback(metric=f"{TODO}: the metric that undoes the fix, e.g. {lead.name}",
                                threshold=lead.value, direction="above", unit=lead.unit,
                                note=f"{TODO}: where it is measured (dashboard, gate, benchmark)")
        prov = dict(provenance or {"method": "cut", "source": trace.name})
        prov.setdefault("window_ns", [int(w[0]), int(w[1])])
        prov.setdefault("context_ns", int(info.context_ns))
        if prov.get("method") == "cut":    # a user's trace: pin which file and which tracelint
            from .. import __version__
            prov.setdefault("source_md5", _md5(trace))
            prov.setdefault("tracelint", __version__)
        prov = {k: v for k, v in prov.items() if v is not None}
        case = Case(
            id=cid,
            title=title or f"{src_f.title}" + (f" on {gpu_family(hw) or hw}" if hw else ""),
            symptom=fields.get("symptom") or f"{TODO}: what users saw (latency, throughput, memory; before -> after)",
            key_metrics=metrics,
            observation=fields.get("observation") or observation_from(src_f),
            rules=[rule],
            judgement=fields.get("judgement") or f"{TODO}: why it happened: the locally reasonable choice that lost end to end",
            fix=fields.get("fix") or f"{TODO}: what fixed it here.{hint_fix}",
            counter_example=fields.get("counter_example") or f"{TODO}: when the same change is right.{hint_ce}",
            rollback=rollback, tags=all_tags,
            excerpt=Excerpt(out.name, fmt, (int(w[0]), int(w[1])), int(info.context_ns)),
            expected=[expected_from(ex_f, where_keys=expect_where)], provenance=prov)
        save_case(case, tmpdir, header=header)
        dest = library / cid
        if dest.exists():
            shutil.rmtree(dest)
        library.mkdir(parents=True, exist_ok=True)
        tmpdir.chmod(0o755)               # mkdtemp makes it private
        if tmpdir.parent.resolve() == library.resolve():
            tmpdir.rename(dest)
        else:
            shutil.move(str(tmpdir), dest)
        case.path = dest
        _CACHE.pop(library.resolve(), None)
        return Added(case, info.bytes, info.stored_bytes, info.context_ns, ex_f, n_personal, tried)
    finally:
        if tmpdir.exists():
            shutil.rmtree(tmpdir, ignore_errors=True)


def _md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
