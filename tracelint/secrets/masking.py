"""Masking and replacing: the printable stand-in of a value (mask), the replacement of
matched spans, and user / host names replaced everywhere (NameSet, scrub_string)."""
from __future__ import annotations

import re
from typing import Iterable

from .credential_names import is_marker
from .kinds import HOST_MARK, PERSONAL, PERSONAL_MARKS, REDACTED, SECRET, USER_MARK, Match
from .personal_data import NAME_STOPLIST, NOT_PERSONAL
from .text_scan import find_matches
from .token_shapes import PUBLIC_PREFIX


def mask(secret: str, kind: str = "") -> str:
    """A printable stand-in: the public prefix plus one character, and the length.

    `hf_a…(37 chars)`; values of unknown shape show at most 2 characters (none when short).
    """
    n = len(secret)
    m = PUBLIC_PREFIX.match(secret)
    if m and n >= 12:
        keep = min(len(m.group()) + 1, n // 2)
    elif kind in PERSONAL_MARKS:
        keep = 1 if n >= 4 else 0
    else:
        keep = 2 if n >= 16 else 0
    head = re.sub(r"[\x00-\x1f\x7f]", " ", secret[:keep])
    return f"{head}…({n} chars)"


def replacement(m: Match) -> str:
    return REDACTED if m.category == SECRET else PERSONAL_MARKS.get(m.kind, USER_MARK)


def apply(text: str, matches: Iterable[Match], paths: bool = False) -> str:
    """`text` with every secret span (and personal spans when paths=True) replaced."""
    parts: list[str] = []
    pos = 0
    for m in sorted(matches, key=lambda m: m.start):
        if m.category == PERSONAL and not paths:
            continue
        if m.start < pos:
            continue
        parts.append(text[pos:m.start])
        parts.append(replacement(m))
        pos = m.end
    if not parts:
        return text
    parts.append(text[pos:])
    return "".join(parts)


class NameSet:
    """User and host names discovered in a trace, replaced everywhere with paths=True."""

    def __init__(self, kinds: dict[str, str]):
        self.kinds = {n: k for n, k in kinds.items()
                      if len(n) >= 4 and n.lower() not in NAME_STOPLIST
                      and n.lower() not in NOT_PERSONAL and not is_marker(n)
                      and re.fullmatch(r"[A-Za-z0-9._\-]+", n)}
        names = sorted(self.kinds, key=len, reverse=True)
        self.regex = (re.compile(r"(?<![A-Za-z0-9_\-])(" + "|".join(map(re.escape, names))
                                 + r")(?![A-Za-z0-9_\-])") if names else None)

    def __bool__(self) -> bool:
        return self.regex is not None

    def sub(self, text: str) -> str:
        if self.regex is None or not text:
            return text
        return self.regex.sub(lambda m: HOST_MARK if self.kinds.get(m.group(1)) == "host-name"
                              else USER_MARK, text)


def scrub_string(text: str, paths: bool = False, names: NameSet | None = None,
                 key: str | None = None, path_hint: str = "") -> str:
    """Replace secrets (and with paths=True personal data and the `names`) in one string."""
    if not text:
        return text
    out = apply(text, find_matches(text, key=key, path_hint=path_hint, personal=paths), paths)
    if paths and names:
        out = names.sub(out)
    return out
