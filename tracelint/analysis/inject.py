"""Controlled A/B: a copy of a trace with one kernel class made slower, to check that a gate
catches a change of known size (tests, docs/statistics.md). The input is never modified."""
from __future__ import annotations

import dataclasses

import numpy as np

from ..timeline.classify import in_labels
from ..timeline.model import Timeline


def slow_down(tl: Timeline, kernel_class: str, factor: float) -> Timeline:
    """A new Timeline whose kernels of ``kernel_class`` last ``factor`` times as long (each
    keeps its start; nothing else moves, so GPU time per class changes by exactly that)."""
    k = tl.kernels.copy()
    sel = in_labels(tl.kernel_class, (kernel_class,))
    start, end = k["start"].to_numpy(), k["end"].to_numpy()
    k["end"] = np.where(sel, start + np.round((end - start) * factor).astype(np.int64), end)
    return dataclasses.replace(tl, kernels=k)
