"""Every output form of every result, rendered from the result object (never from a trace).

render(report, fmt) is the one dispatch `tracelint lint` uses for a trace's Report and a job's
JobReport alike; terminal output prints to the console given (or stdout) and returns None.
"""
from __future__ import annotations

FORMATS = ("terminal", "json", "html", "sarif", "markdown")


def render(report, fmt: str, verbose: bool = False, quiet: bool = False, console=None) -> str | None:
    fmt = getattr(fmt, "value", fmt)
    if not hasattr(report, "timeline"):          # a job's JobReport
        from .job import render_job
        return render_job(report, fmt, verbose=verbose, quiet=quiet, console=console)
    if fmt == "terminal":
        from .terminal import render_terminal, stdout_console
        render_terminal(report, console or stdout_console(), verbose=verbose, quiet=quiet)
        return None
    if fmt == "json":
        from .json_report import render_json
        return render_json(report)
    if fmt == "html":
        from .html import render_html
        return render_html(report)
    if fmt == "sarif":
        import json

        from .sarif import render_sarif
        return json.dumps(render_sarif(report), indent=1)
    from .markdown import render_markdown
    return render_markdown(report)


def render_text(report, verbose: bool = False, quiet: bool = False, width: int = 120) -> str:
    """The terminal rendering as plain text (for `-o report.txt`)."""
    import io

    from rich.console import Console
    if not hasattr(report, "timeline"):
        from .job import render_job_text
        return render_job_text(report, verbose=verbose, quiet=quiet)
    rec = Console(record=True, width=width, color_system=None, file=io.StringIO())
    render(report, "terminal", verbose=verbose, quiet=quiet, console=rec)
    return rec.export_text()


__all__ = ["FORMATS", "render", "render_text"]
