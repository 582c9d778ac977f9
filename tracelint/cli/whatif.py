"""`tracelint whatif TRACE --scale REGEX=FACTOR ...`: replay the run with edits and print how
long it would take, with the critical path before and after."""
from __future__ import annotations

import json
import re
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .app import app, fail
from .common import fmt_ns, load_trace


def _regex(pattern: str, flag: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise fail(f"{flag}: not a regular expression: {pattern!r} ({exc})")
    return pattern


def _edits(scale, remove_syncs, fuse, async_copies, remove_host) -> list:
    from ..whatif.edits import AsyncCopies, Fuse, RemoveHostWork, RemoveSync, Scale
    edits = []
    for s in scale or []:
        pattern, sep, factor = s.rpartition("=")
        try:
            f = float(factor)
        except ValueError:
            f = -1.0
        if not sep or not pattern or not (f >= 0):
            raise fail(f"--scale expects REGEX=FACTOR with FACTOR >= 0, got {s!r}")
        edits.append(Scale(_regex(pattern, "--scale"), f))
    edits += [RemoveSync(_regex(p, "--remove-syncs")) for p in remove_syncs or []]
    edits += [Fuse(_regex(p, "--fuse")) for p in fuse or []]
    edits += [AsyncCopies(_regex(p, "--async-copies")) for p in async_copies or []]
    edits += [RemoveHostWork(_regex(p, "--remove-host")) for p in remove_host or []]
    return edits


@app.command()
def whatif(
    trace: Annotated[str, typer.Argument(help="Trace file: nsys .sqlite, Kineto .json/.json.gz, .nsys-rep")],
    scale: Annotated[Optional[list[str]], typer.Option("--scale", help="REGEX=FACTOR: scale matching kernels, copies, API calls and host ops (0.5 = twice as fast).")] = None,
    remove_syncs: Annotated[Optional[list[str]], typer.Option("--remove-syncs", help="REGEX: matching blocking calls no longer wait for the GPU.")] = None,
    fuse: Annotated[Optional[list[str]], typer.Option("--fuse", help="REGEX: runs of matching kernels on a stream become one launch (fusion / CUDA graph).")] = None,
    async_copies: Annotated[Optional[list[str]], typer.Option("--async-copies", help="REGEX: matching copies run on their own stream from pinned memory.")] = None,
    remove_host: Annotated[Optional[list[str]], typer.Option("--remove-host", help="REGEX: remove the host work inside matching ranges (framework ops, NVTX).")] = None,
    top: Annotated[int, typer.Option("--top", help="Items on the critical path to list.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
):
    """What if: replay the run with edits; span before and after, per iteration, critical path."""
    edits = _edits(scale, remove_syncs, fuse, async_copies, remove_host)
    tl = load_trace(trace, progress=not as_json)
    from ..whatif.analysis import WhatIf
    data = WhatIf(tl).to_dict(edits, top=top)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    _print(data)


def _print(data: dict) -> None:
    console = Console()
    head = Table.grid(padding=(0, 2))
    head.add_row("[bold]trace span", fmt_ns(data["span_ns"]))
    head.add_row("[bold]replayed", f"{fmt_ns(data['replayed_span_ns'])} (GPU work and the threads "
                 f"that drive it: {fmt_ns(data['work_span_ns'])})")
    if "edited_work_span_ns" in data:
        saved = data["saving_ns"]
        share = saved / data["work_span_ns"] if data["work_span_ns"] else 0.0
        head.add_row("[bold]edited", f"{fmt_ns(data['edited_work_span_ns'])}  "
                     f"(saves {fmt_ns(saved)}, {share:.1%})")
    console.print(head)
    rows = data["iterations"]
    if rows:
        t = Table(title="Iterations", title_justify="left")
        for col in ("step", "trace", "replayed", *(("edited",) if "edited_ns" in rows[0] else ())):
            t.add_column(col, justify="right")
        for it in rows:
            t.add_row(str(it["step"]), fmt_ns(it["span_ns"]), fmt_ns(it["replayed_ns"]),
                      *((fmt_ns(it["edited_ns"]),) if "edited_ns" in it else ()))
        console.print(t)
    for title, key in (("Critical path", "critical_path"), ("Critical path after the edits", "edited_critical_path")):
        if key in data:
            print_critical_path(console, title, data[key])


def print_critical_path(console: Console, title: str, cp: dict) -> None:
    """The breakdown by class and the top items; also used by `tracelint info`."""
    t = Table(title=f"{title}: {fmt_ns(cp['length_ns'])}", title_justify="left")
    for col, j in (("class", "left"), ("time", "right"), ("share", "right")):
        t.add_column(col, justify=j)
    total = cp["length_ns"] or 1
    for cls, ns in cp["breakdown_ns"].items():
        t.add_row(escape(cls), fmt_ns(ns), f"{ns / total:.1%}")
    console.print(t)
    if cp["top_items"]:
        t = Table(title="Top items on the critical path", title_justify="left")
        for col, j in (("time", "right"), ("count", "right"), ("class", "left"), ("item", "left")):
            t.add_column(col, justify=j, overflow="fold" if col == "item" else "ellipsis")
        for it in cp["top_items"]:
            t.add_row(fmt_ns(it["ns"]), f"{it['count']:,}", escape(it["class"]), escape(it["name"][:120]))
        console.print(t)
