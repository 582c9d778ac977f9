"""TL001's kernel evidence states the largest gap and the median activity in a unit a reader
takes in at a glance (ms from a millisecond on), and the figure is the measured fact."""
from __future__ import annotations

import re

import pytest

from conftest import TRACES, trace_or_skip
from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.engine.finding import Layer


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
