"""Python frames from legacy Kineto `args["Call stack"]` strings (PyTorch <= 1.x, with_stack).

Each op lists its stack innermost first, `file.py(138): fn;file2.py(20): <module>`, and the
line of every frame is the line being executed (the call), unlike the Python tracer's
`python_function` events that name a frame by its definition line. The frames become rows of
the python_frames table spanning the op, so the same source-location code serves both; the
importer marks the trace with meta.extra["python_frame_lines"] = "call".
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..timeline.schema import make_table

_FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")


def parse_stack(text: str) -> list[tuple[str, int, str]]:
    """Outermost frame first: [(file, line, function), ...]; unparsable entries skipped."""
    out = []
    for part in reversed(text.split(";")):
        m = _FRAME.match(part.strip())
        if m:
            out.append((m.group(1), int(m.group(2)), m.group(3)))
    return out


def frames_from_call_stacks(start: np.ndarray, end: np.ndarray, pid: np.ndarray,
                            tid: np.ndarray, stacks: list[str]) -> pd.DataFrame:
    """One python_frames row per (op, stack entry); depth = position from the outermost."""
    parsed: dict[str, list[tuple[str, int, str]]] = {}
    rows: list[tuple[int, tuple[str, int, str], int]] = []
    for i, text in enumerate(stacks):
        frames = parsed.get(text)
        if frames is None:
            frames = parsed[text] = parse_stack(text)
        rows += [(i, fr, d) for d, fr in enumerate(frames)]
    idx = np.array([r[0] for r in rows], np.int64)
    data = {"pid": pid[idx], "tid": tid[idx], "start": start[idx], "end": end[idx],
            "file": pd.Categorical([r[1][0] for r in rows]),
            "line": np.array([r[1][1] for r in rows], np.int64),
            "function": pd.Categorical([r[1][2] for r in rows]),
            "depth": np.array([r[2] for r in rows], np.int64),
            "parent": np.full(len(rows), -1, np.int64)}
    return make_table("python_frames", data, len(rows)).sort_values("start", kind="stable") \
        .reset_index(drop=True)
