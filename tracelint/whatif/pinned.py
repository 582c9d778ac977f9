"""What moving pageable copies to pinned memory saves: a range, not one number.

The replay of such a fix (NonBlocking, AsyncCopies) keeps every copy's traced duration, so
its saving is a lower bound: from pinned memory the copies also run faster, and the trace
measured only their pageable rate. Where the GPU's host link is known (configured, or assumed
from the GPU name), a second replay also runs the pageable copies at that link's peak
(CopyAtRate): no copy can beat it, so that saving is the upper end. Where the link or the
copies' sizes are not known, only the lower bound is given, and said to be one.
"""
from __future__ import annotations

import numpy as np

from ..timeline.gpu_names import host_link
from .edits import CopyAtRate

LOWER_BOUND = ("a lower bound: the replay keeps the copies' traced durations, and from pinned "
               "memory they would also run faster than these pageable ones, which the trace "
               "cannot measure")


def pageable_caveat(finding) -> str:
    """The caveat on a replayed fix that moves a finding's pageable copies (its
    `pageable_copies` metric) to pinned memory; '' when none was pageable."""
    n = finding.metrics.get("pageable_copies")
    return LOWER_BOUND if n is not None and n.value > 0 else ""


def link_peak(tl, device: int, configured_gbps: float = 0.0) -> tuple[float | None, str, bool]:
    """(GB/s, link name, assumed?) of the device's host link: the configured rate, else the
    one its GPU name implies; None when the trace does not name the GPU (a PCIe generation is
    never guessed without it)."""
    if configured_gbps > 0:
        return float(configured_gbps), "configured", False
    dev = tl.meta.device(device)
    name = (dev.name or "") if dev else ""
    peak = host_link(name)
    if peak is not None:
        return peak[0], f"{peak[1]} ({name})", True
    return None, "", False


def at_link_rate(tl, device: int, copy_rows: np.ndarray, configured_gbps: float = 0.0):
    """(edits, note with an {upper} field, note where they save no more) that run the pageable
    copies among copy_rows at the host link's peak, for the upper end of a pinned-memory fix's
    saving; None where it cannot be stated: no pageable copy with a recorded size, an unknown
    link, or copies that already ran at its peak."""
    c = tl.copies
    rows = np.asarray(copy_rows, dtype=np.int64)
    if not len(rows) or not len(c):
        return None
    src, dst = (c[k].astype(str).to_numpy()[rows] for k in ("src_kind", "dst_kind"))
    nbytes = c["bytes"].to_numpy()[rows]
    take = ((src == "pageable") | (dst == "pageable")) & (nbytes > 0)
    if not take.any():
        return None
    peak, link, assumed = link_peak(tl, device, configured_gbps)
    dur = (c["end"].to_numpy() - c["start"].to_numpy())[rows][take]
    rate = nbytes[take].sum() / max(int(dur.sum()), 1)          # bytes/ns == GB/s
    if peak is None or rate >= peak:
        return None
    why = " (assumed from the GPU name; the rule's link_gbps overrides it)" if assumed else ""
    at_peak = f"the pageable copies pinned and at the {peak:g} GB/s {link} peak{why}"
    note = (f"up to {{upper}} with {at_peak}; the projected figure keeps their traced "
            f"{rate:.1f} GB/s, a lower bound")
    flat = f"replayed also with {at_peak}: no more, so faster copies would not shorten this run"
    return [CopyAtRate(tuple(int(r) for r in rows[take]), tuple(int(b) for b in nbytes[take]),
                       float(peak))], note, flat
