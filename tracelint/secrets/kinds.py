"""What the secret scanner reports: the two categories, the kinds with their human labels,
the Match span type, and the markers that replace a redacted value (see patterns.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

REDACTED = "<redacted>"
USER_MARK = "<user>"
HOST_MARK = "<host>"
EMAIL_MARK = "<email>"

SECRET = "secret"
PERSONAL = "personal"


@dataclass(frozen=True)
class Match:
    """One span of one string to report / replace. `start:end` is exactly the sensitive part."""

    start: int
    end: int
    kind: str                 # a key of KIND_LABELS
    category: str             # SECRET | PERSONAL
    name: str | None = None   # the variable / key / row name it was found under, if any
    priority: int = field(default=0, compare=False)


#: Human labels for every kind (used in findings and the CLI).
KIND_LABELS: dict[str, str] = {
    "aws-access-key-id": "AWS access key id",
    "github-token": "GitHub token",
    "gitlab-token": "GitLab token",
    "huggingface-token": "Hugging Face token",
    "slack-token": "Slack token",
    "slack-webhook": "Slack webhook URL",
    "anthropic-key": "Anthropic API key",
    "openai-key": "OpenAI API key",
    "stripe-key": "Stripe secret key",
    "google-api-key": "Google API key",
    "npm-token": "npm token",
    "pypi-token": "PyPI token",
    "jwt": "JSON Web Token",
    "bearer-token": "bearer / authorization token",
    "url-password": "password in a URL",
    "url-signature": "secret URL query parameter",
    "private-key": "private key block",
    "env-credential": "credential-like variable",
    "inline-credential": "credential in free text",
    "home-path": "home directory (user name)",
    "user-name": "user name",
    "host-name": "host name / address",
    "email": "e-mail address",
}

PERSONAL_MARKS = {"home-path": USER_MARK, "user-name": USER_MARK, "host-name": HOST_MARK,
                  "email": EMAIL_MARK}
