"""`tracelint gate TRACE... --baseline baseline.json`: exit 1 when a key metric regresses
beyond its gate (noise band x 1.5, floor 2 %; 5 % without repeats; docs/statistics.md)."""
from __future__ import annotations

import json
from enum import Enum
from typing import Annotated, Optional

import typer
from rich.console import Console

from ..errors import TracelintError
from .app import app, fail
from .common import emit
from .diff import BucketOpt, DefaultGateOpt, FactorOpt, FloorOpt, load_profiles, policy_from


class GateFormat(str, Enum):
    terminal = "terminal"
    json = "json"
    markdown = "markdown"


@app.command()
def gate(
    traces: Annotated[list[str], typer.Argument(help="One or more runs to check.", show_default=False)],
    baseline: Annotated[str, typer.Option("--baseline", help="Baseline from `tracelint baseline save`.")],
    fmt: Annotated[GateFormat, typer.Option("--format", "-f", help="Output format.")] = GateFormat.terminal,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write the report to this file (atomically).")] = None,
    bucket: BucketOpt = None,
    floor: FloorOpt = None,
    default_gate: DefaultGateOpt = None,
    band_factor: FactorOpt = None,
    fail_on_new_findings: Annotated[bool, typer.Option("--fail-on-new-findings", help="Also exit 1 on findings not in the baseline.")] = False,
    no_findings: Annotated[bool, typer.Option("--no-findings", help="Do not compare findings.")] = False,
):
    """Check runs against a baseline; exit 1 on a regression beyond the noise gate."""
    from ..analysis.gate import read_metrics_baseline, render_gate_markdown, render_gate_terminal, run_gate
    try:
        doc = read_metrics_baseline(baseline)
    except TracelintError as exc:
        raise fail(str(exc)) from None
    opts = doc.get("options", {})
    policy = policy_from(floor, default_gate, band_factor, opts)
    patterns = list(bucket) if bucket else list(opts.get("buckets", []))
    profiles = load_profiles(traces, patterns, not no_findings, progress=fmt is GateFormat.terminal)
    res = run_gate(doc, profiles, policy=policy, fail_on_findings=fail_on_new_findings)
    if fmt is GateFormat.json:
        from ..analysis.diff import _clean
        emit(json.dumps(_clean(res.to_dict()), indent=1, allow_nan=False), output, scrub=True)
    elif fmt is GateFormat.markdown:
        emit(render_gate_markdown(res), output, scrub=True, markup=True)
    elif output:
        rec = Console(record=True, width=140, color_system=None, file=open("/dev/null", "w"))
        render_gate_terminal(res, rec)
        emit(rec.export_text(), output, scrub=True)
    else:
        render_gate_terminal(res, Console())
    raise typer.Exit(1 if res.failed else 0)
