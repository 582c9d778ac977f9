"""Pieces shared by commands: loading with a progress bar, error wrapping, output writing."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import TracelintError
from ..io import write_atomic
from ..reporters.fmt import fmt_ns  # noqa: F401  (re-exported for commands)

stderr = Console(stderr=True, highlight=False)


@contextmanager
def loading_progress(path: str, enabled: bool = True):
    """A progress bar on stderr (TTY only) while a big trace loads; yields the callback."""
    if not enabled or not stderr.is_terminal:
        yield None
        return
    with Progress(TextColumn("[dim]{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=stderr, transient=True) as prog:
        task = prog.add_task(f"loading {Path(path).name}", total=1.0)

        def cb(stage: str, fraction: float) -> None:
            prog.update(task, completed=fraction, description=f"{Path(path).name}: {stage}")
        yield cb


def load_trace(path: str, progress: bool = True):
    from ..importers import load
    with loading_progress(path, progress) as cb:
        return load(path, progress=cb)


def emit(text: str, output: str | None, scrub: bool = False, markup: bool = False) -> None:
    """Write to a file atomically, or to stdout. scrub=True replaces secret-looking values
    (for outputs rendered from trace names that were not scrubbed before rendering); markup=True
    for HTML/Markdown, where the marker must be escaped to stay visible."""
    if scrub:
        from ..secrets import scrub_text
        text = scrub_text(text)
        if markup:
            text = text.replace("<redacted>", "&lt;redacted&gt;")
    if output:
        write_atomic(output, text if text.endswith("\n") else text + "\n")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


__all__ = ["TracelintError", "load_trace", "emit", "fmt_ns", "stderr"]
