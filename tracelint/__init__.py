"""tracelint: trace analysis and anti-pattern linting for GPU / AI workloads."""
from __future__ import annotations

__version__ = "0.1.0"

from .errors import TracelintError, TraceFormatError  # noqa: E402
from .importers import load  # noqa: E402
from .timeline.model import Timeline  # noqa: E402

__all__ = ["load", "Timeline", "TracelintError", "TraceFormatError", "__version__"]
