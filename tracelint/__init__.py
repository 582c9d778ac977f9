"""tracelint: trace analysis and anti-pattern linting for GPU / AI workloads.

Imports are lazy so that `tracelint.capture` (run inside a user's training process) does not
pull in pandas and the rest of the linter.
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["load", "lint", "render", "profile", "Timeline", "TracelintError", "TraceFormatError", "__version__"]


def __getattr__(name: str):
    if name in ("load", "lint"):
        from . import api
        return getattr(api, name)
    if name == "render":
        from .reporters import render
        return render
    if name == "profile":
        from .capture import profile
        return profile
    if name == "Timeline":
        from .timeline.model import Timeline
        return Timeline
    if name in ("TracelintError", "TraceFormatError"):
        from . import errors
        return getattr(errors, name)
    raise AttributeError(f"module 'tracelint' has no attribute {name!r}")
