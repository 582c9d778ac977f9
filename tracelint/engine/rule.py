"""The Rule base class: metadata as plain class attributes, a docstring that is the
rule's documentation, a frozen Options dataclass of thresholds, and a pure check()."""
from __future__ import annotations

import dataclasses
import inspect
import re
import weakref
from typing import ClassVar, Iterator

from .finding import Finding, Layer, Severity

DOC_SECTIONS = ("What it detects", "Why it hurts", "Evidence", "Fix",
                "Counter-example (when it does not apply)")


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """This rule has no thresholds."""


class Rule:
    """Base class. Subclasses set the metadata and implement check(ctx)."""

    id: ClassVar[str] = ""
    slug: ClassVar[str] = ""
    title: ClassVar[str] = ""
    severity: ClassVar[Severity] = Severity.WARNING
    groups: ClassVar[frozenset[str]] = frozenset()
    layers: ClassVar[frozenset[Layer]] = frozenset({Layer.SYSTEM})
    # Timeline tables the rule cannot run without (any one non-empty is enough).
    needs: ClassVar[frozenset[str]] = frozenset({"kernels"})
    Options: ClassVar[type] = NoOptions
    # "trace": check(Context) on one trace; "job": check(JobContext) on a job's rank summaries.
    scope: ClassVar[str] = "trace"
    # job scope: the fewest ranks the rule can say anything about.
    min_ranks: ClassVar[int] = 2
    # False for rules that stay correct when kernel times are placeholders (CUPTI range
    # profiler traces): they read names, counts and counters, not durations or gaps.
    uses_kernel_times: ClassVar[bool] = True
    # Frameworks whose traces the rule understands (empty: any); a trace whose importer names
    # another framework (meta.extra["framework"], e.g. "jax") skips the rule with the reason.
    frameworks: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, options=None):
        self.options = options if options is not None else self.Options()

    def check(self, ctx) -> Iterator[Finding]:  # pragma: no cover - abstract
        """ctx: an engine.context.Context (trace scope) or engine.job_context.JobContext (job)."""
        raise NotImplementedError

    def applicable(self, ctx) -> str | None:
        """None when the rule can say something here, else why not (job scope: rank count)."""
        if self.scope == "job" and ctx.n < self.min_ranks:
            return f"needs at least {self.min_ranks} ranks ({ctx.n} analysed)"
        return None

    def fix_edits(self, finding: Finding, ctx):
        """The rule's fix as what-if edits (tracelint.whatif.edits), or (None, why not).

        engine/savings.py replays them to project the finding's saving_ns. (edits, caveat) is
        a fix whose replay leaves something out; (edits, caveat, (more edits, note[, flat]))
        also names the upper end of its saving: the fix with those edits too, its saving
        written into note's {upper} field, or `flat` the note where it saves no more
        (whatif/pinned.py)."""
        return None, "this rule does not state its fix as an edit of the run"

    # ----- documentation -----------------------------------------------------------------
    @classmethod
    def doc(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def summary(cls) -> str:
        return cls.doc().split("\n", 1)[0]

    @classmethod
    def section(cls, name: str) -> str:
        """Text of one docstring section ('Fix', 'Why it hurts', ...), '' when absent."""
        doc = cls.doc()
        names = "|".join(re.escape(s) for s in (*DOC_SECTIONS, "Options", "References"))
        m = re.search(rf"^{re.escape(name)}:\s*(.*?)(?=^(?:{names}):|\Z)", doc, re.S | re.M)
        return " ".join(m.group(1).split()) if m else ""

    @classmethod
    def option_docs(cls) -> list[tuple[str, object, str]]:
        """(name, default, description) per threshold; descriptions live in field metadata."""
        out = []
        for f in dataclasses.fields(cls.Options):
            default = f.default if f.default is not dataclasses.MISSING else None
            out.append((f.name, default, f.metadata.get("help", "")))
        return out

    # ----- helpers for subclasses --------------------------------------------------------
    def finding(self, ctx, **kw) -> Finding:
        """A Finding pre-filled with this rule's metadata, fix and counter-example; its share
        is of the context's span (the trace's, or the job's analysed window)."""
        kw.setdefault("fix", self.section("Fix"))
        kw.setdefault("counter_example", self.section("Counter-example (when it does not apply)"))
        kw.setdefault("span_ns", ctx.span_ns)
        kw.setdefault("severity", ctx.severity_for(self))
        return Finding(rule=self.id, slug=self.slug, title=self.title, **kw)

    def once_per_context(self, ctx, compute):
        """compute(ctx), run once per context and kept for the rule's other calls on it
        (applicable, check and fix_edits share one analysis)."""
        cached = getattr(self, "_per_context", None)
        if cached is None or cached[0]() is not ctx:     # a weak reference: the trace can go
            cached = self._per_context = (weakref.ref(ctx), compute(ctx))
        return cached[1]


def duration_text(ns: float) -> str:
    """A duration for a message or evidence sentence: µs below a millisecond, ms below a second,
    s from there (an 824 ms gap read "824160.0 µs", a 13 s wait "13182.13 ms")."""
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    return f"{ns / 1e6:.2f} ms" if ns >= 1e6 else f"{ns / 1e3:.1f} µs"


def option(default, help: str):
    """A threshold with its one-line description (used by docs and config validation)."""
    return dataclasses.field(default=default, metadata={"help": help})
