"""How case.yaml is written: block style for multi-line text, flow style for short lists, so
the files read well in review."""
from __future__ import annotations

from typing import Any

import yaml

from ..reporters.escape import has_control


class _Dumper(yaml.SafeDumper):
    """Block style for multi-line text, flow style for short lists of scalars."""


def _str_rep(dumper: yaml.SafeDumper, s: str):
    if has_control(s):                   # double quotes: the only style that escapes them
        return dumper.represent_scalar("tag:yaml.org,2002:str", s, style='"')
    if "\n" in s:
        return dumper.represent_scalar("tag:yaml.org,2002:str", s if s.endswith("\n") else s + "\n",
                                       style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", s)


def _list_rep(dumper: yaml.SafeDumper, seq: list):
    flow = len(seq) <= 4 and all(isinstance(x, (int, float, str)) and len(str(x)) < 24 for x in seq)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", seq, flow_style=flow)


_Dumper.add_representer(str, _str_rep)
_Dumper.add_representer(list, _list_rep)


def dump_yaml(data: dict[str, Any]) -> str:
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=96,
                     default_flow_style=False)
    if has_control(text):     # bidi / control characters: never raw in a file people review
        text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=False, width=96,
                         default_flow_style=False)
    return text
