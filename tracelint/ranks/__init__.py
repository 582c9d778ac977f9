"""Multi-rank (distributed job) analysis: per-rank map, cross-rank reduce, job reports.

    from tracelint.ranks import lint_job, render_job
    report = lint_job(["traces/run42/"], jobs=4)            # or dask_address="tcp://host:8786"
    render_job(report, "terminal")

Each rank is loaded and reduced to a compact RankSummary by a worker (summary.py); the
cross-rank rules TL201-TL205 (tl2*.py) read only the summaries (rules.JobContext); job.py finds
the traces, runs the map on a local process pool or a Dask cluster, and groups ranks into a job;
report.py holds JobReport and its terminal / JSON / HTML / Markdown renderers; synth.py builds
multi-rank jobs with planted skew from one real rank.
"""
from __future__ import annotations

__all__ = ["lint_job", "JobReport", "RankSummary", "render_job", "render_job_terminal",
           "render_job_html", "render_job_json", "discover", "summarize_source", "cross_rank_rules"]


def __getattr__(name: str):
    if name in ("lint_job", "discover"):
        from . import job
        return getattr(job, name)
    if name in ("JobReport", "render_job", "render_job_terminal", "render_job_html", "render_job_json"):
        from . import report
        return getattr(report, name)
    if name in ("RankSummary", "summarize_source"):
        from . import summary
        return getattr(summary, name)
    if name == "cross_rank_rules":
        from .rules import cross_rank_rules
        return cross_rank_rules
    raise AttributeError(f"module 'tracelint.ranks' has no attribute {name!r}")
