"""A baseline of accepted findings: fingerprints (no timestamps) of findings a team has
accepted, so linting an old workload reports only new problems."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import ConfigError
from ..io import write_atomic
from .finding import Finding

BASELINE_VERSION = 1


def write_baseline(path: str | Path, findings: list[Finding]) -> None:
    from ..secrets import scrub_text   # keys are names from the trace: never commit a secret
    entries = sorted({(f.fingerprint(), f.rule, scrub_text(f.key)) for f in findings})
    doc = {"version": BASELINE_VERSION,
           "findings": [{"fingerprint": fp, "rule": r, "key": k} for fp, r, k in entries]}
    write_atomic(path, json.dumps(doc, indent=1) + "\n")


def read_baseline(path: str | Path) -> set[str]:
    try:
        doc = json.loads(Path(path).read_text())
        return {e["fingerprint"] for e in doc["findings"]}
    except FileNotFoundError:
        raise ConfigError(f"baseline file not found: {path}") from None
    except (ValueError, KeyError, TypeError):
        raise ConfigError(f"{path}: not a tracelint baseline file") from None


def apply_baseline(findings: list[Finding], accepted: set[str]) -> tuple[list[Finding], int]:
    kept = [f for f in findings if f.fingerprint() not in accepted]
    return kept, len(findings) - len(kept)
