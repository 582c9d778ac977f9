"""What a rule instance keeps after check(): the runner holds every instance until the fixes'
replays are done (engine/savings reads fix_edits), through the what-if's memory peak, so an
array with a value per API call or kernel left on one is held there too. TL038 kept its graph
roles, an object array of 8 bytes a call, that way: 4.3 GB of peak became 4.8-4.9 GB at 10 M kernels
(docs/performance.md, nineteenth pass)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import TRACES, trace_or_skip

import tracelint
from tracelint.api import available_rules
from tracelint.engine.config import Config
from tracelint.engine.context import Context

_ARRAYS = (np.ndarray, pd.Categorical, pd.Series, pd.Index, pd.DataFrame)


def _arrays(obj, depth: int = 0):
    """The arrays (and frames) reachable from obj through dicts, lists and tuples."""
    if isinstance(obj, _ARRAYS):
        yield obj
    elif depth < 4 and isinstance(obj, dict):
        for v in obj.values():
            yield from _arrays(v, depth + 1)
    elif depth < 4 and isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _arrays(v, depth + 1)


@pytest.mark.parametrize("trace", ["torch/hta_v100_rank1of2.json.gz",
                                   "nsys/nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite"])
def test_no_rule_keeps_a_value_per_call_or_kernel_after_its_check(trace):
    tl = tracelint.load(trace_or_skip(TRACES / trace))
    ctx = Context(tl, Config(), None)
    rows = max(len(tl.api_calls), len(tl.kernels))
    assert rows > 1000
    checked = 0
    for rule_cls in available_rules():
        if rule_cls.scope != "trace":
            continue
        rule = rule_cls()
        if rule.applicable(ctx):
            continue
        list(rule.check(ctx))
        checked += 1
        held = [(name, len(a)) for name, v in vars(rule).items() for a in _arrays(v)
                if len(a) >= rows // 2]
        assert not held, f"{rule_cls.id} keeps {held} after check ({rows} calls or kernels)"
    assert checked > 10
