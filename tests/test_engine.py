"""Rule engine: discovery, selection, configuration precedence, options, baseline."""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from tracelint.engine.baseline import read_baseline, write_baseline
from tracelint.engine.config import Config, load_config
from tracelint.api import available_rules
from tracelint.engine.registry import matches
from tracelint.engine.rule import DOC_SECTIONS
from tracelint.api import lint
from tracelint.errors import ConfigError
from tracelint.timeline.model import Meta, Timeline
from tracelint.timeline.schema import make_table


def gappy_timeline(n=10, kernel_ns=10_000, gap_ns=50_000) -> Timeline:
    """n kernels with idle gaps between them, each launched just before it runs."""
    ks = np.arange(n) * (kernel_ns + gap_ns)
    corr = np.arange(n)
    return Timeline(
        kernels=make_table("kernels", {"device": [0] * n, "stream": [7] * n, "start": ks,
                                       "end": ks + kernel_ns, "name": ["k"] * n,
                                       "correlation": corr, "pid": [1] * n}),
        api_calls=make_table("api_calls", {"pid": [1] * n, "tid": [1] * n, "start": ks - 5000,
                                           "end": ks - 1000, "name": ["cudaLaunchKernel"] * n,
                                           "correlation": corr, "api": ["runtime"] * n}),
        meta=Meta(format="kineto-json"))


def test_builtin_rules_are_documented():
    rules = available_rules()
    assert rules, "no rules discovered"
    for r in rules:
        for section in DOC_SECTIONS:
            assert r.section(section), f"{r.id} lacks docstring section {section!r}"
        for name, default, help_ in r.option_docs():
            assert help_, f"{r.id} option {name} has no description"


def test_selection_by_id_prefix_slug_group():
    tl001 = next(r for r in available_rules() if r.id == "TL001")
    assert matches(tl001, "TL001") and matches(tl001, "TL0") and matches(tl001, "launch-gap")
    assert matches(tl001, "ALL") and matches(tl001, "host")
    assert not matches(tl001, "TL002") and not matches(tl001, "small-op-storm")


def test_tl001_measures_idle_time_exactly():
    tl = gappy_timeline()
    rep = lint(tl, Config(select=["TL001"]))
    (f,) = rep.findings
    # independent computation: 9 gaps of 50 µs between 10 back-to-back-launched kernels
    assert f.impact_ns == 9 * 50_000 and f.occurrences == 9
    assert f.evidence[next(iter(f.evidence))].status == "measured"


def test_threshold_from_config_silences_rule():
    tl = gappy_timeline()
    cfg = Config(select=["TL001"], options={"launch-gap": {"min_gap_ns": 60_000}})
    assert lint(tl, cfg).findings == []


def test_unknown_option_and_selector_are_errors():
    with pytest.raises(ConfigError):
        lint(gappy_timeline(), Config(options={"TL001": {"nope": 1}}))
    with pytest.raises(ConfigError):
        lint(gappy_timeline(), Config(select=["TL999"]))


def test_severity_override():
    rep = lint(gappy_timeline(), Config(select=["TL001"], severity={"launch-gap": "error"}))
    assert rep.findings[0].severity.value == "error"


def test_pyproject_config_is_found_upward(tmp_path):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.tracelint]
        select = ["TL001"]
        fail-on = "error"
        [tool.tracelint.rules.launch-gap]
        min_gap_ns = 1000
    """))
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    cfg = load_config(start=sub)
    assert cfg.select == ["TL001"] and cfg.fail_on == "error"
    assert cfg.options_for(next(r for r in available_rules() if r.id == "TL001")).min_gap_ns == 1000


def test_tracelint_toml_rejects_unknown_setting(tmp_path):
    (tmp_path / "tracelint.toml").write_text('selekt = ["TL001"]\n')
    with pytest.raises(ConfigError):
        load_config(start=tmp_path)


def test_baseline_hides_accepted_findings_only(tmp_path):
    tl = gappy_timeline()
    rep = lint(tl, Config(select=["TL001"]))
    base = tmp_path / "baseline.json"
    write_baseline(base, rep.findings)
    assert read_baseline(base) == {f.fingerprint() for f in rep.findings}
    again = lint(gappy_timeline(gap_ns=70_000), Config(select=["TL001"], baseline=str(base)))
    assert again.findings == [] and again.suppressed == 1   # same identity: accepted
    doc = json.loads(base.read_text())
    doc["findings"][0]["fingerprint"] = "0" * 16
    base.write_text(json.dumps(doc))
    assert len(lint(tl, Config(select=["TL001"], baseline=str(base))).findings) == 1


def test_user_rules_dir(tmp_path):
    (tmp_path / "my_rule.py").write_text(textwrap.dedent('''
        from tracelint.engine.rule import Rule
        from tracelint.engine.finding import Evidence, Layer, Where

        class TooManyKernels(Rule):
            """More than 5 kernels.

            What it detects: x. Why it hurts: y. Evidence: z. Fix: f.
            Counter-example (when it does not apply): c.
            """
            id = "XY001"
            slug = "too-many-kernels"
            title = "Too many kernels"

            def check(self, ctx):
                if len(ctx.tl.kernels) > 5:
                    yield self.finding(ctx, message="many", impact_ns=0, where=Where(),
                                       evidence={Layer.SYSTEM: Evidence.measured("n kernels")})
    '''))
    rules = available_rules(Config(rules_dirs=[str(tmp_path)]))
    assert any(r.id == "XY001" for r in rules)
    rep = lint(gappy_timeline(), Config(select=["XY001"], rules_dirs=[str(tmp_path)]))
    assert [f.rule for f in rep.findings] == ["XY001"]


def test_rules_skip_without_gpu_activity():
    rep = lint(Timeline(meta=Meta(format="kineto-json")), Config())
    assert rep.findings == [] or all("security" in r.title.lower() or r.rule.startswith("TL1") for r in rep.findings)
    assert rep.skipped.get("TL001") == "no GPU activity in the trace"


def test_nesting_handles_zero_length_and_back_to_back():
    from tracelint.timeline.nesting import nest
    depth, parent = nest([0, 0, 0], [0, 10, 20], [100, 10, 30])
    assert depth.tolist() == [0, 1, 1] and parent.tolist() == [-1, 0, 0]
    depth, parent = nest([0, 0, 0], [0, 0, 10], [20, 10, 20])   # siblings touching at 10
    assert depth.tolist() == [0, 1, 1] and parent.tolist() == [-1, 0, 0]
