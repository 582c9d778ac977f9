"""Multi-rank (distributed job) analysis: per-rank map, cross-rank reduce, job reports.

    from tracelint.ranks import lint_job
    from tracelint.reporters.job import render_job
    report = lint_job(["traces/run42/"], jobs=4)            # or dask_address="tcp://host:8786"
    render_job(report, "terminal")

Each rank is loaded and reduced to a compact RankSummary by a worker (summary.py); the
job-scope rules TL201-TL205 (rules/tl2*.py) read only the summaries (engine.job_context); job.py finds
the traces, runs the map on a local process pool or a Dask cluster, and groups ranks into a job;
report.py holds JobReport (tracelint.reporters.job renders it); synth.py builds
multi-rank jobs with planted skew from one real rank.
"""
from __future__ import annotations

__all__ = ["lint_job", "JobReport", "RankSummary", "discover", "summarize_source"]


def __getattr__(name: str):
    if name in ("lint_job", "discover"):
        from . import job
        return getattr(job, name)
    if name == "JobReport":
        from . import report
        return getattr(report, name)
    if name in ("RankSummary", "summarize_source"):
        from . import summary
        return getattr(summary, name)
    raise AttributeError(f"module 'tracelint.ranks' has no attribute {name!r}")
