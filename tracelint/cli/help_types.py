"""`--help` in words a user reads, not Python type names.

Typer prints each option's Python type (`<bool>`, `<list[str]>`, `<int>`). Here: flags show
nothing (the name says it), choices list their values, other values a placeholder (TEXT, N,
PATH), repeatable options say so. Imported by app._register with every command module.
"""
from __future__ import annotations

import typer.core as _core

_WORDS = {"int": "N", "float": "X", "str": "TEXT", "Path": "PATH"}


def _display(self, ctx) -> str | None:
    desc = self.type_descriptor
    if getattr(self, "is_flag", False) or getattr(self, "is_bool_flag", False):
        return None
    if desc.is_choice:
        label = "|".join(str(getattr(c, "value", c)) for c in desc.choices or ())
    elif desc.is_path:
        label = "PATH"
    else:
        bare = self.bare_type() if not desc.is_list else str(self.bare_type())
        inner = bare[5:-1] if bare.startswith("list[") else bare
        if inner == "bool":
            return None
        label = _WORDS.get(inner, inner.upper())
    return label + (" …" if desc.is_list else "")


for _cls in (_core.TyperOption, _core.TyperArgument):
    _cls.display_type_rich = _display
