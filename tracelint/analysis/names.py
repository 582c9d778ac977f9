"""Names that identify the same thing across runs: range names -> bucket names, kernel names
-> matching keys and labels, findings -> identities (without device indices or file paths)."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Sequence

from ..timeline.model import Timeline

_ID_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:0x[0-9a-fA-F]+|"
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|\d+)"
    r"(?![A-Za-z0-9])")


def normalise_range_name(name: str) -> str:
    """Range name -> bucket name: whole-token numbers, hex ids and UUIDs become ``N``.

    ``ProfilerStep#12`` -> ``ProfilerStep#N``; ``prefill req=17`` -> ``prefill req=N``;
    ``decode_step_3`` -> ``decode_step_N``; ``layer3`` and ``fp16`` stay as they are (the
    digits are part of a word).
    """
    return _ID_TOKEN.sub("N", str(name))


_HEX = re.compile(r"0x[0-9a-fA-F]+")
_TEMPLATE = re.compile(r"<[^<>]*>")
_ARGS = re.compile(r"\([^()]*\)")
_SPACE = re.compile(r"\s+")


def exact_kernel_name(name: str) -> str:
    """The kernel's identity within one run: its name with hex addresses removed."""
    return _SPACE.sub(" ", _HEX.sub("", str(name))).strip()


def normalise_kernel_name(name: str) -> str:
    """Kernel name -> matching key across runs: template arguments, argument lists and hex
    addresses stripped, ``void`` dropped.

    ``void at::native::vectorized_elementwise_kernel<4, F<float>>(int, F<float>)`` ->
    ``at::native::vectorized_elementwise_kernel``.
    """
    s = exact_kernel_name(name).replace("(anonymous namespace)", "anon")
    for rx in (_TEMPLATE, _ARGS):
        prev = None
        while prev != s:
            prev, s = s, rx.sub("", s)
    s = re.sub(r"^\s*void\s+", "", s)
    s = s.replace("::{lambda", "::lambda").replace("{", "").replace("}", "")
    s = _SPACE.sub(" ", s).strip()
    return s or str(name)


def short_kernel_name(name: str, width: int = 96) -> str:
    """A readable label: no ``void``, no trailing argument list, cut to ``width`` characters."""
    s = re.sub(r"^\s*void\s+", "", exact_kernel_name(name))
    if s.endswith(")"):                   # drop the trailing top-level argument list
        depth = 0
        for i in range(len(s) - 1, 0, -1):
            if s[i] == ")":
                depth += 1
            elif s[i] == "(":
                depth -= 1
                if depth == 0:
                    s = s[:i].rstrip()
                    break
    return s if len(s) <= width else s[: width - 1] + "…"


#: Device, rank and stream indices inside a finding's key: the same problem on GPU 0 in one
#: run and on GPU 1 in the next is the same finding.
_INDEX = re.compile(r"(?i)(device|dev|gpu|rank|stream|cuda:?|node)(\s*[#:=]?\s*)\d+")


def finding_identity(rule: str, key: str, nvtx_path: Sequence[str] = (), file: str | None = None,
                     line: int | None = None, source: str | None = None) -> str:
    """What a finding is, for matching across runs: rule, key with device/rank/stream
    indices removed, the innermost annotation (the op; the outer path is where the worst
    instance happened to be, which varies run to run) and code location; never the device
    index or the trace file's own path (a re-export of the same capture moves it)."""
    loc = "" if not file or (source and Path(file).name == Path(source).name) else f"{file}:{line or ''}"
    if loc and re.search(r"\.(sqlite|json|gz|nsys-rep|qdrep)$", file or ""):
        loc = ""                       # a trace or table path, not code
    op = normalise_range_name(nvtx_path[-1]) if nvtx_path else ""
    norm = _INDEX.sub(r"\1\2*", key or "")
    if norm != (key or ""):            # a per-device aggregate: its location is where the worst
        op = loc = ""                  # instance happened to be, which varies run to run
    parts = [rule, norm, op, loc]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def lint_fingerprints(tl: Timeline, config=None) -> tuple[dict[str, dict[str, str]] | None, str | None]:
    """The findings of the default lint run by identity ({identity: {rule, key, title,
    fingerprint}}), or (None, why) when linting failed."""
    try:
        from ..api import lint
        rep = lint(tl, config)
    except Exception as exc:  # a broken rule must not break a diff
        return None, f"{type(exc).__name__}: {exc}"
    out: dict[str, dict[str, str]] = {}
    for f in rep.findings:
        w = f.where
        ident = finding_identity(f.rule, f.key, w.nvtx_path, w.file, w.line, tl.meta.source)
        out.setdefault(ident, {"rule": f.rule, "key": _INDEX.sub(r"\1\2*", f.key or ""),
                               "title": f.title, "fingerprint": f.fingerprint()})
    return out, None
