"""Scrubbing tracelint's own output: a string, and everything a reporter may print from a
Report (messages, locations, evidence, the timeline's names and metadata), in place, through
the output sink (sink.py). Redacting a trace file is redact.py's."""
from __future__ import annotations

from . import patterns as P


def scrub_text(s: str, paths: bool = False) -> str:
    """`s` with secrets replaced by <redacted>; with paths=True also home directories,
    user / host names (in their known places) and e-mail addresses."""
    if not isinstance(s, str) or not s:
        return s
    return P.scrub_string(s, paths=paths)


def scrub_report(report, paths: bool = False, use_source: bool = True) -> None:
    """Scrub, in place, everything a reporter may print from `report`: source path, finding
    messages, titles, saving notes, where fields (file, function, kernel, NVTX path), evidence summaries,
    capture hints, fact and metric names, matched cases, skipped-rule reasons, rule docs, and
    the timeline's names (tables, cached frames, metadata, notes, device names).

    Finding keys (and so fingerprints, which are hashes) are left alone so baselines match.
    use_source: also scan the trace file itself (cached; TL100 already did) for exact values.
    """
    from .sink import Sink        # the output sink: patterns plus the trace's exact values
    source = getattr(report, "source", None)
    f = Sink([source] if use_source and source else [], paths=paths)
    report.source = f(report.source)
    for fd in report.findings:
        for name in _finding_texts(fd):     # message, title, fix, notes: any text field added later
            setattr(fd, name, f(getattr(fd, name)))
        w = fd.where
        w.file, w.function, w.kernel = f(w.file), f(w.function), f(w.kernel)
        w.nvtx_path = [f(p) for p in w.nvtx_path]
        for ev in fd.evidence.values():
            ev.summary = f(ev.summary)
            ev.capture_hint = f(ev.capture_hint)
            ev.facts = {f(k): v for k, v in ev.facts.items()}
        fd.metrics = {f(k): v for k, v in fd.metrics.items()}
        fd.cases = f.model(fd.cases)
    report.skipped = {k: f(v) for k, v in report.skipped.items()}
    # sections computed from trace names: the critical path now, the lazy ones when rendered
    if getattr(report, "critical_path", None) is not None:
        report.critical_path = f.model(report.critical_path)
    if getattr(report, "sections", None):
        report.sections = {k: (lambda make=make: f.model(make())) for k, make in report.sections.items()}
    for r in report.rules:
        for attr in ("title", "summary", "doc", "fix", "counter_example"):
            setattr(r, attr, f(getattr(r, attr)))
    tl = getattr(report, "timeline", None)
    if tl is not None:
        scrub_timeline(tl, f)


#: A finding's own text fields left as they are: its identity (rule id and slug, and the key
#: its fingerprint hashes, so baselines still match) and its severity (an enum).
_IDENTITY = frozenset({"rule", "slug", "key", "severity"})


def _finding_texts(fd) -> list[str]:
    """The names of a finding's str fields a reporter prints: every one but its identity, so a
    text field added later (the saving note once was) is scrubbed without being listed here."""
    import dataclasses
    return [fl.name for fl in dataclasses.fields(fd)
            if fl.name not in _IDENTITY and isinstance(getattr(fd, fl.name), str)]


def scrub_timeline(tl, f) -> None:
    """Scrub every string column of a Timeline's tables (and cached frames) and its meta,
    through the Sink `f` (its batch call for a column's names)."""
    import pandas as pd
    frames = [v for v in vars(tl).values() if isinstance(v, pd.DataFrame)]
    for df in frames:
        for c in df.columns:
            s = df[c]
            if isinstance(s.dtype, pd.CategoricalDtype):
                cats = s.cat.categories.tolist()       # list() boxes one value at a time
                new = f.texts(cats)
                if new == cats:
                    continue
                if len(set(new)) == len(new):
                    df[c] = s.cat.rename_categories(new)
                else:
                    mapping = dict(zip(cats, new))
                    df[c] = pd.Categorical(s.astype(object).map(mapping))
            elif s.dtype == object and len(s):
                uniq = pd.unique(s)
                keys = [u for u in uniq if isinstance(u, str)]
                mapping = dict(zip(keys, f.texts(keys)))
                if any(k != v for k, v in mapping.items()):
                    df[c] = s.map(lambda x: mapping.get(x, x) if isinstance(x, str) else x)
    m = tl.meta
    m.source = f(m.source)
    m.producer = f(m.producer)
    m.format_version = f(m.format_version)
    m.notes = [f(n) for n in m.notes]
    for d in m.devices:
        d.name = f(d.name)
    m.extra = f.model(m.extra)
    m.raw_event_counts = {f(k): v for k, v in m.raw_event_counts.items()}
