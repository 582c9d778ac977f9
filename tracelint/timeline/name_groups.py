"""Classify many names at the cost of few: range names that differ only in the ids PyTorch
appends to them share one answer.

Why: torch.autograd.profiler.emit_nvtx and FSDP's record_function name each op's range
"aten::to, op_id = 317151" (also `, seq = N`, `, stashed seq = N` and `, input_op_ids =
[...]`), so every call is a name of its own. A 1 s nsys slice of an FSDP run holds 16,600 such
names for about 300 ops; a minute of it, a million. Classification runs once per distinct
name (classify.py), so it ran once per call: nine classifications of 332,000 such names took
4.0 s, 1.6 s grouped (keys included). No
classifier of tracelint reads these ids (they read the op, its sizes and the rest of the
text), so each name's answer is its group's: the same name with the ids blanked.
"""
from __future__ import annotations

import re
import weakref
from typing import Callable

import numpy as np
import pandas as pd

_IDS = re.compile(r"(, (?:stashed seq|seq|op_id) = )\d+|(, input_op_ids = )\[[^\]]*\]")
_LAST_ID = ", op_id = "
#: Fewer names than this are each asked on their own: grouping would cost more than it saves.
GROUP_AT_LEAST = 2_000
#: Groups of the categories seen last, by id (checked against a weak reference): the rules
#: classify one name column many times.
_SEEN: dict[int, tuple] = {}
_SEEN_AT_MOST = 8


def per_category(categories: pd.Index, fn: Callable[[str], object]) -> list:
    """[fn(str(category)) for each category], with fn asked once per group of categories equal
    but for their emit_nvtx / FSDP ids. Only for classifiers of tracelint's own (an op, a
    role, a kind): not for exact names or a user's regex, which may name one call by its id."""
    if len(categories) < GROUP_AT_LEAST:
        return [fn(c) for c in _names(categories)]
    group, heads = _groups(categories)
    answers = np.fromiter((fn(h) for h in heads), dtype=object, count=len(heads))
    return answers[group].tolist()      # one take, not a step of Python per category


def representatives(categories: pd.Index) -> list[str]:
    """One name of each group of categories equal but for their emit_nvtx / FSDP ids, as str
    (every category when they are few): for what any name may say (the trace's vendor and
    workload kind, timeline.classify), where 332,000 names were searched one by one."""
    if len(categories) < GROUP_AT_LEAST:
        return _names(categories)
    return list(_groups(categories)[1])


def _names(categories: pd.Index) -> list:
    """The categories as str: a list of the index as it is when every one already is."""
    names = categories.tolist()
    return names if categories.inferred_type == "string" else [str(c) for c in names]


def _groups(categories: pd.Index) -> tuple[np.ndarray, list]:
    """(group of each category, the name of each group's first category); kept for the
    categories seen last, so the rules' many classifications of one name column make neither
    the groups nor the names again."""
    seen = _SEEN.get(id(categories))
    if seen is not None and seen[0]() is categories:
        return seen[1], seen[2]
    names = _names(categories)
    keys = np.array([_blank_ids(n) for n in names], dtype=object)
    group = pd.factorize(keys)[0]               # codes in order of first appearance
    heads = [names[i] for i in np.unique(group, return_index=True)[1].tolist()]
    if len(_SEEN) >= _SEEN_AT_MOST:
        _SEEN.clear()
    _SEEN[id(categories)] = (weakref.ref(categories), group, heads)
    return group, heads


def _blank_ids(name: str) -> str:
    """The name with its ids blanked: string methods for FSDP's "op, op_id = N" (a regular
    expression took 6 µs a name, 2 s for 332,000), the expression for the rest."""
    head, sep, tail = name.rpartition(_LAST_ID)
    if sep and tail.isdigit() and "seq = " not in head and "op_id" not in head:
        return head + ", op_id = #"
    if "seq = " not in name and "op_id" not in name:
        return name
    return _IDS.sub(r"\1\2#", name)
