"""Replaying cases (`tracelint case check`): lint each excerpt and test the expected findings."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TracelintError
from .excerpt import SIZE_LIMIT_BYTES, stored_size, trace_format
from .model import (Case)

from .library import load_library
from .match import finding_value


# ----- replaying --------------------------------------------------------------------------
@dataclass
class CheckResult:
    case: Case
    ok: bool
    reason: str = ""
    findings: list = field(default_factory=list)
    stored_bytes: int = 0


def lint_excerpt(path: str | Path, rules_dirs: list[str] | None = None):
    """Load an excerpt through the normal importers and lint it with default settings."""
    from ..api import lint
    from ..engine.config import Config
    return lint(path, Config(rules_dirs=list(rules_dirs or [])))


def check_case(case: Case, rules_dirs: list[str] | None = None,
               limit: int = SIZE_LIMIT_BYTES) -> CheckResult:
    """Replay one case: its excerpt must load, fit the size limit and still produce every
    expected finding (with its metrics inside the stated ranges)."""
    todo = case.todos()
    if todo:
        return CheckResult(case, False, f"still a template: fill in {', '.join(todo)}")
    path = case.excerpt_path
    if not path.is_file():
        return CheckResult(case, False, f"excerpt {case.excerpt.file} is missing")
    size = stored_size(path)
    if size > limit:
        return CheckResult(case, False, f"excerpt is {size / 1024:.0f} KiB stored, over the "
                                        f"{limit // 1024} KiB limit", stored_bytes=size)
    try:
        fmt = trace_format(path)
        if fmt != case.excerpt.format:
            return CheckResult(case, False, f"excerpt is {fmt}, case.yaml says {case.excerpt.format}",
                               stored_bytes=size)
        report = lint_excerpt(path, rules_dirs)
    except TracelintError as exc:
        return CheckResult(case, False, f"excerpt does not load: {' '.join(str(exc).split())}",
                           stored_bytes=size)
    findings = report.findings
    for exp in case.expected:
        hits = [f for f in findings if f.rule == exp.rule]
        if not hits:
            fired = sorted({f.rule for f in findings})
            return CheckResult(case, False, f"{exp.rule} no longer fires on the excerpt (fired: "
                                            f"{', '.join(fired) or 'nothing'})", findings, size)
        if exp.where:
            placed = [f for f in hits if _where_matches(f, exp.where)]
            if not placed:
                got = "; ".join(str({k: getattr(f.where, k, None) for k in exp.where}) for f in hits[:3])
                return CheckResult(case, False, f"{exp.rule} fires but not at {exp.where} (got {got})",
                                   findings, size)
            hits = placed
        if exp.metrics:
            ok, why = _any_in_ranges(hits, exp.metrics)
            if not ok:
                return CheckResult(case, False, f"{exp.rule} fires but {why}", findings, size)
    return CheckResult(case, True, "", findings, size)


def _where_matches(f, want: dict[str, Any]) -> bool:
    for key, value in want.items():
        got = getattr(f.where, key, None)
        if key == "kernel":
            if not got or str(value) not in got:
                return False
        elif got != value:
            return False
    return True


def _any_in_ranges(hits, ranges: dict[str, tuple[float | None, float | None]]) -> tuple[bool, str]:
    why = ""
    for f in hits:
        bad = []
        for name, (lo, hi) in ranges.items():
            v = finding_value(f, name)
            if v is None:
                bad.append(f"{name} is not measured")
            elif (lo is not None and v < lo) or (hi is not None and v > hi):
                bad.append(f"{name}={v:g} is outside [{'' if lo is None else f'{lo:g}'}, "
                           f"{'' if hi is None else f'{hi:g}'}]")
        if not bad:
            return True, ""
        why = why or "; ".join(bad)
    return False, why


def check_library(library: str | Path, rules_dirs: list[str] | None = None) -> list[CheckResult]:
    return [check_case(c, rules_dirs) for c in load_library(library)]


