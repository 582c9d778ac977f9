"""What the lint command queues for a parallel load's decode (tracelint.warmup): the built-in
rules' modules and the case library are read by this process while the workers decode, the
report is the same, and an error in that work is left to the real call, which reports it as
it would without the warm-up."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

from conftest import BUNDLED, trace_or_skip

from tracelint import warmup


def test_run_pending_runs_once_drops_errors_and_forget_clears():
    done = []
    warmup.later(lambda: done.append(1), lambda: 1 / 0, lambda: done.append(2))
    warmup.run_pending()
    warmup.run_pending()
    assert done == [1, 2]
    warmup.later(lambda: done.append(3))
    warmup.forget()
    warmup.run_pending()
    assert done == [1, 2]


WATCHED = r"""
import sys
from tracelint.importers import kineto_parallel as kp, kineto_ranges as kr
from tracelint.cases import library
kr.STREAM_MIN, kr.RANGE_BYTES = 0, 400_000
merge = kp._merge_all
def watched(build, parts):
    print("rules read during the decode:", "tracelint.rules.tl001_launch_gap" in sys.modules,
          file=sys.stderr)
    print("cases read during the decode:", bool(library._CACHE), file=sys.stderr, flush=True)
    from tracelint.secrets.sink import current_sink
    print("sink learned during the decode:", not current_sink()._pending, file=sys.stderr)
    import gc
    print("young objects after the decode:", len(gc.get_objects(0)), file=sys.stderr, flush=True)
    return merge(build, parts)
kp._merge_all = watched
from tracelint.cli.app import run
sys.argv = ["tracelint", "lint", *sys.argv[1:]]
run()
"""


def _lint(*args: str, watched: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", WATCHED, *args] if watched else \
        [sys.executable, "-m", "tracelint", "lint", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _plain(tmp_path: Path) -> Path:
    src = trace_or_skip(BUNDLED / "torch" / "hta_v100_rank0of1.pt.trace.json.gz")
    out = tmp_path / "trace.json"
    out.write_bytes(gzip.decompress(src.read_bytes()))
    return out


def test_rules_and_cases_are_read_during_a_parallel_decode(tmp_path):
    path = _plain(tmp_path)
    a, b = tmp_path / "warm.json", tmp_path / "one.json"
    r = _lint(str(path), "-f", "json", "-o", str(a), "--fail-on", "never", "--jobs", "2")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "rules read during the decode: True" in r.stderr
    assert "cases read during the decode: True" in r.stderr
    assert "sink learned during the decode: True" in r.stderr
    # what the warm-up imported is frozen, not left for the first collection after the load
    young = int(r.stderr.split("young objects after the decode:")[1].split()[0])
    assert young < 10_000, young
    r = _lint(str(path), "-f", "json", "-o", str(b), "--fail-on", "never", "--jobs", "1",
              watched=False)
    assert r.returncode == 0, r.stderr[-2000:]
    warm, one = json.loads(a.read_text()), json.loads(b.read_text())
    for report in (warm, one):
        report.pop("timing_s", None)
    assert warm == one and warm["findings"]
    assert any(f.get("cases") for f in warm["findings"])


def test_a_bad_case_library_is_reported_by_the_lint_itself(tmp_path):
    """The warm-up meets the broken library first and drops the error; the lint then stops
    on it with the same one-line message and exit code as a lint without the warm-up."""
    path = _plain(tmp_path)
    lib = tmp_path / "perf_cases" / "broken"
    lib.mkdir(parents=True)
    (lib / "case.yaml").write_text("id: [unclosed\n")
    (tmp_path / "tracelint.toml").write_text('case-libraries = ["perf_cases"]\n')
    conf = ["--config", str(tmp_path / "tracelint.toml"), "-f", "json", "-o",
            str(tmp_path / "r.json")]
    warm = _lint(str(path), *conf, "--jobs", "2")
    one = _lint(str(path), *conf, "--jobs", "1", watched=False)
    assert warm.returncode == one.returncode == 2, (warm.stderr[-2000:], one.stderr[-2000:])
    assert "rules read during the decode: True" in warm.stderr      # the warm-up ran
    last = warm.stderr.strip().splitlines()[-1]
    assert last == one.stderr.strip().splitlines()[-1]
    assert "Traceback" not in warm.stderr and "broken" in last
