"""Shared test helpers: where the real traces are (read from ../shared, never copied)."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TORCH_TRACES = sorted((SHARED / "traces" / "torch").glob("*.json.gz"))
NSYS_TRACES = sorted((SHARED / "traces" / "nsys").glob("*.sqlite"))
ALL_TRACES = TORCH_TRACES + NSYS_TRACES


def needs_shared():
    return pytest.mark.skipif(not ALL_TRACES, reason="../shared/traces not present")


def md5(path: Path) -> str:
    return hashlib.md5(Path(path).read_bytes()).hexdigest()


def run_cli(*args: str, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run the real console entry point in a subprocess (what a user runs)."""
    return subprocess.run([sys.executable, "-m", "tracelint", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli
