"""The case library: performance failures with their evidence, fix, counter-example and
rollback trigger, each replayable from a small trace excerpt. See docs/cases.md.

library.py finds and loads libraries, match.py names the cases a finding resembles, check.py
replays them, add.py cuts new ones from a trace, excerpt.py cuts traces, model.py is case.yaml.
"""
from __future__ import annotations

from .add import create_case
from .check import check_case, check_library
from .excerpt import SIZE_LIMIT_BYTES, cut, cut_to_fit, stored_size
from .library import builtin_library, default_libraries, find_case, load_library
from .match import match_findings
from .model import Case, CaseError, load_case, save_case

__all__ = ["Case", "CaseError", "SIZE_LIMIT_BYTES", "builtin_library", "check_case", "check_library",
           "create_case", "cut", "cut_to_fit", "default_libraries", "find_case", "load_case",
           "load_library", "match_findings", "save_case", "stored_size"]
