"""Annotated trace: the timeline written back as a Chrome/Kineto trace plus a tracelint track.

Open it in Perfetto or chrome://tracing and the findings sit on their own process row above the
kernels they are about. The events follow torch.profiler's conventions (GPU rows on pid=device,
tid=stream; args.correlation links launches to GPU work; ProfilerStep#N names iterations), so
tracelint's own Kineto importer loads the file back with the same event counts.

Kineto has no NVTX category: NVTX ranges are written as user_annotation and come back as
annotations; everything else keeps its kind.

ts/dur are microseconds written as decimal text with exactly three decimals from the integer
ns, so no float rounding happens on the way out (the importer parses that text exactly).
Events are built column-wise as JSON text, BATCH rows at a time, and written out as they are
made: the whole text held at once (as a list of events, then joined, then encoded) took a lint
with --annotate of the 287 MB reference to a peak of 904 MiB, 3.8x the lint's own. A path
ending in .gz is gzip-compressed.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd

from .. import __version__
from ..engine.report import Report
from ..io import atomic_writer
from .fmt import finding_windows

BATCH = 1 << 16                      # rows turned into event text at a time
TRACELINT_PID = 999_999_999          # a pid no OS hands out: the findings' own process row
CAT_OF_TABLE = {"kernels": "kernel", "copies": "gpu_memcpy", "memsets": "gpu_memset"}
CAT_OF_RANGE = {"op": "cpu_op", "nvtx": "user_annotation", "annotation": "user_annotation",
                "step": "user_annotation", "gpu_annotation": "gpu_user_annotation"}


def us_text(ns: np.ndarray) -> list[str]:
    """Integer ns -> exact µs decimal text with three decimals ('-0.001' for -1 ns)."""
    ns = np.asarray(ns, dtype=np.int64)
    neg = ns < 0
    a = np.abs(ns)
    whole, frac = (a // 1000).tolist(), (a % 1000).tolist()
    return [f"{'-' if n else ''}{w}.{f:03d}" for n, w, f in zip(neg.tolist(), whole, frac)]


def _names(col: pd.Series):
    """The JSON-encoded name of rows [lo, hi) (names(lo, hi)); each distinct name of a
    categorical is encoded once."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        enc = [json.dumps(str(c)) for c in col.cat.categories.tolist()] + ['""']
        codes = col.cat.codes.to_numpy()
        codes = np.where(codes < 0, len(enc) - 1, codes)
        return lambda lo, hi: [enc[c] for c in codes[lo:hi].tolist()]
    values = col.to_numpy(dtype=object)
    return lambda lo, hi: [json.dumps("" if v is None else str(v)) for v in values[lo:hi].tolist()]


def _frag(key: str, values: np.ndarray, lo: int, hi: int) -> list[str]:
    """', "key": v' per row of [lo, hi), '' where the value is -1 (not in the source)."""
    return [f', "{key}": {v}' if v >= 0 else "" for v in values[lo:hi].tolist()]


def _frags(df: pd.DataFrame, *keys: tuple[str, str]):
    """dyn(lo, hi) of _x_events: the fragments of (JSON key, column) pairs, joined per row."""
    cols = [(key, df[col].to_numpy(dtype=np.int64)) for key, col in keys]

    def dyn(lo: int, hi: int) -> list[str]:
        parts = [_frag(key, v, lo, hi) for key, v in cols]
        return parts[0] if len(parts) == 1 else ["".join(p) for p in zip(*parts)]
    return dyn


def _no_args(lo: int, hi: int) -> list[str]:
    return [""] * (hi - lo)


def _groups(df: pd.DataFrame, cols: list[str]) -> tuple[np.ndarray, pd.DataFrame]:
    """Group code per row and the first row of each group.

    Rows sharing device/stream/launch configuration (or pid/tid/api) share their static JSON
    text, formatted once per group: a million kernels usually have a few hundred.
    """
    codes = df.groupby(cols, sort=False, dropna=False, observed=True).ngroup().to_numpy()
    first = pd.Series(np.arange(len(df))).groupby(codes, sort=True).first().to_numpy()
    return codes, df.iloc[first].reset_index(drop=True)


def _x_events(static: list[str], sargs: list[str], codes: np.ndarray, names, df: pd.DataFrame,
              dyn) -> Iterator[list[str]]:
    """Complete ('X') events, BATCH rows at a time: per-group static text (cat, pid, tid /
    static args) plus per-row name, exact µs ts/dur and dynamic args (each fragment starting
    with ', '). names(lo, hi) and dyn(lo, hi) give those of rows [lo, hi)."""
    start, end = df["start"].to_numpy(), df["end"].to_numpy()
    for lo in range(0, len(df), BATCH):
        hi = min(lo + BATCH, len(df))
        ts, dur = us_text(start[lo:hi]), us_text(end[lo:hi] - start[lo:hi])
        yield [f'{{"ph": "X", {static[g]}, "name": {n}, "ts": {a}, "dur": {d}, '
               f'"args": {{{(sargs[g] + y).lstrip(", ")}}}}}'
               for g, n, a, d, y in zip(codes[lo:hi].tolist(), names(lo, hi), ts, dur, dyn(lo, hi))]


def _static_gpu(cat: str, first: pd.DataFrame, table: str) -> tuple[list[str], list[str]]:
    static, sargs = [], []
    for r in first.itertuples(index=False):
        static.append(f'"cat": "{cat}", "pid": {max(r.device, 0)}, "tid": {max(r.stream, 0)}')
        a = "".join(f', "{k}": {v}' for k, v in (("device", r.device), ("stream", r.stream))
                    if v >= 0)
        if table == "kernels":
            if r.grid_x >= 0:
                a += f', "grid": [{r.grid_x}, {max(r.grid_y, 1)}, {max(r.grid_z, 1)}]'
            if r.block_x >= 0:
                a += f', "block": [{r.block_x}, {max(r.block_y, 1)}, {max(r.block_z, 1)}]'
            if r.registers_per_thread >= 0:
                a += f', "registers per thread": {r.registers_per_thread}'
            smem = (r.static_smem + max(r.dynamic_smem, 0) if r.static_smem >= 0
                    else r.dynamic_smem)
            if smem >= 0:
                a += f', "shared memory": {smem}'
        sargs.append(a)
    return static, sargs


KERNEL_KEY = ["device", "stream", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
              "registers_per_thread", "static_smem", "dynamic_smem"]


def _gpu_events(table: str, df: pd.DataFrame) -> Iterator[list[str]]:
    if len(df) == 0:
        return iter(())
    codes, first = _groups(df, KERNEL_KEY if table == "kernels" else ["device", "stream"])
    static, sargs = _static_gpu(CAT_OF_TABLE[table], first, table)
    dyn = _frags(df, ("correlation", "correlation"), *(() if table == "kernels" else (("bytes", "bytes"),)))
    return _x_events(static, sargs, codes, _names(df["name"]), df, dyn)


def _api_events(df: pd.DataFrame) -> Iterator[list[str]]:
    if len(df) == 0:
        return iter(())
    codes, first = _groups(df, ["pid", "tid", "api"])
    static = [f'"cat": "{"cuda_driver" if str(r.api) == "driver" else "cuda_runtime"}", '
              f'"pid": {max(r.pid, 0)}, "tid": {max(r.tid, 0)}' for r in first.itertuples()]
    dyn = _frags(df, ("correlation", "correlation"), ("External id", "external_id"))
    return _x_events(static, [""] * len(static), codes, _names(df["name"]), df, dyn)


def _range_events(df: pd.DataFrame) -> Iterator[list[str]]:
    """CPU ops, annotations and steps; a step keeps Kineto's ProfilerStep#N name so it
    re-imports as an iteration (the source's own name goes to args.tracelint_name)."""
    if len(df) == 0:
        return iter(())
    codes, first = _groups(df, ["pid", "tid", "kind", "device", "stream"])
    static, sargs = [], []
    for r in first.itertuples(index=False):
        cat = CAT_OF_RANGE.get(str(r.kind), "user_annotation")
        if cat == "gpu_user_annotation":
            static.append(f'"cat": "{cat}", "pid": {max(r.device, 0)}, "tid": {max(r.stream, 0)}')
            sargs.append(f', "device": {r.device}, "stream": {r.stream}')
        else:
            static.append(f'"cat": "{cat}", "pid": {max(r.pid, 0)}, "tid": {max(r.tid, 0)}')
            sargs.append("")
    source_names, external = _names(df["name"]), _frags(df, ("External id", "external_id"))
    step = df["step"].to_numpy()
    is_step = (df["kind"].astype(str) == "step").to_numpy() & (step >= 0)

    def renamed(lo: int, hi: int) -> list[tuple[int, str, str]]:
        """(row in the batch, Kineto's name, the source's) of the steps named otherwise."""
        rows = np.flatnonzero(is_step[lo:hi]).tolist()
        got = source_names(lo, hi) if rows else []
        return [(i, want, got[i]) for i in rows
                if (want := json.dumps(f"ProfilerStep#{step[lo + i]}")) != got[i]]

    def names(lo: int, hi: int) -> list[str]:
        got = source_names(lo, hi)
        for i, want, _ in renamed(lo, hi):
            got[i] = want
        return got

    def dyn(lo: int, hi: int) -> list[str]:
        got = external(lo, hi)
        for i, _, source in renamed(lo, hi):
            got[i] += f', "tracelint_name": {source}'
        return got
    return _x_events(static, sargs, codes, names, df, dyn)


def _frame_events(df: pd.DataFrame) -> Iterator[list[str]]:
    """Python frames in torch's 'file(line): function' form."""
    if len(df) == 0:
        return iter(())
    codes, first = _groups(df, ["pid", "tid"])
    static = [f'"cat": "python_function", "pid": {max(r.pid, 0)}, "tid": {max(r.tid, 0)}'
              for r in first.itertuples()]
    files, lines = df["file"].astype(str).to_numpy(), df["line"].to_numpy(dtype=np.int64)
    functions = df["function"].astype(str).to_numpy()

    def names(lo: int, hi: int) -> list[str]:
        return [json.dumps(f"{f}({max(line, 0)}): {fn}") for f, line, fn in
                zip(files[lo:hi].tolist(), lines[lo:hi].tolist(), functions[lo:hi].tolist())]
    return _x_events(static, [""] * len(static), codes, names, df, _no_args)


def _sync_events(df: pd.DataFrame) -> Iterator[list[str]]:
    if len(df) == 0:
        return iter(())
    codes, first = _groups(df, ["device", "stream"])
    static, sargs = _static_gpu("cuda_sync", first, "syncs")
    return _x_events(static, sargs, codes, _names(df["name"]), df,
                     _frags(df, ("correlation", "correlation")))


def _meta_event(pid: int, what: str, value: Any, tid: int = 0) -> str:
    return (f'{{"ph": "M", "name": "{what}", "pid": {pid}, "tid": {tid}, '
            f'"args": {{"{"sort_index" if what.endswith("sort_index") else "name"}": '
            f'{json.dumps(value)}}}}}')


def finding_events(report: Report, pid: int = TRACELINT_PID) -> list[str]:
    """The tracelint process row: one thread per rule, one X event per finding window."""
    findings = report.sorted_findings()
    rules = sorted({f.rule: f.slug for f in findings}.items())
    tid_of = {rule: i + 1 for i, (rule, _) in enumerate(rules)}
    out = [_meta_event(pid, "process_name", "tracelint"),
           _meta_event(pid, "process_sort_index", -1)]
    out += [_meta_event(pid, "thread_name", f"{rule} {slug}", tid_of[rule]) for rule, slug in rules]
    t0, t1 = (int(x) for x in report.timeline.span)
    for n, f in enumerate(findings, 1):
        windows = finding_windows(f)
        whole = not windows
        for s, e in windows or [(t0, t1)]:
            args = {"finding": n, "title": f.title, "message": f.message,
                    "impact_ns": int(f.impact_ns), "impact_share": round(f.impact_share, 6),
                    "severity": f.severity.value, "verdict": f.verdict,
                    "fingerprint": f.fingerprint()}
            if whole:
                args["window"] = "none given: the whole trace"
            out.append(f'{{"ph": "X", "cat": "tracelint", "name": {json.dumps(f"{f.rule} {f.slug}")}, '
                       f'"pid": {pid}, "tid": {tid_of[f.rule]}, "ts": {us_text([s])[0]}, '
                       f'"dur": {us_text([max(e - s, 0)])[0]}, "args": {json.dumps(args)}}}')
    return out


def _device_meta(report: Report) -> list[str]:
    tl = report.timeline
    out = []
    for d in tl.devices_in_use():
        info = tl.meta.device(d)
        out.append(_meta_event(d, "process_name", f"GPU {d}" + (f" {info.name}" if info and info.name else "")))
        streams = tl.gpu_activity["stream"].to_numpy()[tl.gpu_activity["device"].to_numpy() == d]
        out += [_meta_event(d, "thread_name", f"stream {s}", int(s)) for s in np.unique(streams)
                if s >= 0]
    return out


def _top_level(report: Report) -> dict[str, Any]:
    meta = report.timeline.meta
    top: dict[str, Any] = {"schemaVersion": 1, "traceName": Path(str(report.source)).name,
                           "displayTimeUnit": "ms"}
    props = []
    for d in meta.devices:
        p: dict[str, Any] = {"id": d.id, "name": d.name or ""}
        if d.sm_count:
            p["numSms"] = d.sm_count
        if d.memory_bytes:
            p["totalGlobalMem"] = d.memory_bytes
        if d.compute_capability and "." in d.compute_capability:
            major, minor = d.compute_capability.split(".", 1)
            if major.isdigit() and minor.isdigit():
                p["computeMajor"], p["computeMinor"] = int(major), int(minor)
        props.append(p)
    if props:
        top["deviceProperties"] = props
    if meta.rank is not None:
        top["distributedInfo"] = {"rank": meta.rank, **({"world_size": meta.world_size}
                                                         if meta.world_size else {})}
    top["tracelint"] = {"version": __version__, "source": str(report.source),
                        "findings": len(report.findings), "process_id": TRACELINT_PID}
    return top


def annotated_chunks(report: Report) -> Iterator[str]:
    """The annotated trace's JSON text, a batch of events at a time."""
    tl = report.timeline
    head = json.dumps(_top_level(report))[:-1]
    batches = [finding_events(report) + _device_meta(report)]
    tables = [_gpu_events(t, tl.table(t)) for t in ("kernels", "copies", "memsets")]
    tables += [_sync_events(tl.syncs), _api_events(tl.api_calls), _range_events(tl.ranges),
               _frame_events(tl.python_frames)]
    sep = head + ', "traceEvents": [\n'
    for events in (e for group in (batches, *tables) for e in group):
        if events:
            yield sep + ",\n".join(events)
            sep = ",\n"
    yield ("" if sep == ",\n" else sep) + "\n]}\n"


def render_annotated_trace(report: Report) -> str:
    """The annotated trace as JSON text."""
    return "".join(annotated_chunks(report))


def write_annotated_trace(report: Report, out_path: str | Path) -> Path:
    """Write the annotated trace (gzip when out_path ends with .gz) as it is made; returns the
    path."""
    out_path = Path(out_path)
    with atomic_writer(out_path) as fh:
        out = gzip.GzipFile(filename="", fileobj=fh, mode="wb", compresslevel=1, mtime=0) \
            if out_path.suffix == ".gz" else fh
        for chunk in annotated_chunks(report):
            out.write(chunk.encode("utf-8", "backslashreplace"))
        if out is not fh:
            out.close()
    return out_path
