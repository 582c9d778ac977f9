"""`tracelint baseline save RUN1 RUN2 ... -o tracelint-perf-baseline.json`: key metrics of one or
more runs of the same workload (every sample, so the gate can measure the noise), the
workload's fingerprint, findings identities, git commit, hardware and versions."""
from __future__ import annotations

from typing import Annotated

import typer

from .app import app, fail
from .common import note, sink, stderr
from .diff import BucketOpt, ConfidenceOpt, FloorOpt, load_profiles, policy_from

baseline_app = typer.Typer(name="baseline", no_args_is_help=True,
                           help="Performance baselines for `tracelint gate`.")
app.add_typer(baseline_app, name="baseline")


@baseline_app.command("save")
def save(
    traces: Annotated[list[str], typer.Argument(help="One or more runs of the same workload.", show_default=False)],
    output: Annotated[str, typer.Option("--output", "-o", help="Performance baseline file to write.")] = "tracelint-perf-baseline.json",
    bucket: BucketOpt = None,
    floor: FloorOpt = None,
    confidence: ConfidenceOpt = None,
    max_buckets: Annotated[int, typer.Option("--max-buckets", help="Most annotation buckets kept (longest first).")] = 16,
    no_findings: Annotated[bool, typer.Option("--no-findings", help="Do not lint the runs for findings fingerprints.")] = False,
):
    """Save a performance baseline (per-bucket P50/P99, GPU time per class, findings) from one
    or more runs; 3 or more runs let the gate measure run-to-run noise."""
    from ..analysis.perf_baseline import make_baseline, save_baseline
    if max_buckets < 0:
        raise fail("--max-buckets must be >= 0")
    policy = policy_from(floor, confidence)
    patterns = list(bucket or [])
    profiles = load_profiles(traces, patterns, not no_findings, progress=True)
    doc = sink(traces).model(make_baseline(profiles, patterns=patterns, policy=policy,
                                           max_buckets=max_buckets))   # a file meant to be committed
    from ..io import check_output
    check_output(output, traces)
    save_baseline(output, doc)
    git = (doc.get("git") or {}).get("commit")
    note(f"baseline: {len(doc['metrics'])} metric(s), {len(doc['findings'])} finding "
         f"identities from {len(traces)} run(s)"
                 + (f" at commit {git[:12]}" if git else "") + f" -> {output}")
    if len(traces) == 1:
        stderr.print("note: one run: the gate judges noise from the spread of iterations within "
                     "it; save from 3+ runs to measure run-to-run noise")
    elif len(traces) == 2:
        stderr.print("note: 2 runs: run-to-run noise rests on one degree of freedom (wide "
                     "intervals); 3+ runs narrow them")
