"""A networkx view of a Timeline for causal questions (what launched this, what did a sync
wait for, what ran before on this stream). Edge lists are computed with numpy joins and
added in bulk; nodes are (table, row) pairs so any node maps back to its table row.

Edge kinds (attribute ``kind``):
  launch  api_calls row -> kernels/copies/memsets row (same pid and correlation id)
  nest    ranges parent -> ranges child (nesting per thread)
  stream  GPU activity -> next activity on the same (device, stream)
  sync    host sync call -> last GPU activity of that process that ended before the call
          returned (what the call waited for)
"""
from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd

from .schema import GPU_ACTIVITY_TABLES


def _launch_edges(tl, table: str) -> list[tuple]:
    launch = tl.launch_index(table)
    rows = np.flatnonzero(launch >= 0)
    return [(("api_calls", int(launch[r])), (table, int(r)), {"kind": "launch"}) for r in rows]


def _stream_edges(tl) -> list[tuple]:
    act = []
    for table in GPU_ACTIVITY_TABLES:
        df = tl.table(table)
        if len(df):
            act.append(pd.DataFrame({"table": table, "row": np.arange(len(df)),
                                     "device": df["device"].to_numpy(),
                                     "stream": df["stream"].to_numpy(),
                                     "start": df["start"].to_numpy()}))
    if not act:
        return []
    df = pd.concat(act, ignore_index=True).sort_values(["device", "stream", "start"],
                                                       kind="stable", ignore_index=True)
    same = (df["device"].to_numpy()[1:] == df["device"].to_numpy()[:-1]) & \
           (df["stream"].to_numpy()[1:] == df["stream"].to_numpy()[:-1])
    i = np.flatnonzero(same)
    t, r = df["table"].to_numpy(), df["row"].to_numpy()
    return [((t[k], int(r[k])), (t[k + 1], int(r[k + 1])), {"kind": "stream"}) for k in i]


def _nest_edges(tl) -> list[tuple]:
    p = tl.ranges["parent"].to_numpy()
    child = np.flatnonzero(p >= 0)
    return [(("ranges", int(p[c])), ("ranges", int(c)), {"kind": "nest"}) for c in child]


def _sync_edges(tl) -> list[tuple]:
    api = tl.api_calls
    if len(api) == 0 or not tl.has_gpu_activity:
        return []
    sync_rows = np.flatnonzero(np.asarray(tl.api_role) == "sync")
    if len(sync_rows) == 0:
        return []
    act = tl.gpu_activity.sort_values("end", kind="stable", ignore_index=True)
    ends = act["end"].to_numpy()
    k = np.searchsorted(ends, api["end"].to_numpy()[sync_rows], side="right") - 1
    tables, rows = act["table"].to_numpy(), act["row"].to_numpy()
    return [(("api_calls", int(s)), (tables[j], int(rows[j])), {"kind": "sync"})
            for s, j in zip(sync_rows, k) if j >= 0]


def build_graph(tl, include=("launch", "nest", "stream", "sync"), max_nodes: int = 2_000_000) -> nx.DiGraph:
    """Build the DiGraph; raises ValueError past max_nodes (use the tables for big traces)."""
    n = sum(len(tl.table(t)) for t in (*GPU_ACTIVITY_TABLES, "api_calls", "ranges"))
    if n > max_nodes:
        raise ValueError(f"graph view limited to {max_nodes} nodes; trace has {n}")
    g = nx.DiGraph()
    for table in (*GPU_ACTIVITY_TABLES, "api_calls", "ranges"):
        g.add_nodes_from(((table, i) for i in range(len(tl.table(table)))), table=table)
    if "launch" in include:
        for table in GPU_ACTIVITY_TABLES:
            g.add_edges_from(_launch_edges(tl, table))
    if "nest" in include:
        g.add_edges_from(_nest_edges(tl))
    if "stream" in include:
        g.add_edges_from(_stream_edges(tl))
    if "sync" in include:
        g.add_edges_from(_sync_edges(tl))
    return g
