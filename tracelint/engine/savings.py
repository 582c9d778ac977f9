"""Projected savings: replay each finding's fix (the rule's edits) on the run's graph and
write the wall time it saves into the finding; replay all fixes at once for the report.

Pure: the timeline and whatif layers only. One graph and one base replay serve every finding.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Iterable

from ..whatif.analysis import WhatIf
from .finding import Finding
from .rule import duration_text


def stated_fix(rule, finding: Finding, ctx) -> tuple:
    """(edits, None) or (None, why not): the rule's fix of one finding. A rule's fix must never
    break the lint, so an exception becomes the reason."""
    if rule is None:
        return None, "no rule instance to state the fix"
    try:
        return rule.fix_edits(finding, ctx)
    except Exception as exc:
        return None, f"the fix could not be stated ({type(exc).__name__})"


def project_savings(whatif: WhatIf, findings: Iterable[Finding], rules: dict, ctx,
                    two_processes: bool = False,
                    side_task: Callable[[], object] | None = None) -> tuple[int | None, object]:
    """Fill saving_* on every finding; return (saving_all_ns, what `side_task` returned).
    saving_all_ns: all fixes together, None when no fix could be replayed. One replay per fix
    and one with all of them; with two_processes they are dealt to this process and a forked
    worker (forking.deal_in_two), and `side_task` with them: work of the size of a replay
    (the base replay's critical path) that the second round of replays leaves a process
    idle for."""
    span = max(int(whatif.tl.span_ns), 1)
    fixed: list[tuple[Finding, list]] = []
    uppers: list[tuple[Finding, list, tuple]] = []     # (finding, edits, notes)
    for f in findings:
        edits, why, upper = _unpack(stated_fix(rules.get(f.rule), f, ctx))
        if edits:
            fixed.append((f, list(edits)))
            f.saving_note = why or ""           # the rule's caveat on what the replay leaves out
            if upper:
                uppers.append((f, list(edits) + list(upper[0]), upper[1:]))
        else:
            f.saving_note = why or "the fix is not expressible as an edit of the run"
    runs = [edits for _, edits in fixed]
    if len(fixed) > 1:         # one fix: all fixes together is that replay
        runs.append([e for edits in runs for e in edits])
    runs += [edits for _, edits, _ in uppers]
    tasks: list[Callable[[], object]] = [side_task] if side_task is not None else []
    tasks += [partial(whatif.saving, edits) for edits in runs]
    if two_processes and len(tasks) > 1:
        from ..forking import deal_in_two
        results = deal_in_two(len(tasks), lambda i, in_worker: tasks[i]())
    else:
        results = [task() for task in tasks]
    extra = results.pop(0) if side_task is not None else None
    upper_results = results[len(results) - len(uppers):]
    for (f, _), (saved, per_it, own) in zip(fixed, results):
        saved, note = _on_own_process(whatif, f, saved, own)
        f.saving_ns = int(saved)
        f.saving_share = saved / span
        f.saving_iterations = {k: int(v) for k, v in per_it.items()}
        f.saving_note = "; ".join(n for n in (f.saving_note, note) if n)
    for (f, _, notes), (saved, _, own) in zip(uppers, upper_results):
        saved = _on_own_process(whatif, f, saved, own)[0]
        if saved > f.saving_ns + max(RANGE_AT_LEAST * abs(f.saving_ns), 1_000):
            f.saving_upper_ns = int(saved)     # a range only where the faster variant saves more
            f.saving_note = notes[0].format(upper=duration_text(saved))
        elif len(notes) > 1:                   # replayed, and no faster: the saving is not a bound
            f.saving_note = notes[1]
    if not fixed:
        return None, extra
    return (fixed[0][0].saving_ns if len(fixed) == 1 else int(results[len(fixed)][0])), extra


#: The upper end is reported where it exceeds the projected saving by this share (and 1 µs):
#: a "range" of 292.9 to 292.9 ms says nothing.
RANGE_AT_LEAST = 0.01


#: Why a saving is the finding's own process's: the trace's end is another process's.
OWN_PROCESS_NOTE = ("measured on the run of process {pid}, where the fix applies: this trace "
                    "holds several processes, and its end, set by another one, {trace}")


def _on_own_process(whatif: WhatIf, f: Finding, saved: int, own: dict[int, int]) -> tuple:
    """(saving, note): in a trace of several processes driving GPUs (ranks, replicas), the
    saving on the finding's own process where it differs from the trace's: a fix on a process
    that is not the last to end shortens that process's run, while the trace's end waits for
    the slowest one (2 GPUs, 2 processes: 0 ns on the trace for one, 34 ms on its own run).
    Only where the fix moves no other process: a finding whose calls span processes (TL005
    groups a call site over all of them) keeps the trace's saving."""
    pid = whatif.process_of(f.where.pid, f.where.device) if f.where is not None else None
    if pid is None or pid not in own or \
            abs(own[pid] - saved) <= max(RANGE_AT_LEAST * abs(saved), 1_000) or \
            any(abs(v) > 1_000 for p, v in own.items() if p != pid):
        return saved, ""     # one process, the same figure, or a fix that moves others too
    trace = (f"moves by {duration_text(saved)}" if saved > 0 else "does not move" if saved == 0
             else f"ends {duration_text(-saved)} later")
    return own[pid], OWN_PROCESS_NOTE.format(pid=pid, trace=trace)


def _unpack(fix: tuple) -> tuple:
    """(edits, caveat, upper or None) from a rule's fix_edits answer (Rule.fix_edits)."""
    return (*fix, None)[:3]


#: Why a finding of a trace without GPU work or runtime calls carries no saving.
NO_REPLAY_NOTE = ("no saving can be established from this trace: it has no GPU activity and no "
                  "runtime API calls, so the what-if replay has no graph to apply the fix to. "
                  "Capture the same program on a GPU to project the saving")


def explain_no_replay(findings: Iterable[Finding], rules: dict, ctx,
                      why: str = NO_REPLAY_NOTE) -> None:
    """No replay is possible (a CPU-only trace): every finding still says why it has no
    saving_ns, its rule's own reason when the fix is no edit, else ``why``."""
    for f in findings:
        if f.saving_ns is not None or f.saving_note:
            continue
        edits, note = stated_fix(rules.get(f.rule), f, ctx)
        f.saving_note = why if edits else (note or "the fix is not expressible as an edit of the run")
