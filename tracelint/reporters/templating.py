"""The one jinja2 environment every HTML report renders with: autoescaped (names inside traces
are untrusted), strict about undefined names, with the shared number filters. jinja2 is
imported on the first HTML render only: a module that also renders JSON or text (a job's
report) need not pay its 30-40 ms."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .fmt import clean, fmt_bytes, fmt_ns

if TYPE_CHECKING:
    import jinja2

TEMPLATES = Path(__file__).parent / "templates"

_env: jinja2.Environment | None = None


def environment() -> jinja2.Environment:
    global _env
    if _env is None:
        import jinja2
        _env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                                  autoescape=True, trim_blocks=True, lstrip_blocks=True,
                                  undefined=jinja2.StrictUndefined)
        _env.filters["ns"] = fmt_ns
        _env.filters["bytes"] = fmt_bytes
        _env.filters["clean"] = clean
    return _env
