"""What a rule sees: the timeline plus shared, cached queries (launch joins, idle gaps,
host context of a call, hardware counters over a window), so rules stay short and pure."""
from __future__ import annotations

import re
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..timeline import classify
from ..timeline.model import Timeline
from ..timeline.schema import GPU_ACTIVITY_TABLES
from . import location
from .capture_hints import capture_hint
from .counters import counter_facts
from .finding import Evidence, Measure, Where

if TYPE_CHECKING:
    from .config import Config
    from .rule import Rule


class Context:
    def __init__(self, tl: Timeline, config: "Config | None" = None, ncu: pd.DataFrame | None = None):
        self.tl = tl
        self.config = config
        self.ncu = ncu if ncu is not None else pd.DataFrame(columns=["kernel", "metric", "value", "unit", "launch"])
        self._narrow_cache: dict = {}
        self._tree_cache: dict[str, bool] = {}
        self._stack_sites: dict = {}       # source_at's answer per thread and enclosing frames

    @property
    def span_ns(self) -> int:
        """The denominator of a finding's share: the trace's span."""
        return self.tl.span_ns

    # ----- configuration -------------------------------------------------------------------
    def severity_for(self, rule: "Rule"):
        if self.config is not None:
            return self.config.severity_for(rule)
        return rule.severity

    # ----- joins ---------------------------------------------------------------------------
    def launch_index(self, table: str) -> np.ndarray:
        """For each row of a GPU table, the api_calls row that launched it, or -1."""
        return self.tl.launch_index(table)

    @cached_property
    def activity_launch(self) -> np.ndarray:
        """launch_index aligned with tl.gpu_activity rows (api_calls row or -1)."""
        act = self.tl.gpu_activity
        out = np.full(len(act), -1, dtype=np.int64)
        tables, rows = act["table"].array, act["row"].to_numpy()
        for table, idx in ((t, self.tl.launch_index(t)) for t in GPU_ACTIVITY_TABLES):
            sel = np.asarray(tables == table)
            out[sel] = idx[rows[sel]]
        return out

    @cached_property
    def uploads(self) -> pd.DataFrame:
        """timeline.uploads: every H2D copy with its call, sync and moving op (read only; TL032
        and TL033 filter it each their own way). Made once: a trace of 16,600 emit_nvtx range
        names spent 0.15 s on it per rule."""
        from ..timeline.uploads import uploads
        return uploads(self.tl)

    def release_rule_caches(self) -> None:
        """Forget what the rules cached for joins over gpu_activity, here and in the Timeline
        (Timeline.release_rule_caches): the what-if stage after the rules builds its own, and a
        later ask makes them again."""
        self.__dict__.pop("activity_launch", None)
        self.__dict__.pop("uploads", None)
        self.tl.release_rule_caches()

    def issue_time(self, table: str) -> np.ndarray:
        """When each row of a GPU table was issued: its launch call's start where linked (host
        ranges such as iterations are on that clock), else the row's own start."""
        start = self.tl.table(table)["start"].to_numpy()
        api_t = self.tl.api_calls["start"].to_numpy()
        if len(api_t) == 0:
            return start
        launch = self.launch_index(table)
        return np.where(launch >= 0, api_t[np.clip(launch, 0, None)], start)

    def device_gaps(self, device: int) -> tuple[np.ndarray, np.ndarray]:
        """Idle gaps on a device between merged busy intervals (start, end arrays)."""
        s, e = self.tl.busy_intervals(device)
        return e[:-1], s[1:]

    # ----- host context --------------------------------------------------------------------
    @cached_property
    def _ranges_by_thread(self) -> dict[tuple[int, int], pd.DataFrame]:
        r = self.tl.ranges
        if len(r) == 0:
            return {}
        r = r[r["kind"].isin(["nvtx", "annotation", "step"])]
        return {k: v.sort_values("start") for k, v in r.groupby(["pid", "tid"], observed=True)}

    @cached_property
    def _steps(self) -> pd.DataFrame:
        r = self.tl.ranges
        return r[r["kind"] == "step"].sort_values("start") if len(r) else r

    @cached_property
    def _frames_by_thread(self) -> dict[tuple[int, int], pd.DataFrame]:
        f = self.tl.python_frames
        if len(f) == 0:
            return {}
        return {k: v for k, v in f.groupby(["pid", "tid"], observed=True)}

    def where_for_host(self, pid: int, tid: int, t: int, **kw) -> Where:
        """Where for a host time point: NVTX/annotation path, iteration, Python line."""
        w = Where(pid=int(pid), tid=int(tid), rank=self.tl.meta.rank, **kw)
        rr = self._ranges_by_thread.get((int(pid), int(tid)))
        if rr is not None:
            enc = rr[(rr["start"] <= t) & (rr["end"] > t)].sort_values(["depth", "start"])
            w.nvtx_path = [str(n) for n, k in zip(enc["name"], enc["kind"])   # iteration: w.iteration
                           if k != "step" and not str(n).startswith("ProfilerStep#")]
        w.iteration = self.iteration_at(t)
        site = self.source_at(pid, tid, t)
        if site is not None:
            site.apply(w)
        return w

    def where_for_api(self, row: int, **kw) -> Where:
        a = self.tl.api_calls
        return self.where_for_host(int(a["pid"].iat[row]), int(a["tid"].iat[row]),
                                   int(a["start"].iat[row]), **kw)

    def where_for_range(self, row) -> Where:
        """Where for a host range (a row with pid, tid, start, end): its host context at its
        start, and its time."""
        s, e = int(row["start"]), int(row["end"])
        return self.where_for_host(int(row["pid"]), int(row["tid"]), s, start_ns=s, end_ns=e)

    def where_for_kernel(self, row: int) -> Where:
        """Where for a kernels row: its launch call's host context (the rank alone when the
        launch is not linked), with the kernel's device, stream, name and time."""
        k = self.tl.kernels
        li = int(self.launch_index("kernels")[row])
        w = self.where_for_api(li) if li >= 0 else Where(rank=self.tl.meta.rank)
        w.device, w.stream, w.kernel = int(k["device"].iat[row]), int(k["stream"].iat[row]), str(k["name"].iat[row])
        w.start_ns, w.end_ns = int(k["start"].iat[row]), int(k["end"].iat[row])
        return w

    @property
    def steps(self) -> pd.DataFrame:
        """The iteration ranges (kind "step"), sorted by start."""
        return self._steps

    @property
    def first_iteration(self) -> int | None:
        """The number of the first profiled iteration (None without iteration ranges)."""
        return int(self._steps["step"].iat[0]) if len(self._steps) else None

    def step_positions(self, t: np.ndarray) -> np.ndarray:
        """For each time point, the position in `steps` of the iteration holding it (the last
        one started at or before it, when it has not ended yet), else -1."""
        s = self._steps
        if len(s) == 0:
            return np.full(len(t), -1, dtype=np.int64)
        ss, se = s["start"].to_numpy(), s["end"].to_numpy()
        pos = np.searchsorted(ss, t, side="right") - 1
        return np.where((pos >= 0) & (t < se[np.clip(pos, 0, None)]), pos, -1)

    def iteration_at(self, t: int) -> int | None:
        s = self._steps
        if len(s) == 0:
            return None
        hit = s[(s["start"] <= t) & (s["end"] > t)]
        return int(hit["step"].iat[0]) if len(hit) else None

    def python_frame_at(self, pid: int, tid: int, t: int) -> tuple[str, int, str] | None:
        """(file, line, function) of source_at, for callers that want the bare triple."""
        site = self.source_at(pid, tid, t)
        return None if site is None else (site.file, site.line, site.function)

    def source_at(self, pid: int, tid: int, t: int) -> location.SourceSite | None:
        """The innermost user-code frame on the thread at time t, narrowed to the call where
        the source allows (see engine/location.py); library code only when nothing else."""
        thread = (int(pid), int(tid))
        f = self._frames_by_thread.get(thread)
        if f is None:
            return None
        start, end, depth = self._frame_times[thread]
        enc = np.flatnonzero((start <= t) & (end > t))
        if len(enc) == 0:
            return None
        enc = enc[np.lexsort((-start[enc], -depth[enc]))]    # innermost first; ties in row order
        # the answer depends on the enclosing frames only: rules ask for thousands of times
        # (TL039 per allocation: 1.25 s of a 1.3 s lint as a pandas filter and sort per call)
        key = (thread, enc.tobytes())
        if key not in self._stack_sites:
            if len(self._stack_sites) >= 1 << 14:
                self._stack_sites.clear()
            lines = str(self.tl.meta.extra.get("python_frame_lines", "def"))
            site = location.site_in_stack(f.iloc[enc], self._opened_at_start.get(thread, ()),
                                          lines, self._in_tree)
            self._stack_sites[key] = None if site is None else self._narrowed(site)
        return self._stack_sites[key]

    @cached_property
    def _frame_times(self) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(start, end, depth) of each thread's frames (_frames_by_thread), for source_at."""
        return {k: tuple(v[c].to_numpy(np.int64) for c in ("start", "end", "depth"))
                for k, v in self._frames_by_thread.items()}

    def site_key(self, pid: int, tid: int, t: int, fallback: str) -> str:
        """A grouping key for the call site at a host time: `file:line` of source_at (the file
        alone when the line is unknown), else fallback (without Python stacks)."""
        site = self.source_at(pid, tid, t)
        if site is None:
            return fallback
        return f"{site.file}:{site.line}" if site.line is not None and site.line >= 0 else str(site.file)

    @cached_property
    def launch_cost_ns(self) -> int:
        """Typical host cost of an asynchronous call in this trace: the median kernel-launch
        call (5 us when the trace has none)."""
        api = self.tl.api_calls
        launch = classify.in_labels(self.tl.api_role, ("launch",))
        if len(api) == 0 or not launch.any():
            return 5_000
        return int(np.median((api["end"] - api["start"]).to_numpy()[launch]))

    @cached_property
    def _opened_at_start(self) -> dict[tuple[int, int], frozenset]:
        """Per thread, the frames open when profiling began (location.open_at_start)."""
        f = self.tl.python_frames
        window = (int(f["start"].min()), int(f["end"].max())) if len(f) else (0, 0)
        return {k: location.open_at_start(v, window) for k, v in self._frames_by_thread.items()}

    @cached_property
    def sources(self) -> location.SourceIndex:
        cfg = self.config
        pairs = [tuple(p.split("=", 1)) for p in getattr(cfg, "path_map", []) if "=" in p]
        return location.SourceIndex(getattr(cfg, "source_roots", []), pairs)

    @cached_property
    def _extra_roots(self) -> tuple[Path, ...]:
        src = self.tl.meta.source
        return tuple(p for p in (Path(src).parent if src else None, Path.cwd()) if p)

    def _in_tree(self, file: str) -> bool:
        if file not in self._tree_cache:
            self._tree_cache[file] = self.sources.resolve(file, self._extra_roots) is not None
        return self._tree_cache[file]

    def _narrowed(self, site: location.SourceSite) -> location.SourceSite:
        key = site
        if key not in self._narrow_cache:
            out = location.narrow(site, self.sources.resolve(site.file, self._extra_roots))
            self._narrow_cache[key] = location.replace_site(out, file=self.sources.display(out.file))
        return self._narrow_cache[key]

    @property
    def has_stacks(self) -> bool:
        return len(self.tl.python_frames) > 0

    @cached_property
    def framework(self) -> str:
        """pytorch, jax or native: whose knobs a fix names (engine/runtime_advice)."""
        return classify.trace_framework(self.tl)

    @property
    def is_pytorch(self) -> bool:
        """Whether the trace is a PyTorch program's (its op ranges or ATen's kernels): fixes
        then name PyTorch's knobs; a JAX program gets JAX's, a CUDA C, OpenMP or HIP one its
        runtime's."""
        return self.framework == "pytorch"

    @cached_property
    def vendor(self) -> str:
        """nvidia, amd, intel or unknown: which vendor's tools the capture hints name."""
        return classify.trace_vendor(self.tl)

    def capture_hint(self, key: str, **fmt: str) -> str:
        """How to capture a missing source (engine/capture_hints) on this trace's GPUs."""
        return capture_hint(key, self.vendor, **fmt)

    def stack_evidence_hint(self) -> str:
        return self.capture_hint("python_stacks")

    # ----- microarchitecture ---------------------------------------------------------------
    def microarch(self, device: int | None, start: int, end: int,
                  kernels: list[str] | None = None, expect: dict[str, str] | None = None) -> Evidence:
        """Hardware-counter evidence over a window: GPU metric samples, else per-kernel counters
        recorded in the trace, else ncu results.

        expect: metric-name regex -> "low" | "high", what the finding predicts; a sample mean
        on the other side of 50 % marks the layer as contradicting the finding.
        """
        m = self.tl.metrics
        if len(m):
            sel = (m["ts"] >= start) & (m["ts"] <= end)
            if device is not None and (m["device"] >= 0).any():
                sel &= m["device"] == device
            w = m[sel]
            if len(w):
                means = w.groupby("metric", observed=True)["value"].mean()
                facts = {str(k): Measure(round(float(v), 2), "%") for k, v in means.items()}
                supports = _expectation(means, expect)
                top = ", ".join(f"{k} {v.value}%" for k, v in list(facts.items())[:4])
                return Evidence.measured(f"{len(w)} GPU metric samples in the window: {top}",
                                         supports=supports, **facts)
        counters = self._trace_counters(device, start, end, kernels)
        if len(counters):
            facts, percent = counter_facts(counters)
            return Evidence.measured(
                f"{self.tl.meta.extra.get('kernel_counters', 'per-kernel counters')}: "
                f"{counters['metric'].nunique()} counters over {counters['launch'].nunique()} "
                f"launch(es) of {counters['kernel'].nunique()} kernel(s)",
                supports=_expectation(percent, expect), **facts)
        if kernels and len(self.ncu):
            rows = self.ncu[self.ncu["kernel"].isin(kernels)]
            if len(rows):
                means = rows.groupby("metric")["value"].mean()
                facts = {str(k): Measure(round(float(v), 3), str(rows[rows.metric == k]["unit"].iat[0] or ""))
                         for k, v in means.items()}
                supports = _expectation(means, expect)
                return Evidence.measured(f"Nsight Compute: {len(rows)} metric rows for "
                                         f"{rows['kernel'].nunique()} kernel(s)", supports=supports, **facts)
        hint = self.capture_hint("gpu_metrics",
                                 kernel=re.escape(kernels[0])[:60] if kernels else "NAME")
        return Evidence.not_captured("No hardware counters in the trace for this window.", hint)

    @property
    def kernel_times_synthetic(self) -> bool:
        """True when the trace's kernel times are placeholders (CUPTI range profiler)."""
        return self.tl.meta.extra.get("kernel_timing") == "synthetic"

    def kernel_weight(self) -> tuple[np.ndarray, str]:
        """Per-kernel-row weight for time shares: the duration in ns; where kernel times are
        synthetic, the CUDA-core FP instructions counted per launch ("instructions"), else
        one per launch ("launches")."""
        k = self.tl.kernels
        if not self.kernel_times_synthetic:
            return (k["end"] - k["start"]).to_numpy(), "ns"
        c = self.tl.kernel_counters
        fp = c[c["metric"].astype(str).str.match(r"smsp__sass_thread_inst_executed_op_[dfh]")]
        if len(fp):
            per = fp.groupby("launch")["value"].sum()
            return per.reindex(np.arange(len(k)), fill_value=0).to_numpy(), "instructions"
        return np.ones(len(k), dtype=np.int64), "launches"

    def _trace_counters(self, device, start, end, kernels) -> pd.DataFrame:
        """Counter rows of the named kernels, else of the kernels inside the window (only
        where kernel times are real)."""
        c = self.tl.kernel_counters
        if len(c) == 0:
            return c
        if kernels:
            return c[c["kernel"].isin(kernels)]
        if self.kernel_times_synthetic:
            return c.iloc[:0]
        k = self.tl.kernels
        inside = (k["start"] < end) & (k["end"] > start)
        if device is not None:
            inside &= k["device"] == device
        return c[c["launch"].isin(np.flatnonzero(inside.to_numpy()))]

    # ----- misc ----------------------------------------------------------------------------
    def busy_in(self, device: int, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """ns of device busy time overlapping each [start, end) window."""
        return self.tl.busy_in(device, start, end)


def _expectation(means: pd.Series, expect: dict[str, str] | None) -> bool | None:
    if not expect:
        return None
    verdicts = []
    for pattern, direction in expect.items():
        for name, v in means.items():
            if re.search(pattern, str(name), re.I):
                verdicts.append(v < 50 if direction == "low" else v >= 50)
    if not verdicts:
        return None
    return all(verdicts)
