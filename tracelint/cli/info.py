"""`tracelint info TRACE`: format, span, devices, streams, counts, GPU busy %, top kernels."""
from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from ..reporters.escape import rich_text as escape
from rich.table import Table

from ..efficiency.info import efficiency_info, print_efficiency
from ..timeline.summary import trace_info
from .app import app
from .common import fmt_ns, load_trace, sink


@app.command()
def info(
    trace: Annotated[str, typer.Argument(help="Trace file: nsys .sqlite, Kineto .json/.json.gz, .nsys-rep")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
):
    """What is in a trace: format, span, devices, streams, counts, GPU busy %, top kernels."""
    tl = load_trace(trace, progress=not as_json)
    data = trace_info(tl)
    data["efficiency"] = efficiency_info(tl)
    if len(tl.memory):                         # the memory timeline (timeline/memory.py)
        from ..timeline.memory import memory_summary
        data["memory"] = memory_summary(tl)
    if tl.has_gpu_activity or len(tl.api_calls):
        from ..whatif.analysis import WhatIf
        data["critical_path"] = WhatIf(tl).critical_path_dict(top=5)
    sk = sink([trace])
    data = sk.model(data)                      # scrub before formatting (names may hold tokens)
    if as_json:
        sk.write(json.dumps(data, indent=2))
        return
    console = Console()
    head = Table.grid(padding=(0, 2))
    head.add_row("[bold]trace", escape(sk.text(trace)))
    head.add_row("[bold]format", f"{data['format']} {escape(data['format_version'] or '')}  {escape(data['producer'] or '')}")
    head.add_row("[bold]span", fmt_ns(data["span_ns"]))
    if data["rank"] is not None:
        head.add_row("[bold]rank", f"{data['rank']} / {data['world_size'] or '?'}")
    c = data["counts"]
    head.add_row("[bold]events", ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in c.items() if v))
    if data["iterations"]:
        head.add_row("[bold]iterations", str(data["iterations"]))
    if data["correlation_resolved_fraction"] is not None:
        head.add_row("[bold]launch links", f"{data['correlation_resolved_fraction']:.1%} of kernels linked to their API call")
    console.print(head)
    if not data["has_gpu_activity"]:
        console.print("[yellow]No GPU activity in this trace[/]: GPU rules will be skipped.")
    if data["devices"]:
        t = Table(title="Devices", title_justify="left")
        for col in ("id", "name", "SMs", "memory", "GPU busy"):
            t.add_column(col)
        for d in data["devices"]:
            t.add_row(str(d["id"]), escape(d["name"] or "?"), str(d["sm_count"] or "?"),
                      f"{d['memory_bytes'] / 2**30:.0f} GiB" if d["memory_bytes"] else "?",
                      f"{d['busy_share']:.1%}" if d["busy_share"] is not None else
                      "idle" if not d["active"] else "not timed")
        console.print(t)
    if data["streams"]:
        t = Table(title="Streams", title_justify="left")
        for col in ("device", "stream", "events", "busy"):
            t.add_column(col, justify="right")
        for s in data["streams"][:20]:
            t.add_row(str(s["device"]), str(s["stream"]), f"{s['events']:,}", fmt_ns(s["busy_ns"]))
        console.print(t)
    if data["top_kernels"]:
        t = Table(title="Top kernels by GPU time", title_justify="left")
        for col, j in (("time", "right"), ("share", "right"), ("count", "right"), ("median", "right"), ("kernel", "left")):
            t.add_column(col, justify=j, overflow="fold" if col == "kernel" else "ellipsis")
        for k in data["top_kernels"]:
            t.add_row(fmt_ns(k["total_ns"]), f"{k['share']:.1%}", f"{k['count']:,}", fmt_ns(k["median_ns"]),
                      escape(k["name"][:120]))
        console.print(t)
    print_efficiency(console, data["efficiency"])
    if data.get("memory"):
        from .memory_view import print_memory
        print_memory(console, data["memory"])
    if data.get("critical_path"):
        from .whatif import print_critical_path
        print_critical_path(console, "Critical path", data["critical_path"])
    for note in data["notes"]:
        console.print(f"[dim]note: {escape(note)}[/]")
