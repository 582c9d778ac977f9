"""A forked worker's result back to its parent with its numpy arrays in shared memory.

ProcessPoolExecutor pickles a result into its pipe, and the parent unpickles it: every array is
copied three times and the pipe moves 64 KiB at a time. 33 MB of columns (a parallel Kineto
decode's worker) took 0.16 s that way, and 0.02 s through a memory file. Here the parent
opens one anonymous memory file per worker before the workers fork (they inherit it); a worker
pickles each result with protocol 5, which hands the arrays' buffers over out of band, writes
those buffers into the file as the result is made (Writer) and returns only the small pickles
and where each buffer lies. The parent maps the file once and unpickles onto views of it: no
copy. Anonymous (memfd): nothing to clean up if either side dies. Where there is no memfd
(not Linux) or the workers do not fork, results travel as before.
"""
from __future__ import annotations

import mmap
import os
import pickle

#: Returned by send() when the result went through the file.
_TAG = "tracelint.shared_result"


def open_file() -> int | None:
    """A memory file for one task's result, to open before the workers fork; None: none here."""
    if not hasattr(os, "memfd_create"):
        return None
    try:
        return os.memfd_create("tracelint-result", os.MFD_CLOEXEC)   # kept by fork, not exec
    except OSError:
        return None


class Writer:
    """In a worker: results written into the memory file one at a time, as each is made, each
    at a page boundary after the one before. A worker that writes its ranges' columns as it
    decodes them holds none of them until the end, and at the end sends only their small
    pickles: written all at once after its last range, they kept the parent waiting 39 ms
    (a 2-process decode of the 287 MB reference)."""

    def __init__(self, fd: int | None):
        self.fd = fd
        self.end = 0

    def put(self, result):
        """The message for result (what the parent's receive() takes): its buffers written
        into the file now; result itself when there is no file."""
        if self.fd is None:
            return result
        buffers: list[pickle.PickleBuffer] = []
        data = pickle.dumps(result, protocol=5, buffer_callback=buffers.append)
        views = [b.raw() for b in buffers]
        start = pos = self.end
        spans = []
        for v in views:
            spans.append((pos, v.nbytes))
            pos += v.nbytes
        if pos > start:
            os.ftruncate(self.fd, pos)
            with mmap.mmap(self.fd, pos - start, offset=start) as out:
                for (at, n), v in zip(spans, views):
                    out[at - start:at - start + n] = v
            page = mmap.ALLOCATIONGRANULARITY
            self.end = -(-pos // page) * page
        return (_TAG, data, spans)


def send(result, fd: int | None):
    """In the worker: result with its buffers written into fd (what the parent's receive()
    takes), or result itself when fd is None."""
    return Writer(fd).put(result)


def receive(message, fd: int | None):
    """In the parent: the worker's result, its arrays views of the file (kept mapped while any
    of them lives, after fd is closed)."""
    return receive_each({0: message}, fd)[0]


def receive_each(messages: dict, fd: int | None) -> dict:
    """receive() of every message a worker's Writer made, by key, the file mapped once."""
    def tagged(m) -> bool:
        return fd is not None and isinstance(m, tuple) and m[:1] == (_TAG,)
    size = max((m[2][-1][0] + m[2][-1][1] for m in messages.values() if tagged(m) and m[2]),
               default=0)
    view = memoryview(mmap.mmap(fd, size, access=mmap.ACCESS_COPY)) if size else None  # private
    out = {}
    for key, m in messages.items():
        if not tagged(m):
            out[key] = m
            continue
        _, data, spans = m
        out[key] = pickle.loads(data, buffers=[view[at:at + n] if view is not None
                                               else bytearray() for at, n in spans])
    return out


def close(fd: int | None) -> None:
    """Once the result is received (its mapping outlives the descriptor) or the task failed."""
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
