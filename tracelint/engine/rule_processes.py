"""A large trace's rules checked by two processes: this one and a forked worker that shares
the loaded Timeline (copy-on-write), so one big trace uses a second core for its rules, not
only for its load.

Why dynamic dealing: a rule's cost depends on the trace, not on the rule alone (on the 287 MB
reference TL001 and TL038 take half of the rules' time, on other traces other rules lead), so
each process takes the next rule no process has taken yet from one shared counter
(forking.deal_in_two).

Why two: the longest rule bounds the wall time (TL001, a third of the rules' time on the
reference); a third process would hold a third copy of the rules' caches and gain little.

A rule run in the worker also states its findings' fixes there (engine/savings.stated_fix),
right after its check: some rules keep what their check found for fix_edits (TL038's regions),
and only that process has it. The findings, their fixes and the rule's time come back pickled.
If the worker fails in any way (a crash, memory, a result that cannot be pickled), this
process checks the rules it had taken itself, so a rule's own error surfaces as in one process.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .finding import Finding

#: Two processes check the rules of a trace of at least this many rows (all tables): below it
#: forking and the worker's own cache building cost more than they save.
ROWS_AT_LEAST = 200_000
#: ... and of at most this many: above it memory, not time, runs out first. The worker builds
#: its own copy of the rules' caches; a 2 GB Kineto trace (about 6 M rows) lints in 1.4 GiB in
#: one process, and a 10 M-kernel nsys export (33 M rows) peaks at 4.2 GiB in its rules.
ROWS_AT_MOST = 4_000_000
#: The rules that took longest on the large traces measured (bench/out/big.json: TL001 0.30 s,
#: TL038 0.12, TL030 0.07; a 300 k-kernel nsys export: TL005 0.20, TL001 0.19, TL100 0.09; a
#: trace with long strings: TL100 1.4 s), dealt first. Taken last, TL038 kept the worker busy
#: 45 ms after this process had run out of rules (the reference trace).
DEAL_FIRST = ("TL001", "TL005", "TL038", "TL030", "TL007", "TL009", "TL037", "TL039",
              "TL020", "TL032")
#: The rules that read the scan of the trace file itself (secrets.scan.scan_file, cached per
#: process): checked together by this process, right after `first`, never dealt. Dealt apart,
#: each process scanned the file (0.6-0.8 s each on an nsys export of 332,000 range names);
#: here, the output sink finds the scan cached too (secrets.sink.found_in).
HERE_TOGETHER = ("TL100", "TL101")


@dataclass
class Checked:
    """One rule's outcome: its findings, or why it was skipped; its time; the object that
    states its findings' fixes (the rule itself, or StatedFixes when a worker checked it)."""

    findings: list[Finding] = field(default_factory=list)
    skipped: str | None = None
    elapsed_s: float | None = None
    fixes: object | None = None


class StatedFixes:
    """Stands in for a rule checked by the worker: its findings' fixes, stated there."""

    def __init__(self, findings: list[Finding], fixes: list[tuple]):
        self._pairs = list(zip(findings, fixes))    # pickled with the findings: same objects
        self._by_id: dict[int, tuple] | None = None

    def fix_edits(self, finding: Finding, ctx) -> tuple:
        if self._by_id is None:
            self._by_id = {id(f): fix for f, fix in self._pairs}
        return self._by_id.get(id(finding), (None, "no rule instance to state the fix"))


def wanted(tl, processes: int) -> bool:
    """Whether this trace's rules are worth a second process: more than one allowed, fork
    available, a large trace but not a huge one, and memory for the worker's own caches
    (about the loaded tables' size again)."""
    from ..forking import mp_context
    from ..meminfo import available_bytes, rss_bytes
    if processes < 2 or mp_context().get_start_method() != "fork":
        return False
    if not ROWS_AT_LEAST <= sum(tl.counts().values()) <= ROWS_AT_MOST:
        return False
    avail, rss = available_bytes(), rss_bytes()
    return avail is None or rss is None or avail >= 2 * rss


def check_in_two(ctx, selected: list, check_one: Callable[[type, object], Checked],
                 first: Callable[[], None] | None = None) -> list[Checked]:
    """check_one(rule_cls, ctx) for every rule in `selected`, dealt to this process and one
    forked worker (forking.deal_in_two); the outcomes in the order of `selected`. `first`
    runs here while the worker starts on the rules, then the HERE_TOGETHER rules; then this
    process takes rules too. A rule checked in the worker states its findings' fixes there
    (StatedFixes)."""
    from ..forking import deal_in_two
    from .savings import stated_fix

    here = [i for i, r in enumerate(selected) if r.id in HERE_TOGETHER]
    order = [i for i in dealing_order(selected) if i not in here]
    done_here: dict[int, Checked] = {}

    def check(i: int, in_worker: bool) -> Checked:
        c = check_one(selected[order[i]], ctx)
        if in_worker and c.fixes is not None:
            c.fixes = StatedFixes(c.findings, [stated_fix(c.fixes, f, ctx) for f in c.findings])
        return c

    def first_then_here() -> None:
        if first is not None:
            first()
        for i in here:
            done_here[i] = check_one(selected[i], ctx)

    dealt = deal_in_two(len(order), check, first_then_here)
    out = dict(zip(order, dealt))
    for i in here:         # also when first() raised EOFError or OSError (taken for the worker)
        out[i] = done_here[i] if i in done_here else check_one(selected[i], ctx)
    return [out[i] for i in range(len(selected))]


def dealing_order(selected: list) -> list[int]:
    """The rules' indexes, the usually long ones first (DEAL_FIRST), then the others in their
    order: a long rule taken last keeps one process busy while the other waits."""
    rank = {rule_id: k for k, rule_id in enumerate(DEAL_FIRST)}
    return sorted(range(len(selected)), key=lambda i: rank.get(selected[i].id, len(rank)))
