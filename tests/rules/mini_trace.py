"""A tiny mutable trace (kernels and copies with their launch calls, ranges, steps) and the
lint and interval helpers the TL002, TL003, TL004 and TL006 tests share."""
from __future__ import annotations

import numpy as np

from tracelint import api
from tracelint.engine.config import Config
from tracelint.timeline.model import Meta, Timeline
from tracelint.timeline.nesting import nest
from tracelint.timeline.schema import make_table


US = 1_000
PID, TID = 100, 101


class Trace:
    """A tiny mutable trace: kernels and copies with their launch calls, ranges, steps."""

    def __init__(self):
        self.k, self.c, self.a, self.r = [], [], [], []
        self.corr = 1

    def _api(self, name, t, dur):
        self.a.append(dict(pid=PID, tid=TID, start=t, end=t + dur, name=name, correlation=self.corr))
        self.corr += 1
        return self.corr - 1

    def kernel(self, name, start, dur, *, stream=7, device=0, api="cudaLaunchKernel", api_t=None,
               api_dur=5 * US, linked=True, graph=False):
        corr = self._api(api, start - 10 * US if api_t is None else api_t, api_dur) if linked else -1
        self.k.append(dict(device=device, stream=stream, start=start, end=start + dur, name=name,
                           correlation=corr, graph_launched=graph))

    def copy(self, kind, start, dur, nbytes, *, src="pageable", dst="device", stream=7, device=0):
        corr = self._api("cudaMemcpyAsync", start - 5 * US, 4 * US)
        self.c.append(dict(device=device, stream=stream, start=start, end=start + dur, correlation=corr,
                           name=f"Memcpy {kind}", bytes=nbytes, kind=kind, src_kind=src, dst_kind=dst))

    def range(self, name, start, end, kind="annotation", step=-1):
        self.r.append(dict(pid=PID, tid=TID, start=start, end=end, name=name, kind=kind, step=step))

    def timeline(self) -> Timeline:
        def cols(rows, table):
            if not rows:
                return make_table(table, {}, 0)
            return make_table(table, {key: [r[key] for r in rows] for key in rows[0]})
        ranges = cols(self.r, "ranges")
        if len(ranges):
            depth, parent = nest(np.zeros(len(ranges), np.int64), ranges["start"].to_numpy(),
                                 ranges["end"].to_numpy())
            ranges["depth"], ranges["parent"] = depth, parent
        return Timeline(kernels=cols(self.k, "kernels"), copies=cols(self.c, "copies"),
                        api_calls=cols(self.a, "api_calls"), ranges=ranges,
                        meta=Meta(format="kineto-json"))


def lint(tl, rule, **options):
    cfg = Config(select=[rule], options={rule: options} if options else {})
    return [f for f in api.lint(tl, cfg).findings if f.rule == rule]


def union_len(ivs):
    """Total length of a union of intervals, by a plain sweep."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(ivs):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)
