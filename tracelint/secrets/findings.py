"""Hits -> Findings for the trace-scanning rules TL100 (secrets) and TL101 (personal data):
one finding per kind and container, the partial-scan notice of large JSON traces, and why a
trace cannot be scanned (the rule is then skipped)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from .. import io
from . import patterns as P
from .scan import Hit, ScanResult, is_file, scan_file


def grouped(res: ScanResult, category: str, by_container: bool = True
            ) -> list[tuple[str, str, int, list[Hit]]]:
    """(kind, container, exact count, kept hits) per group of one category, biggest first.
    by_container=False: one group per kind (container lists every container, in order)."""
    groups: dict[tuple[str, str], list[Hit]] = {}
    for h in res.hits:
        if h.category == category:
            groups.setdefault((h.kind, h.container if by_container else ""), []).append(h)
    out = []
    for (k, c), hs in groups.items():
        if by_container:
            n = max(res.count(k, c), len(hs))
        else:
            n = max(sum(v for (kk, _), v in res.counts.items() if kk == k), len(hs))
            c = ", ".join(dict.fromkeys(h.container for h in hs))
        out.append((k, c, n, hs))
    return sorted(out, key=lambda g: (-g[2], g[0], g[1]))


def _listing(items: list[str], total: int, limit: int = 6) -> str:
    shown = items[:limit]
    more = max(total - len(shown), 0)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def scan_path(tl) -> str:
    """The file the trace was read from: its source, or the local copy a job worker read a
    URL through (meta.extra['read_from'])."""
    return str(tl.meta.extra.get("read_from") or tl.meta.source)


def why_unscannable(tl) -> str | None:
    """None when the trace's own file can be scanned, else why not (the rule is skipped)."""
    if not is_file(scan_path(tl)):
        return ("the trace was not loaded from a file that can be read again (an in-memory "
                "Timeline, or a .nsys-rep exported to a temporary SQLite file): scan the "
                "file itself with `tracelint redact --check FILE`")
    return None


def rule_findings(rule, ctx, category: str, by_container: bool = True):
    """One finding per (kind, container) group (per kind with by_container=False) of the
    trace file's hits of `category`.

    Nothing when the trace was not loaded from a readable file (an in-memory Timeline, a
    .nsys-rep exported to a temporary SQLite file): there is no file to point at.
    """
    from ..engine.finding import Evidence, Layer, Measure, Where
    from ..errors import TracelintError
    tl = ctx.tl
    src = tl.meta.source
    if not is_file(scan_path(tl)):
        return
    try:
        res = scan_file(scan_path(tl), deep=False)
    except (TracelintError, OSError, sqlite3.Error):
        return
    if tl.meta.format and res.format != tl.meta.format:
        return
    if res.partial and category == P.SECRET:
        yield _partial_scan_finding(rule, ctx, scan_path(tl))
    for kind, container, n, hits in grouped(res, category, by_container):
        label = P.KIND_LABELS.get(kind, kind)
        locations = list(dict.fromkeys(h.location for h in hits))
        names = list(dict.fromkeys(h.name for h in hits if h.name))
        previews = list(dict.fromkeys(h.preview for h in hits))
        named = f" under {_listing(names, len(names), 6)}" if names else ""
        values = f"{n} value{'s' if n != 1 else ''}"
        message = (f"{label} in {container}: {values}{named}, first at {locations[0]} "
                   f"({previews[0]})")
        capped = n > len(hits)          # more values than hits kept: places are a lower bound
        n_loc = len(locations)
        places = f"{n_loc}{'+' if capped else ''} place{'s' if n_loc != 1 or capped else ''}"
        system = Evidence.measured(
            f"{values} in {places}: {_listing(locations, n_loc, 6)}{', …' if capped else ''}; "
            f"shown masked: {_listing(previews, len(previews), 4)}.",
            count=Measure(n, "count"), locations=Measure(n_loc, "count"))
        yield rule.finding(
            ctx, message=message, impact_ns=0,
            where=Where(file=str(src), function=locations[0], rank=tl.meta.rank),
            occurrences=n,
            evidence={Layer.SYSTEM: system,
                      Layer.KERNEL: Evidence.not_applicable("security finding"),
                      Layer.MICROARCH: Evidence.not_applicable("security finding")},
            metrics={"count": Measure(n, "count")},
            key=f"{kind}@{container}" if by_container else kind)


def _partial_scan_finding(rule, ctx, src: str):
    """Say that a large trace's events were not scanned, and how to scan them."""
    from ..engine.finding import Evidence, Layer, Measure, Severity, Where
    size = Path(src).stat().st_size
    with open(src, "rb") as fh:        # gzip's size field is modulo 4 GiB: not stated as a size
        gz = fh.read(2) == b"\x1f\x8b"
    what = f"{size / 2**20:.0f} MB gzip file, over {io.QUICK_SCAN_LIMIT >> 20} MiB of JSON" \
        if gz else f"{size / 2**20:.0f} MB file"
    hint = f"tracelint redact --check {src}"
    return rule.finding(
        ctx, severity=Severity.INFO,
        message=(f"Secret scan limited to the trace's metadata ({what}): the strings of "
                 f"its events or records were not scanned; `{hint}` scans everything"),
        impact_ns=0, where=Where(file=str(src)),
        evidence={Layer.SYSTEM: Evidence.not_captured(
                      f"Events and records of JSON traces over {io.QUICK_SCAN_LIMIT >> 20} MiB "
                      "are not scanned by lint.", hint),
                  Layer.KERNEL: Evidence.not_applicable("security finding"),
                  Layer.MICROARCH: Evidence.not_applicable("security finding")},
        metrics={"file_bytes": Measure(size, "bytes")}, key="partial-scan")
