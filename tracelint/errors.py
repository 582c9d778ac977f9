"""User-facing errors. The CLI turns these into one line on stderr and exit code 2."""
from __future__ import annotations


class TracelintError(Exception):
    """Any failure the user can fix (bad input, bad option); never shown as a traceback."""


class TraceFormatError(TracelintError):
    """The file is not a trace tracelint can read (corrupt, truncated, unknown schema)."""


class ConfigError(TracelintError):
    """Invalid configuration (unknown rule, bad threshold, malformed config file)."""
