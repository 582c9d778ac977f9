"""Secrets 1: well-known token shapes, anywhere in any string (AWS, GitHub, GitLab, Hugging
Face, Slack, Anthropic, OpenAI, Stripe, Google, npm, PyPI, JWT, bearer / authorization
tokens, passwords and signatures in URLs, PEM private keys), and the public prefix mask()
may show. The heuristics as a whole: patterns.py."""
from __future__ import annotations

import re

_END = r"(?![A-Za-z0-9_\-])"
#: token prefixes are distinctive: one may follow "_" (gemm_ghp_...), not a letter or digit
_B = r"(?<![A-Za-z0-9])"
_E = r"(?![A-Za-z0-9])"
#: (kind, regex, group holding the secret). text_scan._shape_ok() adds per-kind checks.
TOKEN_SHAPES: list[tuple[str, re.Pattern, int]] = [
    ("private-key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[^\x00]*)", re.S), 0),
    ("aws-access-key-id", re.compile(_B + r"((?:AKIA|ASIA)[0-9A-Z]{16})" + _E), 1),
    ("github-token", re.compile(_B + r"((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,251})" + _E), 1),
    ("github-token", re.compile(_B + r"(github_pat_[A-Za-z0-9_]{22,255})" + _E), 1),
    ("gitlab-token", re.compile(_B + r"(glpat-[A-Za-z0-9_\-]{20,})" + _END), 1),
    ("huggingface-token", re.compile(_B + r"(hf_[A-Za-z0-9]{30,})" + _E), 1),
    ("slack-webhook", re.compile(r"(https://hooks\.slack\.com/services/[A-Za-z0-9_/\-]{20,})"), 1),
    ("slack-token", re.compile(_B + r"(xox[abposre]-[A-Za-z0-9\-]{10,})" + _END), 1),
    ("anthropic-key", re.compile(_B + r"(sk-ant-[A-Za-z0-9_\-]{20,})" + _END), 1),
    ("openai-key", re.compile(_B + r"(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,})" + _END), 1),
    ("stripe-key", re.compile(_B + r"((?:sk|rk)_live_[A-Za-z0-9]{16,})" + _E), 1),
    ("google-api-key", re.compile(_B + r"(AIza[0-9A-Za-z_\-]{35})" + _END), 1),
    ("npm-token", re.compile(_B + r"(npm_[A-Za-z0-9]{36})" + _E), 1),
    ("pypi-token", re.compile(_B + r"(pypi-AgE[A-Za-z0-9_\-]{50,})" + _END), 1),
    ("jwt", re.compile(_B + r"(eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*)"), 1),
    ("bearer-token", re.compile(r"(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{16,}=*)"), 1),
    ("bearer-token", re.compile(
        r"(?i)\bauthorization[\"']?\s*[:=]\s*[\"']?(?:basic|token|digest)\s+([A-Za-z0-9+/=._~\-]{8,})"), 1),
    ("url-password", re.compile(
        r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@\x00\"']+:([^\s/@\x00\"']+)@[^\s/\x00\"']"), 1),
    ("url-signature", re.compile(
        r"(?i)[?&](?:access_token|id_token|refresh_token|token|api_key|apikey|key|sig|signature|"
        r"x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|password|"
        r"client_secret|secret)=([^&\s#\x00\"'<>]{8,})"), 1),
]

#: Where each shape's match can start: the literal text every match begins with (the regexes
#: above, after their look-behind), for text_scan's scan of long texts. Case-insensitive
#: shapes ((?i)) give theirs in lower case. url-password has none: its scheme is any word.
SHAPE_STARTS: dict[re.Pattern, tuple[str, ...]] = dict(zip(
    (rx for _, rx, _ in TOKEN_SHAPES), [
        ("-----BEGIN ",), ("AKIA", "ASIA"), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        ("github_pat_",), ("glpat-",), ("hf_",), ("https://hooks.slack.com/services/",),
        ("xox",), ("sk-ant-",), ("sk-",), ("sk_live_", "rk_live_"), ("AIza",), ("npm_",),
        ("pypi-AgE",), ("eyJ",), ("bearer",), ("authorization",), None, ("?", "&")], strict=True))

#: The public prefix of each shape, shown by mask() (plus one character).
PUBLIC_PREFIX = re.compile(
    r"^(?:AKIA|ASIA|gh[pousr]_|github_pat_|glpat-|hf_|xox[a-z]-|sk-ant-(?:api|admin)\d\d-|"
    r"sk-(?:proj-|svcacct-|admin-)?|[rs]k_live_|AIza|npm_|pypi-|eyJ|"
    r"https://hooks\.slack\.com/services/|-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)")
