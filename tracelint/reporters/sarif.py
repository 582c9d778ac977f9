"""SARIF 2.1.0 reporter, for code-scanning UIs and review bots.

A finding points at Python source (file:line from the trace's stacks) when it has one, so it
lands on the line that caused it; otherwise at the trace file, with no region. Kernel and NVTX
names go to logicalLocations; the timing facts SARIF has no field for go to the property bag.
partialFingerprints carry Finding.fingerprint(), which is stable across runs of the same
workload, so a code-scanning service tracks a finding instead of re-opening it every run.
"""
from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from .. import __version__
from ..engine.finding import LAYERS, Finding
from ..engine.report import Report, RuleInfo
from ..io import write_atomic
from .escape import sarif_uri_ok
from .fmt import clean, doc_markdown, fmt_ms, fmt_share, window_text

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}
SRCROOT = "%SRCROOT%"


def _uri(path: str) -> tuple[str, str | None] | None:
    """(uri, uriBaseId) for a file path; None for pseudo-files like '<string>'."""
    p = path.strip()
    if not p or (p.startswith("<") and p.endswith(">")):
        return None
    if not sarif_uri_ok(p):        # `scheme://` from a trace: never a link a review UI follows
        return None
    if re.match(r"^[A-Za-z]:[\\/]", p):                  # Windows drive path
        return "file:///" + quote(p.replace("\\", "/"), safe="/:"), None
    if p.startswith("/"):
        return "file://" + quote(p, safe="/"), None
    rel = PurePosixPath(p.replace("\\", "/"))
    return quote(str(rel), safe="/"), SRCROOT


def _artifact(path: str) -> dict[str, Any] | None:
    u = _uri(path)
    if u is None:
        return None
    loc: dict[str, Any] = {"uri": u[0]}
    if u[1]:
        loc["uriBaseId"] = u[1]
    return loc


def rule_descriptor(r: RuleInfo) -> dict[str, Any]:
    doc = r.doc or r.summary or r.title
    return {
        "id": r.id, "name": r.slug,
        "shortDescription": {"text": r.title or r.slug},
        "fullDescription": {"text": r.summary or r.title or r.slug},
        "help": {"text": doc, "markdown": doc_markdown(doc)},
        "defaultConfiguration": {"level": LEVEL.get(r.severity, "warning")},
        "properties": {"tags": ["performance", *r.layers], "layers": list(r.layers)},
    }


def _message(f: Finding, origin: int) -> str:
    text = clean(f.message).rstrip(".")
    text += f". Impact {fmt_ms(f.impact_ns)} ({fmt_share(f.impact_share)} of the trace span)"
    w = f.where
    if w.start_ns is not None or w.end_ns is not None:
        text += (f"; window {window_text(w.start_ns, w.end_ns, origin)} from trace start "
                 f"({w.start_ns}–{w.end_ns} ns)")
    return text + "."


def _locations(f: Finding, trace: dict[str, Any] | None) -> list[dict[str, Any]]:
    w = f.where
    phys: dict[str, Any] | None = None
    # Library frames (site-packages) never resolve against the reviewed repository: they are
    # named as logical locations, and the physical location falls back to the trace.
    art = _artifact(w.file) if w.file and not w.library and w.line_kind != "native" else None
    if art is not None:
        phys = {"artifactLocation": art}
        if w.line is not None and int(w.line) >= 1:
            phys["region"] = {"startLine": int(w.line)}
    elif trace is not None:
        phys = {"artifactLocation": dict(trace)}
    loc: dict[str, Any] = {}
    if phys:
        loc["physicalLocation"] = phys
    logical = []
    if w.function and (art is not None or w.library or w.line_kind == "native"):
        fn: dict[str, Any] = {"name": clean(w.function), "kind": "function"}
        if w.library:
            fn["fullyQualifiedName"] = f"{clean(w.file)}:{w.line}:{clean(w.function)}"
            fn["properties"] = {"library": True}
        logical.append(fn)
    if w.module_path:
        logical.append({"name": clean(w.module_path[-1]), "kind": "module",
                        "fullyQualifiedName": ".".join(clean(m) for m in w.module_path)})
    if w.kernel:
        logical.append({"name": clean(w.kernel), "kind": "function",
                        "fullyQualifiedName": f"kernel:{clean(w.kernel)}"})
    if w.nvtx_path:
        logical.append({"name": clean(w.nvtx_path[-1]), "kind": "namespace",
                        "fullyQualifiedName": "/".join(clean(p) for p in w.nvtx_path)})
    if logical:
        loc["logicalLocations"] = logical
    return [loc] if loc else []


def _result(f: Finding, rule_index: int, trace: dict[str, Any] | None, origin: int,
            n: int) -> dict[str, Any]:
    w = f.where
    props: dict[str, Any] = {
        "finding": n, "severity": f.severity.value, "impact_ns": int(f.impact_ns),
        "impact_share": round(float(f.impact_share), 6), "occurrences": int(f.occurrences),
        "verdict": f.verdict,
        "evidence": {layer.value: f.evidence[layer].status for layer in LAYERS
                     if layer in f.evidence},
    }
    for key, value in (("window_start_ns", w.start_ns), ("window_end_ns", w.end_ns),
                       ("device", w.device), ("stream", w.stream), ("rank", w.rank),
                       ("iteration", w.iteration), ("pid", w.pid), ("tid", w.tid)):
        if value is not None:
            props[key] = int(value)
    if w.nvtx_path:
        props["nvtx_path"] = [clean(p) for p in w.nvtx_path]
    if w.kernel:
        props["kernel"] = clean(w.kernel)
    if w.line_kind:
        props["line_kind"] = w.line_kind      # call | def | start: what the region line is
    if w.library:
        props["library_code"] = True
    res: dict[str, Any] = {
        "ruleId": f.rule, "ruleIndex": rule_index, "level": LEVEL[f.severity.value],
        "kind": "fail",
        "message": {"text": _message(f, origin)},
        "locations": _locations(f, trace),
        "partialFingerprints": {"tracelint/v1": f.fingerprint()},
        # SARIF rank: 0..100 priority; the share of the span the finding costs.
        "rank": round(min(max(float(f.impact_share), 0.0), 1.0) * 100, 2),
        "properties": props,
    }
    if not res["locations"]:
        del res["locations"]
    return res


def render_sarif(report: Report) -> dict[str, Any]:
    """The report as a SARIF 2.1.0 log (a dict ready for json.dumps)."""
    rules = list(report.rules)
    known = {r.id for r in rules}
    for f in report.findings:        # a finding from a rule the report does not describe
        if f.rule not in known:
            known.add(f.rule)
            rules.append(RuleInfo(id=f.rule, slug=f.slug, title=f.title,
                                  severity=f.severity.value, summary=f.title, doc=f.title,
                                  layers=sorted(layer.value for layer in f.evidence)))
    index = {r.id: i for i, r in enumerate(rules)}
    trace = _artifact(report.source) if report.source else None
    origin = int(report.timeline.span[0])
    results = [_result(f, index[f.rule], trace, origin, n)
               for n, f in enumerate(report.sorted_findings(), 1)]
    return render_run(rules, results, [trace] if trace is not None else [],
                      properties={"span_ns": int(report.timeline.span_ns),
                                  "suppressed_by_baseline": int(report.suppressed),
                                  "trace_format": report.timeline.meta.format or "unknown"},
                      skipped=report.skipped)


def render_run(rules: list[RuleInfo], results: list[dict[str, Any]], traces: list[dict[str, Any]],
               properties: dict[str, Any], skipped: dict[str, str]) -> dict[str, Any]:
    """A SARIF log with one run: the tool, its rules, the results and the linted traces."""
    notifications = [{"level": "note", "message": {"text": f"{rid} not run: {clean(why)}"},
                      "descriptor": {"id": rid}} for rid, why in sorted(skipped.items())]
    invocation: dict[str, Any] = {"executionSuccessful": True}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "tracelint", "version": __version__,
                            "semanticVersion": __version__,
                            "rules": [rule_descriptor(r) for r in rules]}},
        "invocations": [invocation],
        "results": results,
        "properties": properties,
    }
    if any(r.get("locations") and r["locations"][0].get("physicalLocation", {})
           .get("artifactLocation", {}).get("uriBaseId") == SRCROOT for r in results):
        run["originalUriBaseIds"] = {SRCROOT: {"description": {
            "text": "The root of the source tree the profiled program ran from."}}}
    if traces:
        run["artifacts"] = [{"location": dict(t), "roles": ["analysisTarget"],
                             "description": {"text": "The profiler trace that was linted."}}
                            for t in traces]
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def write_sarif(report: Report, path: str | Path) -> None:
    write_atomic(path, json.dumps(render_sarif(report), indent=2, ensure_ascii=False) + "\n")
