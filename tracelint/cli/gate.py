"""`tracelint gate RUN... --baseline tracelint-perf-baseline.json`: exit 1 when a key metric's
confidence interval lies wholly above the floor (or a baseline metric is missing), exit 2 when
the runs are not the baseline's workload or nothing could be gated (docs/statistics.md)."""
from __future__ import annotations

import json
import os
from enum import Enum
from typing import Annotated, Optional

import typer
from rich.console import Console

from ..errors import TracelintError
from .app import app, fail
from .common import emit, sink, stderr
from .diff import BucketOpt, ConfidenceOpt, FloorOpt, load_profiles, policy_from


class GateFormat(str, Enum):
    terminal = "terminal"
    json = "json"
    markdown = "markdown"


@app.command()
def gate(
    traces: Annotated[list[str], typer.Argument(help="One or more runs to check.", show_default=False)],
    baseline: Annotated[str, typer.Option("--baseline", help="Performance baseline from `tracelint baseline save`.")],
    fmt: Annotated[GateFormat, typer.Option("--format", "-f", help="Output format.")] = GateFormat.terminal,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write the report to this file (atomically).")] = None,
    bucket: BucketOpt = None,
    floor: FloorOpt = None,
    confidence: ConfidenceOpt = None,
    fail_on_new_findings: Annotated[bool, typer.Option("--fail-on-new-findings", help="Also exit 1 on findings not in the baseline.")] = False,
    no_findings: Annotated[bool, typer.Option("--no-findings", help="Do not compare findings.")] = False,
):
    """Check one or more runs against a performance baseline: exit 1 on a regression (or a
    missing baseline metric), 2 when not comparable or nothing could be gated."""
    from ..analysis.gate import render_gate_markdown, render_gate_terminal, run_gate
    from ..analysis.perf_baseline import read_metrics_baseline
    try:
        doc = read_metrics_baseline(baseline)
    except TracelintError as exc:
        raise fail(str(exc)) from None
    opts = doc.get("options", {})
    policy = policy_from(floor, confidence, opts)
    patterns = list(bucket) if bucket else list(opts.get("buckets", []))
    profiles = load_profiles(traces, patterns, not no_findings, progress=fmt is GateFormat.terminal)
    sk = sink(traces)
    # the saved baseline holds scrubbed names: compare like with like, then scrub the result
    profiles = [sk.model(p) for p in profiles]
    res = sk.model(run_gate(doc, profiles, policy=policy, fail_on_findings=fail_on_new_findings))
    ins = [*traces, baseline]
    if fmt is GateFormat.json:
        from ..analysis.stats import clean_json
        emit(json.dumps(clean_json(res.to_dict()), indent=1, allow_nan=False), output, inputs=ins)
    elif fmt is GateFormat.markdown:
        emit(render_gate_markdown(res), output, markup=True, inputs=ins)
    elif output:
        rec = Console(record=True, width=140, color_system=None, file=open(os.devnull, "w"))
        render_gate_terminal(res, rec)
        emit(rec.export_text(), output, inputs=ins)
    else:
        render_gate_terminal(res, Console())
    if res.exit_code == 2 or output or fmt is not GateFormat.terminal:
        stderr.print(f"gate: {res.status}" + (f": {res.reasons()[0]}" if res.reasons() else ""),
                     markup=False, soft_wrap=True)
    raise typer.Exit(res.exit_code)
