"""Build a multi-rank job from one real Kineto rank, with planted cross-rank problems.

    from tracelint.ranks.synth import make_job
    make_job("hta_nccl_a100_rank0of2.json.gz", "out/", ranks=4,
             straggler=1, delay_us=3000, exposed=2, clock_offsets_us=[0, 1700, -900, 400])

Every rank starts as a copy of the source trace (distributedInfo, process-group args and
"Group size" rewritten for the new world size). Times are integer ns, parsed exactly from the
JSON text and written back with three decimals of µs. The communication kernels are merged
into blocks (one collective call each, in the usual single-stream case); block j gets:

- straggler rank S, delay X: the compute phase before each collective runs X longer (the time
  between two collectives is stretched linearly, so its kernels get longer), and its
  collective j starts (j+1)X late; its collective kernels keep their duration (it arrives last
  and waits for no one);
- every other rank: collective j starts at jX (its compute is not slower) but ends at (j+1)X
  with everyone's: its kernel waits X longer for the straggler, and the work launched after
  the collective started follows the wait. So every collective ends at the same instant on all
  ranks and the straggler arrives X after the others, consistently;
- exposed rank E: after the above, every compute kernel that overlaps one of its
  communication kernels is moved to after it (kernels keep their durations and stream order;
  later kernels on the stream move only as far as needed) — its all-reduces run alone;
- slow rank: its whole timeline is stretched by 1 + slowdown (no coupling to the others);
- clock offsets: a constant added to all of a rank's times (different hosts' clocks).

With no option set the ranks are identical copies: the control job, where no cross-rank rule
should fire. Host events (ops, runtime calls, annotations) follow the same monotone time map
as the GPU, so nesting stays valid.
"""
from __future__ import annotations

import copy
import gzip
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..io import decompressed
from ..timeline import classify

GPU_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
KERNEL_CATS = {"kernel", "Kernel"}
FLOW_PHASES = {"s", "t", "f"}
_STEP = re.compile(r"^(ProfilerStep#)(\d+)$")


def _to_ns(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v * 1000
    try:
        return int((Decimal(str(v)) * 1000).to_integral_value())
    except Exception:  # noqa: BLE001
        return None


def _us_text(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    ns = abs(int(ns))
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


@dataclass
class RawTrace:
    """A Kineto trace as plain JSON plus exact integer-ns time columns."""

    top: dict[str, Any]
    events: list[dict[str, Any]]
    ts: np.ndarray          # int64 ns, valid where has_ts
    dur: np.ndarray         # int64 ns, valid where has_dur
    has_ts: np.ndarray
    has_dur: np.ndarray

    @classmethod
    def from_json(cls, data: dict | list) -> "RawTrace":
        if isinstance(data, list):
            data = {"traceEvents": data}
        data = dict(data)
        events = data.pop("traceEvents", []) or []
        n = len(events)
        ts = np.zeros(n, np.int64)
        dur = np.zeros(n, np.int64)
        has_ts = np.zeros(n, bool)
        has_dur = np.zeros(n, bool)
        for i, e in enumerate(events):
            t = _to_ns(e.get("ts"))
            if t is not None:
                ts[i], has_ts[i] = t, True
            d = _to_ns(e.get("dur"))
            if d is not None:
                dur[i], has_dur[i] = d, True
        return cls(data, events, ts, dur, has_ts, has_dur)

    @classmethod
    def load(cls, path: str | Path) -> "RawTrace":
        raw = decompressed(Path(path).read_bytes(), path)   # the gzip limits of every read
        return cls.from_json(json.loads(raw, parse_float=Decimal))

    # ----- masks ---------------------------------------------------------------------------
    def cats(self) -> np.ndarray:
        return np.array([e.get("cat", "") for e in self.events], dtype=object)

    def comm_mask(self) -> np.ndarray:
        cats = self.cats()
        out = np.zeros(len(self.events), bool)
        cache: dict[str, bool] = {}
        for i in np.flatnonzero(np.isin(cats, list(KERNEL_CATS))):
            name = str(self.events[i].get("name", ""))
            if name not in cache:
                cache[name] = classify.kernel_class(name) == "communication"
            out[i] = cache[name]
        return out

    def body_mask(self) -> np.ndarray:
        """Timed events that are not metadata or the profiler's whole-window 'Trace' mark."""
        cats = self.cats()
        ph = np.array([e.get("ph", "") for e in self.events], dtype=object)
        return self.has_ts & (ph != "M") & (cats != "Trace")

    # ----- replication (bench) -------------------------------------------------------------
    def replicate(self, copies: int, gap_us: float = 1000.0) -> "RawTrace":
        """copies of the body one after another (ids and ProfilerStep numbers shifted), like
        bench/make_big_trace.py, for traces of a chosen size."""
        if copies <= 1:
            return self
        body = np.flatnonzero(self.body_mask())
        ends = self.ts[body] + np.where(self.has_dur[body], self.dur[body], 0)
        t0, t1 = int(self.ts[body].min()), int(ends.max())
        period = (t1 - t0) + int(gap_us * 1000)
        max_corr = max_ext = max_flow = 0
        steps = []
        for i in body:
            e = self.events[i]
            a = e.get("args") or {}
            if isinstance(a.get("correlation"), int):
                max_corr = max(max_corr, a["correlation"])
            for k in ("External id", "external id"):
                if isinstance(a.get(k), int):
                    max_ext = max(max_ext, a[k])
            if e.get("ph") in FLOW_PHASES and isinstance(e.get("id"), int):
                max_flow = max(max_flow, e["id"])
            m = _STEP.match(str(e.get("name", "")))
            if m:
                steps.append(int(m.group(2)))
        step_stride = (max(steps) - min(steps) + 1) if steps else 0
        in_body = np.zeros(len(self.events), bool)
        in_body[body] = True
        keep = np.flatnonzero(~in_body)
        events = [self.events[i] for i in keep]
        ts = [self.ts[keep]]
        dur = [self.dur[keep]]
        has_ts, has_dur = [self.has_ts[keep]], [self.has_dur[keep]]
        for k in range(copies):
            for i in body:
                e = self.events[i]
                if k:
                    e = dict(e)
                    if e.get("ph") in FLOW_PHASES and isinstance(e.get("id"), int):
                        e["id"] += k * (max_flow + 1)
                    m = _STEP.match(str(e.get("name", "")))
                    if m and step_stride:
                        e["name"] = f"{m.group(1)}{int(m.group(2)) + k * step_stride}"
                    a = e.get("args")
                    if isinstance(a, dict):
                        a = dict(a)
                        if isinstance(a.get("correlation"), int) and a["correlation"] > 0:
                            a["correlation"] += k * (max_corr + 1)
                        for key in ("External id", "external id"):
                            if isinstance(a.get(key), int) and a[key] > 0:
                                a[key] += k * (max_ext + 1)
                        e["args"] = a
                events.append(e)
            ts.append(self.ts[body] + k * period)
            dur.append(self.dur[body])
            has_ts.append(self.has_ts[body])
            has_dur.append(self.has_dur[body])
        return RawTrace(dict(self.top), events, np.concatenate(ts), np.concatenate(dur),
                        np.concatenate(has_ts), np.concatenate(has_dur))


# ----- time maps ---------------------------------------------------------------------------------
def _comm_blocks(raw: RawTrace, comm: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merged communication intervals (start, end) and, per comm event, its block index."""
    idx = np.flatnonzero(comm)
    s = raw.ts[idx]
    e = s + raw.dur[idx]
    order = np.argsort(s, kind="stable")
    bs, be, block = [], [], np.zeros(len(idx), np.int64)
    for j in order:
        if bs and s[j] <= be[-1]:
            be[-1] = max(be[-1], e[j])
        else:
            bs.append(s[j])
            be.append(e[j])
        block[j] = len(bs) - 1
    full = np.full(len(raw.events), -1, np.int64)
    full[idx] = block
    return np.array(bs, np.int64), np.array(be, np.int64), full


def _plan_rank(raw: RawTrace, comm: np.ndarray, gpu: np.ndarray, role: str, delay_ns: int,
               slowdown: float, blocks) -> tuple[np.ndarray, np.ndarray]:
    """New (ts, dur) for one rank's role: 'normal', 'straggler' or 'slow'."""
    ts = raw.ts.copy()
    end = raw.ts + np.where(raw.has_dur, raw.dur, 0)
    has = raw.has_ts
    bs, be, block = blocks
    nb = len(bs)
    if role == "slow":
        t0 = int(ts[has].min())
        f = lambda t: t0 + np.round((t - t0) * (1.0 + slowdown)).astype(np.int64)  # noqa: E731
        nts, nend = f(ts), f(end)
        return np.where(has, nts, raw.ts), np.where(raw.has_dur, nend - nts, raw.dur)
    if delay_ns <= 0 or nb == 0:
        return raw.ts.copy(), raw.dur.copy()
    X = int(delay_ns)
    if role == "straggler":
        t_min = min(int(ts[has].min()), int(bs[0])) - 1
        xs = [t_min]
        ys = [t_min]
        for j in range(nb):
            xs += [int(bs[j]), int(be[j])]
            ys += [int(bs[j]) + (j + 1) * X, int(be[j]) + (j + 1) * X]
        xs_a, ys_a = np.array(xs, np.float64), np.array(ys, np.float64)

        def f(t):
            t = np.asarray(t)
            out = np.interp(t.astype(np.float64) - t_min, xs_a - t_min, ys_a - t_min) + t_min
            after = t > xs[-1]
            out = np.where(after, t + nb * X, out)
            return np.round(out).astype(np.int64)
        nts, nend = f(ts), f(end)
        c = comm
        nts[c] = ts[c] + (block[c] + 1) * X            # collectives: rigid, late by (j+1)X
        nend[c] = end[c] + (block[c] + 1) * X
        return np.where(has, nts, raw.ts), np.where(raw.has_dur, nend - nts, raw.dur)
    # normal rank: step function g(t) = t + X * #(block starts <= t)
    g = lambda t: t + X * np.searchsorted(bs, t, side="right")  # noqa: E731
    nts, nend = g(ts), g(end)
    rigid = gpu & ~comm                                   # GPU work: moves, keeps its duration
    nend[rigid] = nts[rigid] + (end[rigid] - ts[rigid])
    c = comm
    nts[c] = ts[c] + block[c] * X                         # arrives on time...
    nend[c] = end[c] + (block[c] + 1) * X                 # ...and waits X for the straggler
    return np.where(has, nts, raw.ts), np.where(raw.has_dur, nend - nts, raw.dur)


def _expose(raw: RawTrace, ts: np.ndarray, dur: np.ndarray, comm: np.ndarray) -> np.ndarray:
    """Move compute kernels off communication kernels (per device): returns new ts."""
    cats = raw.cats()
    ts = ts.copy()
    compute = np.isin(cats, list(KERNEL_CATS)) & ~comm & raw.has_ts
    dev = np.array([_dev(e) for e in raw.events], dtype=np.int64)
    stream = np.array([_stream(e) for e in raw.events], dtype=np.int64)
    for d in np.unique(dev[comm]):
        ci = np.flatnonzero(comm & (dev == d))
        cs = ts[ci]
        ce = cs + dur[ci]
        o = np.argsort(cs)
        cs, ce = cs[o], ce[o]
        # merged comm intervals
        ms, me = [], []
        for a, b in zip(cs, ce):
            if ms and a <= me[-1]:
                me[-1] = max(me[-1], b)
            else:
                ms.append(a)
                me.append(b)
        ms_a, me_a = np.array(ms), np.array(me)
        ki = np.flatnonzero(compute & (dev == d))
        for st in np.unique(stream[ki]):
            rows = ki[stream[ki] == st]
            rows = rows[np.argsort(ts[rows], kind="stable")]
            cursor = -(2**62)
            for i in rows:
                s = max(int(ts[i]), cursor)
                d_i = int(dur[i])
                while True:
                    j = np.searchsorted(me_a, s, side="right")   # first comm ending after s
                    if j < len(ms_a) and ms_a[j] < s + max(d_i, 1):
                        s = int(me_a[j])
                        continue
                    break
                ts[i] = s
                cursor = s + d_i
    return ts


def _dev(e: dict) -> int:
    a = e.get("args") or {}
    v = a.get("device", e.get("pid", -1))
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


def _stream(e: dict) -> int:
    a = e.get("args") or {}
    v = a.get("stream", e.get("tid", -1))
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


# ----- writing ---------------------------------------------------------------------------------
def _default(o):
    if isinstance(o, Decimal):          # a float literal of the source (parse_float=Decimal)
        return float(o)
    raise TypeError(type(o).__name__)


_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "), default=_default).encode


def event_bodies(raw: RawTrace, world: int) -> list[str]:
    """Each event's JSON without ts/dur (rank-independent; process-group args set for `world`)."""
    ranks_txt = "[" + ", ".join(str(i) for i in range(world)) + "]"
    out = []
    for e in raw.events:
        a = e.get("args")
        if isinstance(a, dict) and ("Group size" in a or "Process Group Ranks" in a):
            a = dict(a)
            if "Group size" in a:
                a["Group size"] = world
            if "Process Group Ranks" in a:
                a["Process Group Ranks"] = ranks_txt
            e = dict(e, args=a)
        out.append(_DUMPS({k: v for k, v in e.items() if k not in ("ts", "dur")}))
    return out


def write_rank(raw: RawTrace, path: str | Path, ts: np.ndarray, dur: np.ndarray, rank: int,
               world: int, bodies: list[str] | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    bodies = bodies if bodies is not None else event_bodies(raw, world)
    top = copy.deepcopy(raw.top)
    dist = top.get("distributedInfo")
    dist = dict(dist) if isinstance(dist, dict) else {"backend": "nccl"}
    dist["rank"], dist["world_size"] = rank, world
    if isinstance(dist.get("pg_config"), list):
        dist["pg_config"] = [dict(pg, pg_size=world, ranks=list(range(world))) if isinstance(pg, dict) else pg
                             for pg in dist["pg_config"]]
    top["distributedInfo"] = dist
    body = raw.body_mask()
    lo = int(ts[body].min()) if body.any() else 0
    hi = int((ts[body] + np.where(raw.has_dur[body], dur[body], 0)).max()) if body.any() else 0
    opener = gzip.open if path.name.endswith(".gz") else open
    kw = {"compresslevel": 1} if opener is gzip.open else {}
    with opener(path, "wt", encoding="utf-8", **kw) as out:
        out.write("{\n")
        for k, v in top.items():
            out.write(f"  {json.dumps(k)}: {_DUMPS(v)},\n")
        out.write('  "traceEvents": [\n')
        n = len(raw.events)
        for i in range(n):
            e = raw.events[i]
            b = bodies[i]
            if e.get("cat") == "Trace" and raw.has_ts[i]:
                t, d = lo, hi - lo
            else:
                t, d = int(ts[i]), int(dur[i])
            parts = []
            if raw.has_ts[i]:
                parts.append(f'"ts": {_us_text(t)}')
            if raw.has_dur[i]:
                parts.append(f'"dur": {_us_text(max(d, 0))}')
            if parts:
                b = "{" + ", ".join(parts) + (", " + b[1:] if b != "{}" else "}")
            out.write("  " + b + (",\n" if i < n - 1 else "\n"))
        out.write("  ]\n}\n")
    return path


# ----- the job -----------------------------------------------------------------------------------
def plan_job(raw: RawTrace, ranks: int = 4, straggler: int | None = None, delay_us: float = 0.0,
             exposed: int | None = None, slow_rank: int | None = None, slowdown: float = 0.0,
             clock_offsets_us: Sequence[float] | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per rank, the (ts, dur) ns arrays of the planted job."""
    comm = raw.comm_mask()
    cats = raw.cats()
    gpu = np.isin(cats, list(GPU_CATS))
    blocks = _comm_blocks(raw, comm)
    delay = int(round(delay_us * 1000)) if straggler is not None else 0
    out = []
    for r in range(ranks):
        if r == slow_rank:
            role = "slow"
        elif r == straggler:
            role = "straggler"
        else:
            role = "normal"
        ts, dur = _plan_rank(raw, comm, gpu, role, delay, slowdown, blocks)
        if r == exposed:
            ts = _expose(raw, ts, dur, comm)
        if clock_offsets_us is not None and r < len(clock_offsets_us):
            ts = ts + int(round(clock_offsets_us[r] * 1000))
        out.append((ts, dur))
    return out


def make_job(src: str | Path | dict | RawTrace, out_dir: str | Path, ranks: int = 4,
             straggler: int | None = None, delay_us: float = 0.0, exposed: int | None = None,
             slow_rank: int | None = None, slowdown: float = 0.0,
             clock_offsets_us: Sequence[float] | None = None, copies: int = 1, gap_us: float = 1000.0,
             suffix: str = ".json.gz", prefix: str = "rank") -> list[Path]:
    """Write `ranks` trace files (prefix{r}{suffix}) of one planted job; returns their paths."""
    raw = src if isinstance(src, RawTrace) else RawTrace.from_json(src) if isinstance(src, (dict, list)) \
        else RawTrace.load(src)
    if copies > 1:
        raw = raw.replicate(copies, gap_us)
    plans = plan_job(raw, ranks, straggler, delay_us, exposed, slow_rank, slowdown, clock_offsets_us)
    bodies = event_bodies(raw, ranks)
    out_dir = Path(out_dir)
    return [write_rank(raw, out_dir / f"{prefix}{r}{suffix}", ts, dur, r, ranks, bodies)
            for r, (ts, dur) in enumerate(plans)]


__all__ = ["RawTrace", "make_job", "plan_job", "write_rank", "event_bodies"]
