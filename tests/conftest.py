"""Shared test helpers: where the real traces are, and the CLI runner.

Real traces come from, in order: $TRACELINT_TRACES (a folder with nsys/ and torch/), the shared
collection beside the checkout (../shared/traces), or the redistributable subset bundled in
fixtures/real/ so that a fresh clone runs the real-trace tests too. Tests that need a trace the
chosen folder lacks skip, and the summary says so in one loud line.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
BUNDLED = REPO / "fixtures" / "real"


def _traces_root() -> Path:
    env = os.environ.get("TRACELINT_TRACES")
    if env:
        return Path(env)
    if (SHARED / "traces" / "torch").is_dir():
        return SHARED / "traces"
    return BUNDLED


#: The folder of real traces this run reads: nsys/*.sqlite and torch/*.json.gz.
TRACES = _traces_root()
TORCH_TRACES = sorted((TRACES / "torch").glob("*.json.gz"))
NSYS_TRACES = sorted((TRACES / "nsys").glob("*.sqlite"))
ALL_TRACES = TORCH_TRACES + NSYS_TRACES
MISSING_TRACE = "real trace not present"


def needs_shared():
    return pytest.mark.skipif(not ALL_TRACES, reason=f"{MISSING_TRACE}: no traces in {TRACES}")


def trace_or_skip(path: Path) -> Path:
    """The path, or skip the test with the reason the summary counts."""
    if not Path(path).exists():
        pytest.skip(f"{MISSING_TRACE}: {Path(path).name}")
    return Path(path)


def pytest_report_header(config):
    return f"real traces: {TRACES} ({len(TORCH_TRACES)} Kineto, {len(NSYS_TRACES)} nsys)"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One loud line when tests skipped for want of a real trace (a clone without ../shared)."""
    skipped = terminalreporter.stats.get("skipped", [])
    n = sum(1 for rep in skipped if MISSING_TRACE in str(getattr(rep, "longrepr", "")))
    if n:
        terminalreporter.write_line(
            f"!!! {n} test(s) skipped: real traces missing from {TRACES}; put the shared "
            "collection at ../shared/traces or point TRACELINT_TRACES at it", red=True, bold=True)


def md5(path: Path) -> str:
    return hashlib.md5(Path(path).read_bytes()).hexdigest()


def run_cli(*args: str, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run the real console entry point in a subprocess (what a user runs)."""
    return subprocess.run([sys.executable, "-m", "tracelint", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli


def capture_example(example: Path, out: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`tracelint capture -o out --format json -- python example` (exit 0 or 1: findings),
    with one intra-op thread: the op counts are the same, and on a loaded 2-core runner OpenMP
    spin-waiting makes every op ~30x slower."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-m", "tracelint", "capture", "-o", str(out), "--format",
                          "json", "--", sys.executable, str(example)], capture_output=True,
                         text=True, cwd=cwd, timeout=300, env=env)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    return res


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden/*.json from the current findings (review the diff)")


@pytest.fixture
def update_golden(request) -> bool:
    return bool(request.config.getoption("--update-golden"))
