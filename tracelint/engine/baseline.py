"""A baseline of accepted findings: fingerprints (no timestamps) of findings a team has
accepted, so linting an old workload reports only new problems.

Two different files are called "baseline" in tracelint, and each carries a ``kind`` so one is
never read as the other:

* ``tracelint-findings-baseline`` (this module; ``lint --write-baseline``, config ``baseline``):
  accepted findings, default name ``tracelint-baseline.json``;
* ``tracelint-perf-baseline`` (:mod:`tracelint.analysis.perf_baseline`; ``baseline save``,
  ``gate --baseline``): key metrics with their noise, default ``tracelint-perf-baseline.json``.

Both are decoded with typed msgspec schemas: a corrupt, mistyped or wrong-kind file is one
line naming the file and the field (exit 2), never an internal error.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterable, Literal, Optional

import msgspec

from ..errors import ConfigError
from ..io import write_atomic
from .finding import Finding

FINDINGS_KIND = "tracelint-findings-baseline"
PERF_KIND = "tracelint-perf-baseline"
#: Kinds written by earlier versions, and what they are now.
LEGACY_KINDS = {"tracelint-metrics-baseline": PERF_KIND}
BASELINE_VERSION = 2
DEFAULT_FINDINGS_FILE = "tracelint-baseline.json"
DEFAULT_PERF_FILE = "tracelint-perf-baseline.json"

_WHAT = {FINDINGS_KIND: "a findings baseline (accepted findings, `tracelint lint --write-baseline`)",
         PERF_KIND: "a performance baseline (`tracelint baseline save`, for `tracelint gate`)"}


class AcceptedFinding(msgspec.Struct, forbid_unknown_fields=False):
    fingerprint: str
    rule: str = ""
    key: str = ""


class FindingsBaseline(msgspec.Struct, forbid_unknown_fields=False):
    findings: list[AcceptedFinding]
    kind: Optional[Literal["tracelint-findings-baseline"]] = None   # absent in version 1 files
    version: int = 1


class _KindOnly(msgspec.Struct, forbid_unknown_fields=False):
    kind: Optional[str] = None
    version: Optional[int] = None


def decode_typed(path: str | Path, data: bytes, kind: str, schema: type, min_version: int = 1):
    """Decode ``data`` (the bytes of baseline file ``path``) as ``schema`` of ``kind``.

    Refuses, in one line naming the file (and the field where there is one): invalid JSON, a
    document of the other baseline kind, a newer version, and any field of the wrong type."""
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    try:
        head = msgspec.json.decode(data, type=_KindOnly)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{path}: not a tracelint baseline ({exc})") from None
    found = LEGACY_KINDS.get(head.kind or "", head.kind)
    if found is None and kind != FINDINGS_KIND:     # only version-1 findings files lack it
        raise ConfigError(f"{path}: field `kind` is missing: not {_WHAT[kind]}")
    if found is not None and found != kind:
        what = _WHAT.get(found, f"a file of kind {found!r}")
        raise ConfigError(f"{path}: field `kind` is {head.kind!r}: this is {what}, "
                          f"but {_WHAT[kind]} is needed here")
    if (head.version or 0) > BASELINE_VERSION:
        raise ConfigError(f"{path}: field `version` is {head.version}, newer than this tracelint "
                          f"reads ({BASELINE_VERSION})")
    if (head.version or 1) < min_version:
        raise ConfigError(f"{path}: field `version` is {head.version or 1}: written by an older "
                          f"tracelint without what this one needs; save it again")
    try:
        return msgspec.json.decode(data, type=schema)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{path}: not {_WHAT[kind]}: {exc}") from None


def read_bytes(path: str | Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"baseline file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read baseline ({exc.strerror or exc})") from None


def findings_baseline_doc(entries: Iterable[tuple[str, str, str]]) -> dict:
    """The document for accepted (fingerprint, rule, key) entries."""
    return {"kind": FINDINGS_KIND, "version": BASELINE_VERSION,
            "findings": [{"fingerprint": fp, "rule": r, "key": k} for fp, r, k in sorted(set(entries))]}


def write_baseline(path: str | Path, findings: list[Finding],
                   scrub: Callable[[str], str] | None = None) -> None:
    """Accept ``findings``; ``scrub`` (from the caller's output layer) cleans the keys, which
    are names from the trace and may be committed."""
    clean = scrub or (lambda s: s)
    doc = findings_baseline_doc((f.fingerprint(), f.rule, clean(f.key)) for f in findings)
    write_atomic(path, json.dumps(doc, indent=1) + "\n")


def read_baseline(path: str | Path) -> set[str]:
    """Fingerprints of the accepted findings in a findings baseline."""
    doc = decode_typed(path, read_bytes(path), FINDINGS_KIND, FindingsBaseline)
    return {e.fingerprint for e in doc.findings}


def apply_baseline(findings: list[Finding], accepted: set[str]) -> tuple[list[Finding], int]:
    kept = [f for f in findings if f.fingerprint() not in accepted]
    return kept, len(findings) - len(kept)
