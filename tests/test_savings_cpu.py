"""A trace the what-if replay cannot model (no GPU activity, no runtime API calls: a CPU run)
gives no projected saving, and every finding says why rather than leaving the note empty."""
from __future__ import annotations

import tracelint
from tracelint.synth.scenarios.tl010 import item_every_step


def test_cpu_trace_findings_say_why_no_saving(tmp_path):
    path = tmp_path / "cpu.json"
    item_every_step().write_kineto(path)
    report = tracelint.lint(path)
    assert not report.timeline.has_gpu_activity and not len(report.timeline.api_calls)
    d = report.to_dict()
    tl010 = [f for f in d["findings"] if f["rule"] == "TL010"]
    assert len(tl010) == 1                      # the planted .item() every step
    f = tl010[0]
    assert f["saving_ns"] is None and f["saving_share"] is None and not f["saving_iterations"]
    assert f["saving_note"].startswith("no saving can be established from this trace")
    assert d["saving_all_ns"] is None
    assert all(g["saving_note"] for g in d["findings"] if g["saving_ns"] is None)
