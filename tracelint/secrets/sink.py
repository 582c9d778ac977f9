"""The one output sink: every command scrubs what it prints or writes here.

Why one place: a secret in a kernel or annotation name reaches many models (findings, diff rows,
gate metrics, `info` tables, baselines, job reports) and many writers (terminal tables that wrap
and split a token, JSON, Markdown, files). Scrubbing each writer after formatting misses split
tokens; scrubbing each model by hand misses the next field someone adds. So a command builds one
`Sink` for the traces it reads, passes every model through `sink.model()` *before* formatting
(a generic deep walk: strings anywhere in dicts, lists, tuples, sets and dataclasses, keys
included), and writes through `sink.write()` / `sink.message()`, which scrub the final text once
more as a net. Besides the token shapes of `patterns`, the sink removes the exact secret values
the scan of the commands' own traces found (a token that only looked secret in its environment
block is also removed where it reappears as a name).

`--no-scrub` (lint) builds a disabled sink: models and text pass through unchanged.
"""
from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any, Iterable

from ..errors import TracelintError
from . import patterns as P

_MEMO_LIMIT = 200_000


def found_in(src: str) -> tuple[frozenset[str], dict[str, str]] | None:
    """(exact secret values, user / host names) the quick scan of one trace file finds; None
    when it is not a readable trace. scan_file caches per file, so a worker that has just
    linted the file (TL100/TL101 scan it) pays nothing."""
    from .scan import scan_file
    try:
        if not isinstance(src, str) or not Path(src).is_file():
            return None
        res = scan_file(src, deep=False)
    except (TracelintError, OSError, ValueError, RecursionError):
        return None
    return (frozenset(h.raw.strip() for h in res.secrets if len(h.raw.strip()) >= 6),
            dict(res.names().kinds))


class Sink:
    """Scrubs models and text for one command run. See the module docstring."""

    def __init__(self, sources: Iterable[str] = (), paths: bool = False, enabled: bool = True):
        self.enabled = enabled
        self.paths = paths
        self.exact: re.Pattern | None = None
        self.names: P.NameSet | None = None
        self._memo: dict[str, str] = {}
        self._raws: set[str] = set()
        self._pending: list[str] = list(sources) if enabled else []

    def ready(self) -> "Sink":
        """Learn the sources given at construction, once. Left until the first string is
        scrubbed, or a parallel load's decode (tracelint.warmup): the scan of a trace then
        does not delay the start of its load."""
        if self._pending:
            pending, self._pending = self._pending, []
            self.learn(pending)
        return self

    def learn(self, sources: Iterable[str], found: dict[str, tuple] | None = None) -> None:
        """Add the exact secret values (and with paths, user / host names) of these traces.
        found: source -> found_in() result made elsewhere (a job's workers scan their ranks)."""
        self.ready()
        raws: set[str] = set(self._raws)
        names: dict[str, str] = dict(self.names.kinds) if self.names else {}
        for src in sources:
            got = (found or {}).get(src) or found_in(src)
            if got is None:
                continue
            raws |= got[0]
            if self.paths:
                names.update(got[1])
        self._raws = raws
        self._memo.clear()
        if raws:
            self.exact = re.compile("|".join(map(re.escape, sorted(raws, key=len, reverse=True))))
        if names:
            self.names = P.NameSet(names)

    # -- strings ------------------------------------------------------------------------------
    def text(self, s):
        """One string scrubbed (non-strings pass through)."""
        if not self.enabled or not isinstance(s, str) or not s:
            return s
        if self._pending:
            self.ready()
        hit = self._memo.get(s)
        if hit is not None:
            return hit
        out = P.scrub_string(s, paths=self.paths, names=self.names)
        if self.exact is not None:
            out = self.exact.sub(P.REDACTED, out)
        if len(s) < 4096 and len(self._memo) < _MEMO_LIMIT:
            self._memo[s] = out
        return out

    __call__ = text

    def texts(self, items: list) -> list:
        """text() of each item, the same results: the strings that no pattern, exact value or
        name can change are found by one scan of them all (a timeline's 332,000 range names:
        a call each made most of the report's scrubbing), and only the rest go through text().
        """
        if not self.enabled:
            return list(items)
        self.ready()
        if set(map(type, items)) <= {str}:   # all str (one pass in C): scanned as they are
            strs, at = list(items), range(len(items))       # an empty one holds no needle
        else:
            at = [i for i, s in enumerate(items) if isinstance(s, str) and s]
            strs = [items[i] for i in at]
        touched = set(P.suspects(strs, personal=self.paths))
        touched.update(P.containing(self._raws, strs) if self.exact is not None else ())
        if self.paths and self.names:
            touched.update(P.matching(self.names.regex, strs))
        out = list(items)
        for j in touched:
            out[at[j]] = self.text(strs[j])
        return out

    # -- models -------------------------------------------------------------------------------
    def model(self, obj: Any) -> Any:
        """`obj` with every string scrubbed: dicts, lists, tuples and sets are rebuilt,
        dataclass instances are scrubbed in place (and returned). Other objects (numbers,
        arrays, frames) pass through; callers scrub tables with `scrub_timeline`."""
        if not self.enabled:
            return obj
        return self._deep(obj, set())

    def _deep(self, obj: Any, seen: set[int]) -> Any:
        if isinstance(obj, str):
            return self.text(obj)
        if obj is None or isinstance(obj, (int, float, bool, bytes)):
            return obj
        if isinstance(obj, dict):
            return {self._deep(k, seen): self._deep(v, seen) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self._deep(v, seen) for v in obj]
        if isinstance(obj, tuple):
            t = [self._deep(v, seen) for v in obj]
            return type(obj)(*t) if hasattr(obj, "_fields") else tuple(t)
        if isinstance(obj, (set, frozenset)):
            return type(obj)(self._deep(v, seen) for v in obj)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            if id(obj) in seen:
                return obj
            seen.add(id(obj))
            for f in dataclasses.fields(obj):
                try:
                    setattr(obj, f.name, self._deep(getattr(obj, f.name), seen))
                except (AttributeError, dataclasses.FrozenInstanceError):
                    pass
            return obj
        return obj

    # -- writers ------------------------------------------------------------------------------
    def write(self, text: str, output: str | None = None, inputs: Iterable[str] = ()) -> None:
        """The command's report: to `output` (see tracelint.io.write_output) or stdout."""
        from ..io import write_output
        text = self.text(text)
        if not text.endswith("\n"):
            text += "\n"
        if output:
            write_output(output, text, inputs=inputs)
        else:
            sys.stdout.write(text)

    def message(self, s: str) -> str:
        """A line for stderr: scrubbed, then made safe for a terminal."""
        from ..reporters.escape import terminal_text
        return terminal_text(self.text(s))


_current = Sink(enabled=True)


def use_sink(sources: Iterable[str] = (), paths: bool = False, enabled: bool = True) -> Sink:
    """Make (and return) the sink of the running command; error messages use it too."""
    global _current
    _current = Sink(sources, paths=paths, enabled=enabled)
    return _current


def current_sink() -> Sink:
    return _current


def scrub_committed(s):
    """For files meant to be committed (baseline keys): scrubbed even under --no-scrub."""
    s = _current.text(s)
    return P.scrub_string(s) if isinstance(s, str) and s else s
