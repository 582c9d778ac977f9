"""Pieces shared by commands: loading with a progress bar, error wrapping, output writing."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

from ..errors import TracelintError
from ..reporters.fmt import fmt_ns  # noqa: F401  (re-exported for commands)


class _Stderr:
    """rich's Console on stderr, made on first use: a command that writes nothing there (a
    lint into a file) does not import rich (20 ms, before a large trace's load forks).
    Attributes are the Console's; where rich wants the Console itself (a Progress's
    console=, which enters it with `with`), pass `.console`."""

    _console = None

    @property
    def console(self):
        if _Stderr._console is None:
            from rich.console import Console
            _Stderr._console = Console(stderr=True, highlight=False)
        return _Stderr._console

    def __getattr__(self, name: str):
        return getattr(self.console, name)


stderr = _Stderr()


def stderr_may_be_terminal() -> bool:
    """False where rich's Console.is_terminal is False too (no TTY, and no TTY_COMPATIBLE=1
    or FORCE_COLOR asking for one), without making the Console."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty or os.environ.get("TTY_COMPATIBLE") == "1" or bool(os.environ.get("FORCE_COLOR"))


@contextmanager
def loading_progress(path: str, enabled: bool = True):
    """A progress bar on stderr (TTY only) while a big trace loads; yields the callback."""
    if not enabled or not stderr_may_be_terminal() or not stderr.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    with Progress(TextColumn("[dim]{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=stderr.console, transient=True) as prog:
        task = prog.add_task(f"loading {Path(path).name}", total=1.0)

        def cb(stage: str, fraction: float) -> None:
            prog.update(task, completed=fraction, description=f"{Path(path).name}: {stage}")
        yield cb


def load_trace(path: str, progress: bool = True, workers: int | None = None):
    """The trace, a large plain Kineto JSON file decoded by `workers` processes (default: the
    usable CPUs, at most 4; tracelint.forking)."""
    from ..forking import set_load_workers
    from ..importers import load
    from ..warmup import forget
    set_load_workers(workers)
    try:
        with loading_progress(path, progress) as cb:
            return load(path, progress=cb)
    finally:
        forget()


def sink(sources=(), enabled: bool = True, paths: bool = False):
    """Start the command's output sink (tracelint.secrets.sink): every model the command
    prints is passed through `sink.model()` before formatting; `emit` and `note` write through
    it. sources: the traces the command reads (their exact secret values are removed too)."""
    from ..secrets.sink import use_sink
    return use_sink([str(s) for s in sources], paths=paths, enabled=enabled)


def emit(text: str, output: str | None, scrub: bool = True, markup: bool = False,
         inputs=()) -> None:
    """Write a command's report through the sink: to `output` (atomically over a regular
    file, straight into a device or FIFO; never over an input or a directory) or stdout.
    markup=True for HTML/Markdown, where a marker the last-line scrub inserts is escaped."""
    from ..secrets.sink import current_sink
    s = current_sink()
    if markup and s.enabled:
        before = text
        text = s.text(text)
        if text != before:
            text = text.replace("<redacted>", "&lt;redacted&gt;")
    s.write(text, output, inputs=inputs)


def note(text: str) -> None:
    """One line on stderr (scrubbed, control characters removed, no rich markup)."""
    from ..secrets.sink import current_sink
    stderr.print(current_sink().message(text), markup=False, highlight=False, soft_wrap=True)


__all__ = ["TracelintError", "load_trace", "emit", "note", "sink", "fmt_ns", "stderr"]
