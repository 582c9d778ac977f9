"""A large trace's rules checked by two processes (engine/rule_processes): the same report as
one process on real traces, whichever process checked a rule; a worker that dies or a rule
that fails in it leaves the result as one process would have made it."""
from __future__ import annotations

import copy
import json
import os
import time
from dataclasses import dataclass

import pytest

import tracelint
from tracelint import forking
from tracelint.engine import rule_processes
from tracelint.engine.config import Config
from tracelint.api import available_rules
from tracelint.engine.finding import Evidence, Finding, Layer, Where
from tracelint.engine.rule import Rule
from tracelint.engine.runner import run_rules

from conftest import BUNDLED, REPO

REAL = [BUNDLED / "torch" / "hta_alexnet_a100.json.gz",
        BUNDLED / "torch" / "tracelens_h100_bert_small_inference.json.gz",
        BUNDLED / "nsys" / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite",
        BUNDLED / "nsys" / "nsys2022.4_local-cpu-nvtx-osrt_nogpu.sqlite",
        REPO / "fixtures" / "examples" / "training_step_antipatterns.json.gz"]


@pytest.fixture
def two_processes(monkeypatch):
    """Every trace counts as large and two processes are allowed."""
    monkeypatch.setattr(rule_processes, "ROWS_AT_LEAST", 0)
    forking.set_load_workers(2)
    yield
    forking.set_load_workers(1)


def _report(tl, rules=None, config=None) -> dict:
    d = json.loads(json.dumps(run_rules(tl, rules or available_rules(Config()), config).to_dict(),
                              default=str))
    d.pop("timing_s", None)
    return d


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_two_processes_report_what_one_does(path, monkeypatch):
    tl = tracelint.load(path)
    one = _report(tl)
    monkeypatch.setattr(rule_processes, "ROWS_AT_LEAST", 0)
    forking.set_load_workers(2)
    pids = []
    real_check = rule_processes.check_in_two

    def spy(*a, **kw):
        pids.append(os.getpid())
        return real_check(*a, **kw)

    monkeypatch.setattr(rule_processes, "check_in_two", spy)
    try:
        two = _report(tl)
    finally:
        forking.set_load_workers(1)
    assert pids, "the rules were not dealt to two processes"
    assert two == one
    if path.name.startswith("training_step"):      # planted: fixes stated in both processes
        assert sum(f["saving_ns"] is not None for f in two["findings"]) >= 2


def _tl():
    return tracelint.load(REAL[0])


@dataclass
class _Opts:
    pass


def _rule(rule_id: str, check, fix=None):
    """A trace-scope rule whose check (and fix_edits) run the given functions."""
    attrs = {"id": rule_id, "slug": rule_id.lower(), "title": rule_id, "scope": "trace",
             "Options": _Opts, "__doc__": f"{rule_id} test rule.",
             "check": lambda self, ctx: check(self, ctx)}
    if fix:
        attrs["fix_edits"] = lambda self, f, ctx: fix(f, ctx)
    return type(rule_id, (Rule,), attrs)


def _finding(rule, ctx, n=1):
    return [rule.finding(ctx, message=f"{rule.id} {i}", impact_ns=i, where=Where(),
                         evidence={Layer.SYSTEM: Evidence.measured("test")}) for i in range(n)]


def _bare(message: str) -> Finding:
    return Finding(rule="XY1", slug="x", title="x", severity="info", message=message,
                   impact_ns=0, span_ns=1, where=Where(), evidence={})


def test_the_worker_checks_rules_and_its_findings_come_back(two_processes):
    def where_checked(rule, ctx):
        time.sleep(0.05)             # long enough for both processes to take rules
        f = _finding(rule, ctx)[0]
        f.key = str(os.getpid())
        return [f]

    rules = [_rule(f"XY8{i:02d}", where_checked) for i in range(8)]
    rep = run_rules(_tl(), rules, Config(select=["ALL"]))
    assert [f.rule for f in rep.findings] == [r.id for r in rules]      # in the rules' order
    pids = {f.key for f in rep.findings}
    assert str(os.getpid()) in pids and len(pids) == 2


def test_a_rule_whose_worker_dies_is_checked_here(two_processes):
    parent = os.getpid()

    def dies_in_worker(rule, ctx):
        if os.getpid() != parent:
            os._exit(3)              # the worker vanishes mid-rule
        return _finding(rule, ctx, 2)

    rules = [_rule(f"XY9{i:02d}", dies_in_worker) for i in range(6)]
    cfg = Config(select=["ALL"])
    rep = run_rules(_tl(), rules, cfg)
    assert sorted(f.rule for f in rep.findings) == sorted(r.id for r in rules for _ in range(2))
    assert set(rep.elapsed_s) >= {r.id for r in rules}


def test_a_rule_that_fails_fails_the_lint_as_in_one_process(two_processes):
    def fails(rule, ctx):
        raise ValueError("broken rule")

    rules = [_rule("XY950", lambda r, c: _finding(r, c)), _rule("XY951", fails),
             _rule("XY952", lambda r, c: _finding(r, c))]
    with pytest.raises(ValueError, match="broken rule"):
        run_rules(_tl(), rules, Config(select=["ALL"]))


def test_fixes_stated_in_the_worker_reach_the_savings(two_processes):
    """A rule keeps state from its check for fix_edits; wherever it ran, its fix's failure
    reads the same, and each finding gets its own rule's answer."""
    def check(rule, ctx):
        rule.seen = os.getpid()
        return _finding(rule, ctx, 3)

    def fix(f, ctx):
        raise KeyError(f.message)

    rules = [_rule(f"XY96{i}", check, fix) for i in range(4)]
    cfg = Config(select=["ALL"])
    tl = _tl()
    two = [(f.rule, f.message, f.saving_note) for f in run_rules(tl, rules, cfg).findings]
    forking.set_load_workers(1)
    one = [(f.rule, f.message, f.saving_note) for f in run_rules(tl, rules, cfg).findings]
    assert two == one
    assert all(note == "the fix could not be stated (KeyError)" for *_, note in two)


def test_stated_fixes_answer_by_finding():
    a, b = _bare("a"), _bare("a")
    fixes = rule_processes.StatedFixes([a, b], [(["edit a"], None), (None, "why b")])
    assert fixes.fix_edits(b, None) == (None, "why b")
    assert fixes.fix_edits(a, None) == (["edit a"], None)
    assert fixes.fix_edits(_bare("a"), None)[0] is None


def test_only_large_traces_with_two_processes_allowed_use_a_worker():
    tl = _tl()
    assert not rule_processes.wanted(tl, 2)               # small: one process
    assert sum(tl.counts().values()) < rule_processes.ROWS_AT_LEAST
    assert not rule_processes.wanted(tl, 1)


def test_fixes_replayed_by_two_processes_save_what_one_process_does(monkeypatch):
    """engine/savings: one replay per fix and one with all of them, dealt to two processes,
    give every finding and the total the same savings as one process."""
    from tracelint import forking as fk
    from tracelint.engine.context import Context
    from tracelint.engine.savings import project_savings
    from tracelint.whatif.analysis import WhatIf
    tl = tracelint.load(REAL[-1])                         # the planted example
    rules = {r.id: r(Config().options_for(r)) for r in available_rules(Config())}
    ctx = Context(tl, Config())
    found = [f for r in rules.values() if r.scope == "trace" and not r.applicable(ctx)
             for f in r.check(ctx)]
    w = WhatIf(tl)

    def savings(two: bool):
        fs = copy.deepcopy(found)
        total, path = project_savings(w, fs, rules, ctx, two_processes=two,
                                      side_task=w.critical_path_dict)
        return total, path, [(f.rule, f.saving_ns, f.saving_iterations, f.saving_note) for f in fs]

    one = savings(False)
    dealt = []
    deal = fk.deal_in_two
    monkeypatch.setattr(fk, "deal_in_two", lambda n, *a: dealt.append(n) or deal(n, *a))
    two = savings(True)
    assert dealt and dealt[0] >= 4         # the path, two fixes at least, and all of them
    assert two == one
    assert two[1] == w.critical_path_dict() and two[1]["breakdown_ns"]
    assert sum(s is not None for _, s, _, _ in two[2]) >= 2


def test_long_rules_are_dealt_first_and_every_rule_once():
    rules = [r for r in available_rules(Config()) if r.scope == "trace"]
    order = rule_processes.dealing_order(rules)
    assert sorted(order) == list(range(len(rules)))
    ids = [rules[i].id for i in order]
    known = [i for i in rule_processes.DEAL_FIRST if i in {r.id for r in rules}]
    assert ids[:len(known)] == known
    rest = [r.id for r in rules if r.id not in known]
    assert ids[len(known):] == rest


def test_the_trace_file_is_scanned_once_and_here(two_processes, tmp_path, monkeypatch):
    """TL100 and TL101 read one scan of the trace file: both are checked by this process,
    whose cache the output sink then reuses; the worker never scans the file."""
    from tracelint.secrets import scan
    log = tmp_path / "scans"
    real = scan.scan_sqlite

    def logged(*a, **kw):
        with open(log, "a") as fh:          # the worker's scans are counted too
            fh.write(f"{os.getpid()}\n")
        return real(*a, **kw)

    monkeypatch.setattr(scan, "scan_sqlite", logged)
    scan.clear_cache()
    tl = tracelint.load(REAL[2])            # an nsys export: both rules apply
    rules = [r for r in available_rules(Config()) if r.scope == "trace"]
    rep = run_rules(tl, rules)
    assert {"TL100", "TL101"} <= set(rep.elapsed_s)
    assert log.read_text().split() == [str(os.getpid())]
    from tracelint.secrets.sink import found_in
    found_in(str(REAL[2]))                   # the sink: cached here, no second scan
    assert log.read_text().split() == [str(os.getpid())]
