"""Fixed twins: a finding's projected saving (its rule's fix, replayed on the planted trace)
against the real span difference between the planted trace and its fixed twin, both formats."""
from __future__ import annotations

import pytest

import tracelint
from tracelint.engine.config import Config
from tracelint.synth.twins import OVERLAP, TWINS

FORMATS = ("kineto", "nsys")


def _write(builder, folder, name, fmt):
    path = folder / f"{name}.{'json.gz' if fmt == 'kineto' else 'sqlite'}"
    if fmt == "kineto":
        builder.write_kineto(path)
    else:
        builder.write_nsys_sqlite(path, nvtx_ops=True)   # ops as NVTX ranges, as nsys records them
    return path


def _span(builder, folder, name, fmt) -> int:
    return tracelint.load(_write(builder, folder, name, fmt)).span_ns


def _lint(twin, folder, fmt):
    return tracelint.lint(_write(twin.planted(), folder, f"{twin.name}-planted", fmt),
                          Config(select=list(twin.rules)))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("twin", TWINS, ids=lambda t: t.name)
def test_saving_matches_the_fixed_twin(twin, fmt, tmp_path):
    report = _lint(twin, tmp_path, fmt)
    real = report.timeline.span_ns - _span(twin.fixed(), tmp_path, f"{twin.name}-fixed", fmt)
    assert real > 0
    (finding,) = [f for f in report.findings if f.rule == twin.rules[0]]
    assert finding.saving_ns is not None, finding.saving_note
    assert abs(finding.saving_ns - real) <= 0.2 * real


@pytest.mark.parametrize("fmt", FORMATS)
def test_fixes_that_overlap_are_not_added_twice(fmt, tmp_path):
    report = _lint(OVERLAP, tmp_path, fmt)
    planted = report.timeline.span_ns
    savings = {f.rule: f.saving_ns for f in report.findings}
    assert set(savings) == set(OVERLAP.rules)
    both = planted - _span(OVERLAP.fixed(), tmp_path, "both-fixed", fmt)
    assert report.saving_all_ns < sum(savings.values())
    assert abs(report.saving_all_ns - both) <= 0.2 * both
    for rule in OVERLAP.rules:        # each fix alone, against the twin with that fix alone
        alone = planted - _span(OVERLAP.build(frozenset({rule})), tmp_path, f"only-{rule}", fmt)
        assert abs(savings[rule] - alone) <= 0.2 * alone
