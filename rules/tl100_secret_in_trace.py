"""TL100 secret-in-trace."""
from __future__ import annotations

from tracelint.engine.finding import Layer, Severity
from tracelint.engine.rule import Rule
from tracelint.secrets.findings import rule_findings, why_unscannable


class SecretInTrace(Rule):
    """The trace file stores secrets: tokens, passwords, keys from the profiled environment.

    What it detects: secret-looking values anywhere in the trace file itself. Nsight Systems
    keeps the environment of every traced process (NUL-separated blocks in StringIds), the
    target's environment (TARGET_INFO_SYSTEM_ENV) and capture settings (META_DATA_CAPTURE);
    some torch.profiler tooling stores `metadata.system.env`; user annotations and command lines
    can carry tokens too. Two kinds of evidence count: a variable whose name looks like a
    credential (token, secret, password, passwd, key, auth, credential, private) holding a
    non-trivial value, and well-known token shapes anywhere (AWS AKIA… key ids, GitHub ghp_ /
    github_pat_, Hugging Face hf_…, Slack xox…, OpenAI / Anthropic sk-…, Google AIza…, JWTs,
    bearer tokens, passwords in URLs, PEM private key blocks). Empty values, booleans, small
    numbers, paths, and markers such as <redacted>, *** or REDACTED are not secrets; names such
    as TOKENIZERS_PARALLELISM, SSH_AUTH_SOCK or KEY_PATH are not credentials (heuristics:
    tracelint.secrets.patterns). One finding per kind of secret and table column / JSON path;
    the finding names where the value is and never prints it (masked: `hf_a…(37 chars)`).
    Why it hurts: traces are attached to bug reports, shared with vendors and colleagues, and
    uploaded to dashboards; whoever opens the file can read the credential and use it.
    Evidence: system: how many values, where (table.column[row] or JSON path) and a masked
    preview of each; kernel and microarch: not applicable.
    Fix: rotate the exposed credential first. Share a scrubbed copy: `tracelint redact TRACE -o
    TRACE.redacted` (add --paths to also anonymise home directories, user and host names;
    `tracelint redact TRACE --check` fails CI when a trace still holds secrets). Keep secrets out
    of the profiled process: unset them before `nsys profile`, or pass them through files.
    Counter-example (when it does not apply): a deliberately fake credential in a test fixture,
    or a public identifier that happens to match a token shape; accept it with a baseline or
    --ignore TL100.
    """

    id = "TL100"
    slug = "secret-in-trace"
    title = "Secret stored in the trace file"
    severity = Severity.ERROR
    groups = frozenset({"security"})
    layers = frozenset({Layer.SYSTEM})
    needs = frozenset()

    def applicable(self, ctx) -> str | None:
        return why_unscannable(ctx.tl)

    def check(self, ctx):
        yield from rule_findings(self, ctx, "secret")
