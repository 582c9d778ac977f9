"""`tracelint diff A B` and `tracelint diff A1 A2 ... -- B1 B2 ...`: A/B comparison of runs,
bucket by bucket and kernel by kernel, judged against the noise band (docs/statistics.md)."""
from __future__ import annotations

import os
from enum import Enum
from typing import Annotated, Optional

import typer
from rich.console import Console

from ..errors import TracelintError
from .app import app, fail
from .common import emit, load_trace, note, sink

#: The "--" between the A runs and the B runs survives option parsing as this token.
SEPARATOR = "\x00--sep--\x00"


class DiffCommand(typer.core.TyperCommand):
    """Keeps the first bare `--` as a marker (click would swallow it)."""

    def parse_args(self, ctx, args):
        args = list(args)
        if "--" in args:
            args[args.index("--")] = SEPARATOR
        return super().parse_args(ctx, args)


class DiffFormat(str, Enum):
    terminal = "terminal"
    json = "json"
    markdown = "markdown"
    html = "html"


def split_runs(traces: list[str]) -> tuple[list[str], list[str]]:
    if SEPARATOR in traces:
        i = traces.index(SEPARATOR)
        a, b = traces[:i], traces[i + 1:]
        if SEPARATOR in b:
            raise fail("only one `--` may separate the A runs from the B runs")
    elif len(traces) == 2:
        a, b = traces[:1], traces[1:]
    else:
        raise fail("give two traces (`diff A B`) or separate repeated runs with `--` "
                   "(`diff A1 A2 ... -- B1 B2 ...`)")
    if not a or not b:
        raise fail("each side of `--` needs at least one trace")
    return a, b


def load_profiles(paths: list[str], patterns: list[str], findings: bool, progress: bool):
    """Load and profile each trace (one-line error and exit 2 on bad input)."""
    from ..analysis.buckets import compile_patterns, profile
    try:
        compile_patterns(patterns)
    except ValueError as exc:
        raise fail(str(exc)) from None
    out = []
    for path in paths:
        try:
            tl = load_trace(path, progress=progress)
            p = profile(tl, patterns, findings=findings)
        except TracelintError as exc:
            raise fail(str(exc)) from None
        p.source = path
        out.append(p)
    return out


def policy_from(floor: float | None, confidence: float | None, base: dict | None = None):
    from ..analysis.stats import GatePolicy
    o = base or {}
    pol = GatePolicy(floor=o.get("floor", 0.02) if floor is None else floor,
                     confidence=o.get("confidence", 0.95) if confidence is None else confidence)
    try:
        return pol.validate()
    except TracelintError as exc:
        raise fail(str(exc)) from None


BucketOpt = Annotated[Optional[list[str]], typer.Option(
    "--bucket", "-b", help="Extra bucket: a regex over range names (capture groups split it).")]
FloorOpt = Annotated[Optional[float], typer.Option(
    "--floor", help="Smallest change that counts, as a fraction (default 0.02): a regression "
                    "needs its whole confidence interval above it.")]
ConfidenceOpt = Annotated[Optional[float], typer.Option(
    "--confidence", help="Confidence of every interval: 0.9, 0.95 (default) or 0.99.")]


@app.command(cls=DiffCommand)
def diff(
    traces: Annotated[list[str], typer.Argument(help="A B, or A1 A2 ... -- B1 B2 ...", show_default=False)],
    fmt: Annotated[DiffFormat, typer.Option("--format", "-f", help="Output format.")] = DiffFormat.terminal,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write to this file (atomically).")] = None,
    bucket: BucketOpt = None,
    floor: FloorOpt = None,
    confidence: ConfidenceOpt = None,
    no_findings: Annotated[bool, typer.Option("--no-findings", help="Do not lint the runs to compare findings.")] = False,
    fail_on_regression: Annotated[bool, typer.Option("--fail-on-regression", help="Exit 1 when a bucket or the GPU time is slower.")] = False,
):
    """Compare runs A and B: buckets, kernels, kernel classes, syncs and findings."""
    from ..analysis.diff import diff_profiles
    from ..analysis.diff_render import render_html, render_markdown, render_terminal
    a_paths, b_paths = split_runs(traces)
    policy = policy_from(floor, confidence)
    patterns = list(bucket or [])
    progress = fmt is DiffFormat.terminal and output is None
    A = load_profiles(a_paths, patterns, not no_findings, progress)
    B = load_profiles(b_paths, patterns, not no_findings, progress)
    res = sink(a_paths + b_paths).model(diff_profiles(A, B, policy))   # scrub before formatting
    ins = a_paths + b_paths
    if fmt is DiffFormat.json:
        emit(res.to_json(), output, inputs=ins)
    elif fmt is DiffFormat.markdown:
        emit(render_markdown(res), output, markup=True, inputs=ins)
    elif fmt is DiffFormat.html:
        emit(render_html(res), output, markup=True, inputs=ins)
    elif output:
        rec = Console(record=True, width=160, color_system=None, file=open(os.devnull, "w"))
        render_terminal(res, rec)
        emit(rec.export_text(), output, inputs=ins)
    else:
        render_terminal(res, Console())
    if output:
        note(f"diff: {res.verdict}; written to {output}")
    raise typer.Exit(1 if fail_on_regression and res.verdict == "slower" else 0)
