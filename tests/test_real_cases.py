"""The built-in library's real cases (cut from real traces by fixtures/cases/make_real_cases.py):
each excerpt still shows its failure, its key metrics are the values measured on the whole
trace, its own trace matches it first, and traces of another kind never match it."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import REPO, TRACES, trace_or_skip

from tracelint.api import lint
from tracelint.cases.check import check_case
from tracelint.cases.library import builtin_library, load_library
from tracelint.cases.match import MIN_SIMILARITY, match_findings
from tracelint.engine.config import Config

sys.path.insert(0, str(REPO / "fixtures" / "cases"))
import make_real_cases  # noqa: E402

sys.path.pop(0)

SEEDS = {s.id: s for s in make_real_cases.SEEDS}
REAL = [c for c in load_library(builtin_library()) if not c.synthetic]
by_id = pytest.mark.parametrize("case", REAL, ids=[c.id for c in REAL])


def test_at_least_ten_real_cases_with_provenance():
    assert len(REAL) >= 10
    for c in REAL:
        assert c.id in SEEDS, f"{c.id}: no seed in make_real_cases.py"
        assert c.provenance["licence"] and c.provenance["source"].endswith(SEEDS[c.id].trace)
        assert c.provenance.get("origin"), f"{c.id}: where the trace was published"
        assert c.label == "real trace"
        assert not c.todos(), f"{c.id}: unfilled fields {c.todos()}"


@by_id
def test_excerpt_still_shows_the_failure(case):
    res = check_case(case)
    assert res.ok, f"{case.id}: {res.reason}"


@by_id
def test_key_metrics_are_measured_on_the_whole_trace(case):
    seed = SEEDS[case.id]
    path = trace_or_skip(TRACES / seed.trace)
    f = make_real_cases.pick(seed, lint(path, Config(), match_cases=False).findings)
    assert f is not None, f"{seed.rule} no longer fires on {seed.trace}"
    measured = [m for m in case.key_metrics if m.source == "measured"]
    assert measured
    from tracelint.cases.match import finding_value
    for m in measured:
        got = finding_value(f, m.name)
        assert got == pytest.approx(m.value, rel=1e-3, abs=1e-4), (case.id, m.name)


@by_id
def test_own_trace_matches_its_case_first(case):
    """Held out: the finding on the whole trace (the excerpt is a small window of it) names this
    case first among every case of the library whose preconditions hold."""
    seed = SEEDS[case.id]
    path = trace_or_skip(TRACES / seed.trace)
    report = lint(path, Config(), match_cases=False)
    f = make_real_cases.pick(seed, report.findings)
    match_findings([f], [builtin_library()], timeline=report.timeline)
    assert f.cases and f.cases[0]["id"] == case.id, [c["id"] for c in f.cases]
    assert any(w.startswith(f"same rule {seed.rule}") for w in f.cases[0]["why"])


def _real_matches(path: Path) -> list[tuple[str, str, float]]:
    report = lint(path, Config())
    real = {c.id for c in REAL}
    return [(f.rule, c["id"], c["similarity"]) for f in report.findings for c in f.cases
            if c["id"] in real and c["similarity"] >= MIN_SIMILARITY]


@pytest.mark.parametrize("name", ["torch/hta_cpu_only_rank34of300.json.gz",
                                  "torch/hta_event_sync_a100.json.gz",
                                  "torch/hta_event_sync_multistream_a100.json.gz",
                                  "nsys/nsys2022.4_local-cpu-nvtx-osrt_nogpu.sqlite"])
def test_unrelated_traces_match_no_real_case(name):
    """A CPU-only gloo job, CUDA-event micro-benchmarks and a CPU-only export are not training
    or HPC failures: their findings must not be 'like' any real case."""
    assert _real_matches(trace_or_skip(TRACES / name)) == []


def test_cpu_only_trace_matches_no_gpu_case():
    report = lint(trace_or_skip(TRACES / "torch/hta_cpu_only_rank34of300.json.gz"), Config())
    assert report.findings, "the gloo trace has a TL008 finding to match"
    assert all(not f.cases for f in report.findings)
