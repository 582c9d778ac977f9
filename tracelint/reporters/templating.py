"""The one jinja2 environment every HTML report renders with: autoescaped (names inside traces
are untrusted), strict about undefined names, with the shared number filters."""
from __future__ import annotations

from pathlib import Path

import jinja2

from .fmt import clean, fmt_bytes, fmt_ns

TEMPLATES = Path(__file__).parent / "templates"

_env: jinja2.Environment | None = None


def environment() -> jinja2.Environment:
    global _env
    if _env is None:
        _env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                                  autoescape=True, trim_blocks=True, lstrip_blocks=True,
                                  undefined=jinja2.StrictUndefined)
        _env.filters["ns"] = fmt_ns
        _env.filters["bytes"] = fmt_bytes
        _env.filters["clean"] = clean
    return _env
