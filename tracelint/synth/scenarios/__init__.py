"""Planted-pattern scenarios: per rule, traces with a known anti-pattern planted (positive) and
near-miss counter-examples that must not fire, built once and written in both formats.

Each module (`tlNNN.py`, `clean.py`) defines SCENARIOS: a list of Scenario. The planted-pattern suite
(tests/test_planted.py) and docs/rules.md (bench/planted_report.py) iterate all of them.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Scenario:
    rule: str                         # the rule under test, e.g. "TL001"; "*" = every rule
    name: str                         # "positive", "near-miss-short-gaps", "clean"
    build: Callable[[], object]       # returns a TraceBuilder ready to write
    fires: bool                       # True: the rule must fire; False: it must not
    # Optional checks on the finding when it fires: attribute -> expected value, e.g.
    # {"where.line": 42, "occurrences": 5}
    expect: dict = field(default_factory=dict)
    formats: tuple[str, ...] = ("kineto", "nsys")
    # nsys: write framework ops as NVTX ranges, as torch.autograd.profiler.emit_nvtx does
    nvtx_ops: bool = False

    @property
    def id(self) -> str:
        return f"{self.rule}-{self.name}"


def all_scenarios() -> list[Scenario]:
    out: list[Scenario] = []
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            out += importlib.import_module(f"{__name__}.{info.name}").SCENARIOS
    return out


def write(scenario: Scenario, fmt: str, folder):
    """Build the scenario's trace and write it in one format ("kineto" or "nsys")."""
    from pathlib import Path
    b = scenario.build()
    path = Path(folder) / f"{scenario.id}.{'json.gz' if fmt == 'kineto' else 'sqlite'}"
    if fmt == "kineto":
        b.write_kineto(path)
    else:
        b.write_nsys_sqlite(path, nvtx_ops=scenario.nvtx_ops)
    return path


def lookup(finding, dotted: str):
    """finding attribute by dotted path: 'where.line', 'occurrences', 'metrics.idle_ns'."""
    obj = finding
    for part in dotted.split("."):
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    return getattr(obj, "value", obj)


def evaluate(scenario: Scenario, findings) -> tuple[bool, str]:
    """(passed, explanation) for one scenario's findings."""
    hits = [f for f in findings if scenario.rule in ("*", f.rule)]
    if not scenario.fires:
        return (not hits, "" if not hits else f"unexpected: {[f.rule + ' ' + f.message for f in hits]}")
    if not hits:
        return False, f"{scenario.rule} did not fire"
    for key, want in scenario.expect.items():
        got = [lookup(f, key) for f in hits]
        if want not in got:
            return False, f"{key}: expected {want!r}, got {got!r}"
    return True, ""


def scenario_config(scenario: Scenario):
    """The rule under test alone; for clean controls every performance rule (the security rules
    rightly flag the host and user names that real exports, and so the builder, record)."""
    from ...engine.config import Config
    if scenario.rule == "*":
        return Config(select=["ALL"], ignore=["security"])
    return Config(select=[scenario.rule])
