"""The per-gap loop that timeline.gap_index replaced with array passes, kept as the oracle its
tests compare against: one gap at a time, the standard library's bisect on each table's rows.
Written before the vectorised version (git: tracelint/timeline/gap_index.py at 329285e)."""
from __future__ import annotations

from bisect import bisect_left as _left, bisect_right as _right

from tracelint.timeline.gap_index import (BLOCKED, EVENT_WAIT, GRAPH, LATE, LAUNCH_CALL,
                                          NO_LAUNCH, QUEUED, UNLINKED)


def _span(keys, first, stop, key):
    """[first, stop) of `key`'s rows in a table grouped by key ((0, 0): none)."""
    k = _left(keys, key, 0, len(keys))
    if k < len(keys) and keys[k] == key:
        return first[k], stop[k]
    return 0, 0


def _candidates(keys, first, stop, start, cummax, key, lo, hi):
    """[i, j): the rows of `key` that may overlap [lo, hi) (start < hi, running end > lo);
    the ones among them with end > lo do."""
    a, b = _span(keys, first, stop, key)
    return _right(cummax, lo, a, b), _left(start, hi, a, b)


def _covered(start, end, i, j, lo, hi):
    """ns of [lo, hi) inside the union of rows [i, j) with end > lo (sorted by start)."""
    total, cur_s, cur_e = 0, lo, lo
    for k in range(i, j):
        if end[k] <= lo:
            continue
        s = start[k] if start[k] > lo else lo
        e = end[k] if end[k] > s else s
        if e > hi:
            e = hi
        if e <= s:
            continue
        if s > cur_e:
            total += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    return total + cur_e - cur_s


def _longest(rows, start, end, i, j, lo, hi):
    """The row among [i, j) with end > lo that overlaps [lo, hi) most (ties: the lowest row;
    one candidate: that row), or -1."""
    best, best_ov = -1, 0
    for k in range(i, j):
        if end[k] <= lo:
            continue
        ov = (end[k] if end[k] < hi else hi) - (start[k] if start[k] > lo else lo)
        if best < 0 or ov > best_ov or (ov == best_ov and rows[k] < best):
            best, best_ov = rows[k], ov
    return best


def _waited(p, li, t0, t1, d_stream, d_launch, a_start, a_thread, w_keys, w_first, w_stop,
            w_start, w_end, w_cummax, l_keys, l_first, l_stop, linked, s_keys, s_first, s_stop,
            s_start):
    """Did the stream of activity p wait on another stream's event before running it? (a GPU
    stream wait on that stream within [t0, t1], or a stream-wait call of the launching thread
    since the previous linked launch on that stream)"""
    stream = d_stream[p]
    i, j = _candidates(w_keys, w_first, w_stop, w_start, w_cummax, stream, t0 - 1, t1 + 1)
    for k in range(i, j):
        if w_end[k] > t0 - 1:
            return True
    if len(s_start) == 0:
        return False
    a, b = _span(l_keys, l_first, l_stop, stream)
    k = _left(linked, p, a, b) - 1
    lo = a_start[d_launch[linked[k]]] if k >= a else -1
    a, b = _span(s_keys, s_first, s_stop, a_thread[li])
    return _right(s_start, a_start[li], a, b) > _left(s_start, lo, a, b)


def attribute_gaps(gs, ge, pos, d_start, d_stream, d_launch, a_start, a_end, a_thread, is_graph,
                   b_keys, b_first, b_stop, b_rows, b_start, b_end, b_cummax,
                   n_rows, n_start, n_end, n_cummax,
                   w_keys, w_first, w_stop, w_start, w_end, w_cummax,
                   l_keys, l_first, l_stop, linked, s_keys, s_first, s_stop, s_start,
                   causes, nxt_pos, launch, blocker):
    """Per gap [gs, ge): ns per cause (columns CAUSES of `causes`), the next activity's
    position (nxt_pos), its launch call (launch) and the longest blocking call (blocker);
    -1 where there is none. b_*: blocking calls by thread; n_*: the same by start alone;
    w_*: GPU stream waits by stream; l_*: linked activity by stream; s_*: stream-wait calls
    by thread (see GapIndex)."""
    nd = len(d_start)
    for g in range(len(gs)):
        lo, hi = gs[g], ge[g]
        p = pos[g]
        if p >= nd or d_start[p] > hi:
            causes[g, NO_LAUNCH] = hi - lo
            i = _right(n_cummax, lo, 0, len(n_cummax))
            j = _left(n_start, hi, 0, len(n_start))
            blocker[g] = _longest(n_rows, n_start, n_end, i, j, lo, hi)
            continue
        nxt_pos[g] = p
        li = d_launch[p]
        if li < 0:
            causes[g, UNLINKED] = hi - lo
            continue
        launch[g] = li
        t_launch = a_start[li]
        t_launch = lo if t_launch < lo else (hi if t_launch > hi else t_launch)
        i, j = _candidates(b_keys, b_first, b_stop, b_start, b_cummax, a_thread[li], lo, t_launch)
        blocked = _covered(b_start, b_end, i, j, lo, t_launch)
        causes[g, BLOCKED] = blocked
        causes[g, LATE] = t_launch - lo - blocked
        blocker[g] = _longest(b_rows, b_start, b_end, i, j, lo, t_launch)
        t_ret = a_end[li]
        t_ret = t_launch if t_ret < t_launch else (hi if t_ret > hi else t_ret)
        causes[g, LAUNCH_CALL] = t_ret - t_launch
        queued = hi - t_ret
        if queued > 0 and _waited(p, li, t_launch, hi, d_stream, d_launch, a_start, a_thread,
                                  w_keys, w_first, w_stop, w_start, w_end, w_cummax,
                                  l_keys, l_first, l_stop, linked, s_keys, s_first, s_stop,
                                  s_start):
            causes[g, EVENT_WAIT] = queued
        elif is_graph[li]:
            causes[g, GRAPH] = queued
        else:
            causes[g, QUEUED] = queued
