"""TL101 personal-data-in-trace."""
from __future__ import annotations

from tracelint.engine.finding import Layer, Severity
from tracelint.engine.rule import Rule
from tracelint.secrets.findings import rule_findings, why_unscannable


class PersonalDataInTrace(Rule):
    """The trace file names people and machines: user names, home directories, host names.

    What it detects: personal data in the trace file: home directories (/home/NAME,
    /Users/NAME, C:\\Users\\NAME, /global/homes/x/NAME, ...), user names (USER, LOGNAME,
    SLURM_JOB_USER, nsys EXPORT_USER, Kineto `username`), host names and addresses (HOSTNAME,
    nsys EXPORT_HOST / Hostname / DEVICE_DISPLAY_NAME, Kineto `host_name`, `uname.node`,
    SSH_CONNECTION) and e-mail addresses. One finding per kind, listing every table column / JSON
    path it was found in; values are masked in the report.
    Why it hurts: little by itself, but a shared trace tells who ran what on which machine;
    some organisations may not publish internal host names or staff user names.
    Evidence: system: how many values and where; kernel and microarch: not applicable.
    Fix: share `tracelint redact TRACE -o OUT --paths`, which replaces home directories with
    /home/<user>, user names with <user> and host names with <host> while keeping every
    timing, id and kernel name.
    Counter-example (when it does not apply): traces that stay on the machine that produced
    them, or names that are public anyway (CI runners, container ids).
    """

    id = "TL101"
    slug = "personal-data-in-trace"
    title = "Personal data (user / host names) in the trace file"
    severity = Severity.INFO
    groups = frozenset({"security", "privacy"})
    layers = frozenset({Layer.SYSTEM})
    needs = frozenset()

    def applicable(self, ctx) -> str | None:
        return why_unscannable(ctx.tl)

    def check(self, ctx):
        yield from rule_findings(self, ctx, "personal", by_container=False)
