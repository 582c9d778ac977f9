"""TL001 attributes each gap to what the host threads and streams did in it, reports warm-up
apart (info), and measures idle per iteration: synthetic traces in both formats, each with a
near-miss twin. Expected numbers come from the builder's own clocks, not from the rule."""
from __future__ import annotations

import pytest

from tracelint.engine.config import Config
from tracelint.engine.finding import Layer
from tracelint.api import lint
from tracelint.synth.scenarios import tl001_causes as sc

FORMATS = ("kineto", "nsys")


def _lint(builder, fmt, tmp_path):
    path = tmp_path / ("t.json.gz" if fmt == "kineto" else "t.sqlite")
    (builder.write_kineto if fmt == "kineto" else builder.write_nsys_sqlite)(path)
    return lint(path, Config(select=["TL001"])).findings


def _split(findings):
    warn = [f for f in findings if f.severity.value == "warning"]
    info = [f for f in findings if f.severity.value == "info"]
    return warn, info


def _warning(builder, fmt, tmp_path):
    """The one warning finding and its system facts."""
    (f,) = _split(_lint(builder, fmt, tmp_path))[0]
    return f, f.evidence[Layer.SYSTEM].facts


def _gaps(b, lo_step=1):
    """Idle gaps >= 20 µs inside iterations lo_step.., from the builder's own activities."""
    steps = sorted((e.start, e.end) for e in b.host_events if e.kind == "step")[lo_step:]
    acts = sorted((a.start, a.end) for a in b.activities if a.kind in ("kernel", "memcpy", "memset"))
    out = []
    for lo, hi in steps:
        t = lo
        for s, e in acts:
            if e <= lo or s >= hi:
                continue
            if s - t >= 20_000:
                out.append((t, s))
            t = max(t, e)
        if hi - t >= 20_000:
            out.append((t, hi))
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_warmup_first_iteration_is_info_not_a_gap(fmt, tmp_path):
    b = sc.warmup_first_iteration()
    warn, info = _split(_lint(b, fmt, tmp_path))
    assert warn == []
    (w,) = info
    first = sorted((e.start, e.end) for e in b.host_events if e.kind == "step")[0]
    expect = sum(e - s for s, e in _gaps(b, lo_step=0) if s >= first[0] and e <= first[1])
    assert w.key == "warmup|device0" and w.metrics["idle_ns"].value == expect > 2_000_000
    # twin: the same host time in a later iteration is a steady-state gap
    warn, info = _split(_lint(sc.steady_gap(), fmt, tmp_path))
    (g,) = warn
    assert g.impact_ns == sum(e - s for s, e in _gaps(sc.steady_gap()))
    assert "late" in g.message


@pytest.mark.parametrize("fmt", FORMATS)
def test_two_kernels_are_warmup(fmt, tmp_path):
    warn, info = _split(_lint(sc.two_kernels(), fmt, tmp_path))
    assert warn == [] and len(info) == 1 and "only 2 GPU activities" in info[0].evidence[Layer.SYSTEM].summary


@pytest.mark.parametrize("fmt", FORMATS)
def test_blocking_copy_is_a_sync_not_a_late_host(fmt, tmp_path):
    f, facts = _warning(sc.blocked_in_copy(), fmt, tmp_path)
    assert "blocked in a synchronous call" in f.message and facts["in_sync_share"].value > 0.95
    assert "cudaMemcpy" in f.evidence[Layer.SYSTEM].summary and "pinned memory" in f.fix
    assert "CUDA graphs" not in f.fix
    # twin: an async copy to pinned memory, then Python work: the host was late, not blocked
    (g,) = _split(_lint(sc.late_after_async_copy(), fmt, tmp_path))[0]
    assert "late" in g.message and g.evidence[Layer.SYSTEM].facts["in_sync_share"].value == 0
    assert "aten::to" in g.evidence[Layer.SYSTEM].summary or fmt == "nsys"


@pytest.mark.parametrize("fmt", FORMATS)
def test_cross_stream_event_wait(fmt, tmp_path):
    b = sc.event_wait()
    f, facts = _warning(b, fmt, tmp_path)
    assert "another stream's event" in f.message and facts["event_wait_share"].value > 0.95
    assert facts["host_late_share"].value < 0.05 and "producer" in f.fix
    assert f.impact_ns == sum(e - s for s, e in _gaps(b))


@pytest.mark.parametrize("fmt", FORMATS)
def test_idle_before_first_kernel_of_the_iteration(fmt, tmp_path):
    b = sc.preprocess_first()
    (f,) = _split(_lint(b, fmt, tmp_path))[0]
    step = next(e for e in b.host_events if e.kind == "step")
    first = min(a.start for a in b.activities if a.kind == "kernel")
    assert f.impact_ns == sum(e - s for s, e in _gaps(b, lo_step=0))
    assert f.impact_ns >= first - step.start
    if fmt == "kineto":   # nsys has no CPU ops or Python frames from the builder
        assert "torchvision::decode_and_resize" in f.evidence[Layer.SYSTEM].summary
        assert "preprocess (video_model.py:88)" in f.evidence[Layer.SYSTEM].summary
    assert _split(_lint(sc.preprocess_outside(), fmt, tmp_path))[0] == []
