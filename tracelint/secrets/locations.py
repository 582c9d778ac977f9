"""Where a hit is: table/column/row or JSON path labels, with secrets and personal data
scrubbed from the keys and names they quote."""
from __future__ import annotations

import re
from functools import lru_cache

import msgspec

from . import patterns as P

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@lru_cache(maxsize=8192)
def safe_label(text: str, limit: int = 80) -> str:
    """A key / name as it may appear in a location: secrets and personal data scrubbed."""
    text = P.scrub_string(str(text), paths=True)
    text = re.sub(r"[\x00-\x1f\x7f]", " ", text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def json_path(parts: list, generic: bool = False) -> str:
    out = ["$"]
    for p in parts:
        if isinstance(p, int):
            out.append("[*]" if generic else f"[{p}]")
        else:
            k = safe_label(p)
            out.append(f".{k}" if _IDENT.match(k) else f"[{msgspec.json.encode(k).decode()}]")
    return "".join(out)
