"""Adding cases (`tracelint case add`): cut an excerpt around a finding and prefill the case."""
from __future__ import annotations

import hashlib
import math
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .excerpt import EXCERPT_NAMES, SIZE_LIMIT_BYTES, cut_to_fit, trace_format
from .kineto_excerpt import KinetoEvents
from .model import (ID_RE, TODO, Case, CaseError, Excerpt, Expected, Metric, Rollback,
                    save_case)

from .check import lint_excerpt
from .library import forget_library
from .match import gpu_family
from .preconditions import Preconditions


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
                expect_where: Iterable[str] = (), applies_when=None) -> Added:
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
            "framework": {"kineto-json": "pytorch", "jax-json": "jax"}.get(
                fmt, f"{TODO}: framework (pytorch, vLLM, TensorRT, CUDA C++ ...)"),
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
            expected=[expected_from(ex_f, where_keys=expect_where)], provenance=prov,
            applies_when=applies_when if applies_when is not None else default_preconditions(tl, src_f))
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
        forget_library(library)
        return Added(case, info.bytes, info.stored_bytes, info.context_ns, ex_f, n_personal, tried)
    finally:
        KinetoEvents.forget()                      # the trace read for the cuts
        if tmpdir.exists():
            shutil.rmtree(tmpdir, ignore_errors=True)


def default_preconditions(tl, f) -> Preconditions:
    """What a new case requires of a trace, from the trace it was cut from: its device class,
    vendor and workload kind, and the finding's lead share at least half what it is here."""
    from .match import trace_context
    ctx = trace_context(tl)
    lead = next((m for m in prefill_metrics(f) if m.unit == "ratio" and m.value > 0), None)
    return Preconditions(device=ctx["device"],
                         vendor=ctx["vendor"] if ctx["vendor"] != "unknown" else "any",
                         workload=(ctx["workload"],),
                         metrics={lead.name: (round(lead.value / 2, 4), None)} if lead else {})


def _md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
