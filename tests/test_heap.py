"""tracelint.heap: freed arrays' pages are reused instead of faulted in again, and the CLI (not
a library import) sets that policy."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO

FAULTS = r"""
import resource, sys
import numpy as np
from tracelint import heap
if sys.argv[1] == "keep":
    assert heap.keep_freed_pages()
a = np.ones(8 << 20)          # 64 MB: mapped fresh on every allocation under glibc's defaults
del a
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    a = np.ones(8 << 20)
    del a
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    res = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return int(res.stdout.split()[-1])


def test_kept_pages_are_reused_without_page_faults():
    from tracelint import heap
    if heap._LIBC is None:
        pytest.skip("not glibc: the policy is a no-op here")
    default, kept = _faults("default"), _faults("keep")
    # default: 10 fresh 64 MB mappings (hundreds of faults even with huge pages); kept: the
    # same heap pages each time
    assert default > 100
    assert kept * 10 < default, (default, kept)


def test_trim_and_keep_are_safe_to_call():
    from tracelint import heap
    heap.trim()
    assert heap.keep_freed_pages() is (heap._LIBC is not None)


CLI_SETS_POLICY = r"""
import sys
import tracelint.heap as heap
calls = []
heap.keep_freed_pages = lambda: calls.append(1) or True
import tracelint                    # a library import leaves the process's malloc alone
assert not calls
from tracelint.cli.app import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(len(calls))
"""


def test_the_cli_keeps_freed_pages_and_light_commands_do_not_pay_for_it(tmp_path):
    trace = REPO / "fixtures" / "examples" / "training_step_antipatterns.json.gz"
    out = str(tmp_path / "report.json")
    for argv, want in ((["lint", str(trace), "-f", "json", "-o", out], "1"), (["--version"], "0")):
        res = subprocess.run([sys.executable, "-c", CLI_SETS_POLICY, *argv], capture_output=True,
                             text=True, timeout=300)
        assert res.stdout.split()[-1] == want, (argv, res.stdout[-500:], res.stderr[-2000:])
    assert (tmp_path / "report.json").stat().st_size > 0


HOLD = r"""
import sys
import numpy as np
from tracelint import heap

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

heap.keep_freed_pages()
if sys.argv[1] == "hold":
    heap.for_trace_after_trace()
a = np.ones(16 << 20)          # 128 MB from the heap, then freed and trimmed
del a
before = rss_mb()
heap.trim()
print(before - rss_mb())
"""


def test_a_process_linting_trace_after_trace_keeps_its_freed_pages():
    from tracelint import heap
    if heap._LIBC is None:
        pytest.skip("not glibc: the policy is a no-op here")
    given_back = {}
    for mode in ("trim", "hold"):
        res = subprocess.run([sys.executable, "-c", HOLD, mode], capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, res.stderr[-2000:]
        given_back[mode] = float(res.stdout.split()[-1])
    assert given_back["trim"] > 100, given_back       # the 128 MB went back to the OS
    assert given_back["hold"] < 10, given_back        # kept for the next rank


def _policy_in_worker(_source):
    from tracelint import heap
    return [heap._hold]


def test_a_jobs_pool_workers_keep_their_freed_pages_and_this_process_does_not():
    from tracelint import heap
    from tracelint.ranks.job import _map_local
    out, execution = _map_local(["a", "b"], _policy_in_worker, 2, None)
    assert out == [True, True] and execution["workers"] == 2
    assert heap._hold is False
