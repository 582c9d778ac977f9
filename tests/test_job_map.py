"""The job's map step (ranks/job.run_map): the local pool starts the largest files first, so it
does not end with one worker alone on a large rank, and the summaries come back in the
inputs' order whichever rank finished first, so a report does not depend on timing."""
from __future__ import annotations

import os
import time

import pytest

from tracelint.ranks import job
from tracelint.ranks.rank_summary import RankSummary

# the stand-in task reaches the workers by being patched into this process before they fork
pytestmark = pytest.mark.skipif(job.mp_context().get_start_method() != "fork",
                                reason="the pool's workers are not forked here")


def _fake_summary(source: str, config=None, graphs: bool = False) -> list[RankSummary]:
    """Stands in for summarize_source: sleeps as long as the file says, notes when it began."""
    began = time.monotonic()
    with open(source) as fh:
        time.sleep(float(fh.read().split()[0]))
    return [RankSummary(source=source, label=os.path.basename(source),
                        timing_s={"began": began})]


def _files(tmp_path, specs):
    paths = []
    for name, sleep_s, size in specs:
        p = tmp_path / name
        p.write_text(f"{sleep_s} " + "x" * size)
        paths.append(str(p))
    return paths


def test_one_worker_takes_the_largest_files_first_and_returns_the_inputs_order(tmp_path,
                                                                                monkeypatch):
    monkeypatch.setattr(job, "summarize_source", _fake_summary)
    sources = _files(tmp_path, [("a", 0, 10), ("b", 0, 5000), ("c", 0, 100), ("d", 0, 5000)])
    out, execution = job.run_map(sources, None, jobs=1)
    assert execution["workers"] == 1
    assert [s.source for s in out] == sources
    began = sorted(out, key=lambda s: s.timing_s["began"])
    assert [s.label for s in began] == ["b", "d", "c", "a"]     # by size; ties in input order


def test_a_rank_that_finishes_last_is_still_listed_in_its_place(tmp_path, monkeypatch):
    monkeypatch.setattr(job, "summarize_source", _fake_summary)
    sources = _files(tmp_path, [("slow", 1.0, 10), ("quick1", 0, 10), ("quick2", 0, 10)])
    out, _ = job.run_map(sources, None, jobs=2)
    assert [s.source for s in out] == sources
    assert max(out, key=lambda s: s.timing_s["began"]).label != "slow"   # slow began first
