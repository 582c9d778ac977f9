"""TL001's kernel evidence states the largest gap and the median activity in a unit a reader
takes in at a glance (ms from a millisecond on), and the figure is the measured fact."""
from __future__ import annotations

import re

import pytest

from conftest import TRACES, trace_or_skip
from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.engine.finding import Layer
from tracelint.engine.rule import duration_text


@pytest.mark.parametrize("name", ["hta_alexnet_a100.json.gz",            # 824 ms
                                  "tracelens_h100_bert_small_inference.json.gz"])  # 458 µs
def test_largest_gap_in_a_readable_unit(name):
    report = lint(trace_or_skip(TRACES / "torch" / name), Config(select=["TL001"]))
    (ev,) = [f.evidence[Layer.KERNEL] for f in report.findings
             if f.evidence[Layer.KERNEL].summary.startswith("Largest gap")]
    m = re.match(r"Largest gap ([\d.]+) (µs|ms) between", ev.summary)
    assert m, ev.summary
    ns = ev.facts["largest_gap_ns"].value
    shown = float(m.group(1)) * (1e6 if m.group(2) == "ms" else 1e3)
    assert m.group(2) == ("ms" if ns >= 1e6 else "µs")
    assert abs(shown - ns) <= 0.01 * ns


def test_copy_waits_of_seconds_read_in_seconds():
    """TL032 and TL004 state waits of seconds in s (a 13 s wait read "13182.13 ms"), and the
    figure is the finding's measured impact."""
    report = lint(trace_or_skip(TRACES / "nsys" / "nsys2023.3_sc23-openmp-offload_t4.sqlite"),
                  Config(select=["TL032", "TL004"]))
    long = [f for f in report.findings if f.impact_ns >= 1e9]
    assert {f.rule for f in long} == {"TL032", "TL004"}
    for f in long:
        m = re.search(r"(?:waits|leave) ([\d.]+) (s|ms) ", f.message)
        assert m and m.group(2) == "s", f.message
        assert abs(float(m.group(1)) * 1e9 - f.impact_ns) <= 0.005e9


@pytest.mark.parametrize("path, long", [
    (TRACES / "nsys" / "nsys2021.2_mordred-hashjoin_quadro-rtx6000.sqlite", True),   # 4.66 s gap
    (TRACES / "torch" / "param_resnet_rtx2080ti.json.gz", True),                      # 2.25 s gap
    (TRACES / "torch" / "hta_v100_rank1of2.json.gz", False),                          # 8,260 short gaps
])
def test_late_launches_in_long_gaps_are_host_work_not_launch_overhead(path, long):
    """Where most of the late-launch idle time is in gaps of a millisecond or more, the fix
    names the host's work between launches: CUDA graphs and fusion save microseconds per
    launch and would not close them."""
    report = lint(trace_or_skip(path), Config(select=["TL001"]))
    (f,) = [f for f in report.findings if "warm-up" not in f.message]
    assert "mostly the host issued the next launch late" in f.message
    if long:
        assert f.fix.startswith("The gaps are long (") and "host does other work" in f.fix
        assert "CUDA graph" in f.fix and "would not close them" in f.fix
        largest = duration_text(f.evidence[Layer.KERNEL].facts["largest_gap_ns"].value)
        assert f"the largest {largest}" in f.fix
    else:
        assert f.fix.startswith("Take host work off the launch path")
