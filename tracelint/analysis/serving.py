"""Serving buckets: TTFT and TPOT per request, from per-request range names."""
from __future__ import annotations

import re
from typing import Any

import numpy as np

TTFT = "TTFT"
TPOT = "TPOT"

_PHASE = re.compile(r"(?i)(?<![a-z])(prefill|decode)(?![a-z])")
_REQ_ID = re.compile(r"(?i)(?<![a-z])(?:request|req|rid)(?:[_\- ]?id)?"
                     r"(?:[\s_#:=\-/]+([0-9A-Za-z][0-9A-Za-z_\-.]*)|(\d[0-9A-Za-z_\-.]*))")
_TOKENS = re.compile(r"(?i)(?<![a-z])tokens?\s*[=:]\s*(\d+)")


def parse_request_range(name: str) -> tuple[str, str | None, int] | None:
    """(request id, phase or None, tokens) for a per-request range name, else None.

    Convention (case-insensitive): a request id token ``req=<id>``, ``req <id>``,
    ``request_<id>``, ``request-id:<id>``, ``rid=<id>``, ``req17`` (the id must contain a
    digit); a phase word ``prefill`` or
    ``decode``; optionally ``tokens=<k>`` on a decode range that produced k tokens (default 1).
    A range with an id and no phase (``request 17``) marks the request's arrival.
    """
    rid = None
    for m in _REQ_ID.finditer(name):
        cand = (m.group(1) or m.group(2)).rstrip("-.")
        if any(ch.isdigit() for ch in cand):
            rid = cand
            break
    if rid is None:
        return None
    p = _PHASE.search(name)
    t = _TOKENS.search(name)
    return rid, (p.group(1).lower() if p else None), (int(t.group(1)) if t else 1)


def serving_values(rg: Any) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(TTFT or TPOT, arrival times, values) per request, in arrival order, from the ranges
    ``rg`` (buckets._Ranges) named per the convention of parse_request_range:

    * TTFT = end of the last prefill range of the request - arrival, where arrival is the
      start of its ``request <id>`` range if there is one, else the start of its first prefill;
    * TPOT = (end of its last decode range - end of its last prefill) / decoded tokens, where
      decoded tokens = the number of decode ranges (or the sum of their ``tokens=k``).
    """
    if rg.n == 0:
        return []
    parsed = {c: parse_request_range(c) for c in rg.categories}
    if not any(parsed.values()):
        return []
    req: dict[str, dict[str, Any]] = {}
    live = np.flatnonzero(np.isin(rg.codes, [i for i, c in enumerate(rg.categories) if parsed[c]]))
    for i in live:
        rid, phase, tokens = parsed[rg.categories[rg.codes[i]]]
        r = req.setdefault(rid, {"arrival": None, "prefill": [], "decode": []})
        s, e = int(rg.start[i]), int(rg.end[i])
        if phase is None:
            r["arrival"] = s if r["arrival"] is None else min(r["arrival"], s)
        else:
            r[phase].append((s, e, tokens))
    ttft, ttft_t, tpot, tpot_t = [], [], [], []
    for rid, r in req.items():
        if not r["prefill"]:
            continue
        pre = sorted(r["prefill"])
        arrival = r["arrival"] if r["arrival"] is not None else pre[0][0]
        first_token = max(e for _, e, _ in pre)
        ttft.append(first_token - arrival)
        ttft_t.append(arrival)
        if r["decode"]:
            last = max(e for _, e, _ in r["decode"])
            n_tok = sum(k for _, _, k in r["decode"])
            if n_tok > 0 and last > first_token:
                tpot.append((last - first_token) / n_tok)
                tpot_t.append(arrival)
    out = []
    for key, vals, ts in ((TTFT, ttft, ttft_t), (TPOT, tpot, tpot_t)):
        if vals:
            o = np.argsort(ts, kind="stable")
            t = np.asarray(ts, dtype=np.int64)[o]
            out.append((key, t, np.asarray(vals, dtype=np.float64)[o]))
    return out


