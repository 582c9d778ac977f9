"""The one escaping path for untrusted text (names from traces, file names, config values).

Every writer that puts such text in front of a person goes through here:

- `clean`: control characters removed for any output (C0 but tab/newline, DEL, C1, the bidi
  embedding / override / isolate controls, U+061C, U+2028/U+2029, U+FEFF): an escape sequence in
  a kernel name must not clear a screen, fake an OSC-8 hyperlink, or reorder what a reviewer reads.
- `terminal_text`: one line for a terminal or a log (newlines flattened, length bounded).
- `rich_text`: `terminal_text` plus rich markup escaping, for strings put into rich markup.
- `md_escape`: Markdown paragraphs and table cells: no inline or block markup, no raw HTML
  (`<img onerror>`, `<!--` that hides the rest of a PR comment), no remote images, no `@mention`.
- `sarif_uri_ok`: whether a frame path may become a SARIF artifact URI (plain paths only: a
  `scheme://` path from a trace would be a link a code-review UI follows).
"""
from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                      "\u202a-\u202e\u2066-\u2069\ufeff]")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")          # inline markup; ( ! only act after [ ]
_LINE_START = re.compile(r"^(\s*)([#+=-])|^(\s*\d+)([.)])")  # block markup at line start
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:(//|[^\\/])")
LINE_LIMIT = 300


def clean(text: Any, limit: int | None = None) -> str:
    """Text with control / bidi characters removed, newlines flattened, cut to `limit`."""
    s = _CONTROL.sub("", str(text).replace("\r\n", " ").replace("\n", " ").replace("\t", " "))
    if limit is not None and len(s) > limit:
        cut = s[: max(limit - 1, 1)]
        space = cut.rfind(" ")
        if space >= limit * 0.6:           # prose: end at a word, never mid-word
            cut = cut[:space].rstrip(" ,;:")
        s = cut + "…"
    return s


def terminal_text(text: Any, limit: int | None = LINE_LIMIT) -> str:
    """One safe line for a terminal or a log (error messages quoting file names or values)."""
    return clean(text, limit)


def rich_text(text: Any, limit: int | None = None) -> str:
    """`clean` plus rich markup escaping (for untrusted text inside rich markup strings)."""
    from rich.markup import escape
    return escape(clean(text, limit))


def md_escape(text: Any, limit: int | None = None) -> str:
    """Text safe inside Markdown paragraphs and table cells: no markup, no HTML, no mentions."""
    s = clean(text, limit)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    s = _LINE_START.sub(lambda m: (m.group(1) or m.group(3) or "") + "\\"
                        + (m.group(2) or m.group(4)), s)
    return s.replace("@", "@\u200b")            # '@user' must not notify anyone


def md_code(text: Any, limit: int | None = None) -> str:
    """An inline code span (`name`) whatever backticks the text holds."""
    s = clean(text, limit)
    ticks = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (ticks + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def sarif_uri_ok(path: str) -> bool:
    """A plain (absolute, relative or Windows drive) path; never `scheme://` or `scheme:`."""
    p = path.strip()
    if not p or _CONTROL.search(p):
        return False
    if re.match(r"^[A-Za-z]:[\\/]", p):
        return True
    return not _SCHEME.match(p)


def md_safe(text: Any, limit: int | None = None) -> str:
    """Authored Markdown kept as Markdown (emphasis, code, links stay) but made harmless:
    control characters removed (newlines kept), no raw HTML or comments, no remote images,
    no `@mention`. For human-written text that may come from a checked-out repository."""
    lines = [clean(ln, limit) for ln in str(text).splitlines()]
    parts = "\n".join(lines).split("`")
    for i in range(0, len(parts), 2):        # outside code spans (inside, HTML is inert)
        parts[i] = parts[i].replace("<", "&lt;").replace("![", "!\\[").replace("@", "@\u200b")
    return "`".join(parts)


def has_control(text: str) -> bool:
    """Whether `text` holds a character `clean` would remove (newline and tab aside)."""
    return bool(_CONTROL.search(text))
