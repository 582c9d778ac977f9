"""What looks like a secret, or like personal data, in a trace string: the heuristics.

Traces are full of text the profiler copied from the machine: environment blocks (nsys keeps
every traced process's environment in ``StringIds``, the target's in
``TARGET_INFO_SYSTEM_ENV``), export metadata (``META_DATA_*``: user, host, absolute paths),
tool metadata in Kineto JSON (``metadata.system.env``, ``username``, ``host_name``), user
annotation names and Python frames. This module decides, for one string, which spans are
secrets (severity error) and which are personal data (severity info), and masks them.

Secrets (category "secret")
---------------------------
1. **Well-known token shapes, anywhere in any string** (``TOKEN_SHAPES``): AWS access key ids
   (``AKIA``/``ASIA`` + 16), GitHub (``ghp_ gho_ ghu_ ghs_ ghr_`` + 36, ``github_pat_``),
   GitLab ``glpat-``, Hugging Face ``hf_`` + 30 or more, Slack ``xox?-`` tokens and webhook URLs,
   Anthropic ``sk-ant-…``, OpenAI ``sk-…``/``sk-proj-…`` (the body must mix letters and digits,
   so ``sk-learn-something`` is not one), Stripe ``sk_live_``/``rk_live_``, Google ``AIza`` + 35,
   npm ``npm_``, PyPI ``pypi-AgE…``, JWTs (``eyJ….eyJ….sig``), ``Bearer <token>`` and
   ``Authorization: Basic|Token <token>``, passwords in URLs (``scheme://user:PASS@host``),
   signed-URL query parameters (``?token=``, ``&X-Amz-Signature=``, …) and PEM
   ``-----BEGIN … PRIVATE KEY-----`` blocks (up to the END line, a NUL or the end of the string).
   A token must start at a word boundary (``my_hf_…`` or ``task-…`` never match).
2. **Credential-looking names with a non-trivial value**: ``NAME=VALUE`` at the start of a
   line / NUL-separated segment (environment blocks), a JSON object key and its string value,
   a (name, value) row of a key/value table (``META_DATA_*``, ``TARGET_INFO_SYSTEM_ENV``), or an
   inline ``name=value`` / ``name: value`` / ``--name value`` in free text. The name is split into
   words (``_ - .`` and camelCase): *strong* words are ``token secret password passwd passphrase
   credential(s) creds`` and compounds such as ``apikey accesskey privatekey authtoken``, or
   ``key`` right after ``api access secret private signing encryption master client session
   account service license``; *weak* words are a lone ``key``, ``auth`` or ``private``.
   A name is **not** a credential when:
   - its last word says the value is a reference or a setting, not the secret itself
     (``REFERENCE_WORDS``: path, file, dir, sock, url, host, port, id, name, type, mode, size,
     version, timeout, enable(d), parallelism, …): ``SSH_AUTH_SOCK``, ``KEY_PATH=/etc/…``,
     ``HF_TOKEN_PATH``, ``TOKENIZERS_PARALLELISM`` (whose word is not even ``token``);
   - it names a tokenizer's special token (``pad_token``, ``eos_token``, ``bos_token``, …);
   - it is a known public value (``GPG_KEY`` of the official Python images, a fingerprint).
   A value is **trivial** (never a secret) when it is empty, a redaction marker (``<redacted…>``,
   ``[REDACTED]``, ``REDACTED``, ``***``, ``xxxx``, ``<hidden>``, ``none``, ``null``, ``n/a``), a
   boolean (true/false/yes/no/on/off/enabled/…), a number of at most 8 digits, shorter than 4
   characters, a filesystem path (``/…``, ``~/…``, ``./…``, ``C:\\…``; not when it holds ``@ + =``,
   which base64 secrets and URLs with credentials do), a variable reference
   (``$VAR``, ``${VAR}``, ``%VAR%``), a version number (``==3.3.1``, ``v2.1.0-rc1``), a URL
   without credentials or signed query parameters, or a tokenizer special token
   (``<|endoftext|>``, ``[PAD]``).
   Weak names (and any name in free text that is not upper-case environment style) need more:
   the value must *look random* — at least 16 characters of a token alphabet with upper case,
   lower case and digits, or at least 32 hex digits. Strong names in free text need 6 or more
   characters.

Personal data (category "personal", severity info)
--------------------------------------------------
- home directories: ``/home/NAME``, ``/Users/NAME``, ``/export/home``, ``/shared/home``,
  ``/global/homes/x/NAME``, ``/var/mail/NAME``, ``C:\\Users\\NAME`` (placeholders such as
  ``<user>``, ``$USER``, ``Shared``, ``Public`` are skipped);
- user names: values of ``USER LOGNAME USERNAME SUDO_USER SLURM_JOB_USER EXPORT_USER
  username user_name tw_user`` …;
- host names: values of ``HOSTNAME EXPORT_HOST Hostname DEVICE_DISPLAY_NAME host_name
  SLURMD_NODENAME SLURM_SUBMIT_HOST …``, ``uname.node``, and the addresses in
  ``SSH_CONNECTION``/``SSH_CLIENT``;
- e-mail addresses anywhere.
``root``, ``localhost`` and markers are not personal. With ``paths=True`` the redactor also
replaces, in every string, other whole-word occurrences of the user and host names found this
way (names of 4 or more characters that are not common words, see ``NAME_STOPLIST``).

Nothing here ever returns the secret text to a caller that prints: ``mask()`` gives a short
public prefix and the length (``hf_a…(37 chars)``).
"""
from __future__ import annotations

import math
import re
from functools import lru_cache
from dataclasses import dataclass, field
from typing import Iterable

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

# ----------------------------------------------------------------------------------------
# 1. Token shapes
# ----------------------------------------------------------------------------------------
_END = r"(?![A-Za-z0-9_\-])"
#: token prefixes are distinctive: one may follow "_" (gemm_ghp_...), not a letter or digit
_B = r"(?<![A-Za-z0-9])"
_E = r"(?![A-Za-z0-9])"
#: (kind, regex, group holding the secret). _shape_ok() adds per-kind checks.
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
_HAS_DIGIT = re.compile(r"\d")
_HAS_ALPHA = re.compile(r"[A-Za-z]")

#: The public prefix of each shape, shown by mask() (plus one character).
_PUBLIC_PREFIX = re.compile(
    r"^(?:AKIA|ASIA|gh[pousr]_|github_pat_|glpat-|hf_|xox[a-z]-|sk-ant-(?:api|admin)\d\d-|"
    r"sk-(?:proj-|svcacct-|admin-)?|[rs]k_live_|AIza|npm_|pypi-|eyJ|"
    r"https://hooks\.slack\.com/services/|-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)")


def _shape_ok(kind: str, secret: str) -> bool:
    if kind == "openai-key":
        body = secret.split("-", 1)[1]
        return bool(_HAS_DIGIT.search(body) and _HAS_ALPHA.search(body))
    if kind == "bearer-token":
        return bool(_HAS_DIGIT.search(secret)) or len(secret) >= 24
    if kind in ("url-password", "url-signature"):
        return not is_trivial_value(secret)
    return True


# ----------------------------------------------------------------------------------------
# 2. Credential-looking names
# ----------------------------------------------------------------------------------------
STRONG_WORDS = frozenset({
    "token", "secret", "secrets", "password", "passwd", "passphrase", "credential",
    "credentials", "creds", "apikey", "apitoken", "accesskey", "secretkey", "privatekey",
    "authtoken", "accesstoken", "refreshtoken", "sessiontoken", "idtoken", "clientsecret",
    "authkey", "bearer"})
WEAK_WORDS = frozenset({"key", "auth", "private"})
#: a preceding word that makes `key` strong (API_KEY, ACCESS_KEY, SECRET_KEY, ...)
KEY_QUALIFIERS = frozenset({
    "api", "access", "secret", "private", "signing", "encryption", "master", "client",
    "session", "account", "service", "license", "licence", "auth", "app", "admin", "deploy",
    "write", "read", "hmac", "sas", "storage", "subscription"})
#: a last word that makes the value a reference or a setting, not the secret itself
REFERENCE_WORDS = frozenset({
    "path", "paths", "file", "files", "filename", "dir", "directory", "sock", "socket", "url",
    "uri", "endpoint", "host", "hostname", "port", "server", "id", "ids", "name", "names",
    "type", "kind", "mode", "method", "scheme", "provider", "helper", "command", "cmd",
    "program", "prog", "env", "var", "vars", "prefix", "suffix", "header", "field", "format",
    "fmt", "alg", "algorithm", "size", "len", "length", "bits", "count", "num", "max", "min",
    "limit", "timeout", "ttl", "expiry", "expires", "expiration", "lifetime", "version",
    "enabled", "enable", "disabled", "disable", "required", "level", "policy", "scope",
    "scopes", "region", "parallelism", "location", "store", "cache", "home", "root",
    "config", "conf", "cfg", "askpass", "agent", "pid", "debug", "verbose", "log", "logging",
    "check", "verify", "strict", "only", "index", "idx", "fingerprint", "hash", "label",
    "labels", "budget", "ratio", "rate", "dtype", "layout", "pos", "position", "offset",
    "strategy", "backend", "impl", "class", "mapping", "map", "list", "set", "table"})
#: tokenizer special tokens: `eos_token`, `pad_token`, ...
SPECIAL_TOKEN_WORDS = frozenset({
    "pad", "eos", "bos", "unk", "mask", "sep", "cls", "start", "end", "special", "stop",
    "image", "video", "audio", "tool", "think", "begin", "eot", "eom", "additional", "chat"})
#: names that contain a credential word but hold public values
NON_SECRET_NAMES = frozenset({
    "GPG_KEY", "PYTHON_GPG_KEY", "SSH_AUTH_SOCK", "TOKENIZERS_PARALLELISM", "KEYTAB",
    "KRB5_KTNAME", "XKEYSYMDB"})

_WORD_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def name_words(name: str) -> list[str]:
    """HF_TOKEN -> [hf, token]; apiKey -> [api, key]; X-Api-Key -> [x, api, key]."""
    return [w.lower() for w in _WORD_RE.findall(name)]


def credential_strength(name: str | None) -> int:
    """0: not a credential name; 1: weak (key / auth / private); 2: strong."""
    if not name or len(name) > 128:
        return 0
    if name.upper() in NON_SECRET_NAMES:
        return 0
    words = name_words(name)
    if not words:
        return 0
    if words[-1] in REFERENCE_WORDS:
        return 0
    best = 0
    for i, w in enumerate(words):
        prev = words[i - 1] if i else ""
        if w in ("token", "tokens") and prev in SPECIAL_TOKEN_WORDS:
            return 0
        if w in STRONG_WORDS:
            best = 2
        elif w == "key" and prev in KEY_QUALIFIERS:
            best = 2
        elif w in WEAK_WORDS:
            best = max(best, 1)
        elif len(w) > 5 and w.endswith(("token", "secret", "password", "passwd")):
            best = 2       # hftoken, githubtoken, dbpassword
        elif len(w) > 6 and w.endswith("apikey"):
            best = 2
    return best


_MARKER_RE = re.compile(
    r"(?i)^(?:<[^<>]*(?:redact|hidden|mask|secret|removed|omitted)[^<>]*>|\[?redacted\]?|"
    r"\[?(?:hidden|masked|removed|omitted|filtered)\]?|\*+|x{3,}|•+|\.{3}|none|null|nil|"
    r"undefined|unset|n/?a|-+|<user>|<host>|<email>)$")
_BOOL_RE = re.compile(r"(?i)^(?:true|false|yes|no|on|off|y|n|t|f|enabled?|disabled?)$")
_NUM_RE = re.compile(r"^[+-]?\d{1,8}(?:\.\d+)?$")
_PATH_RE = re.compile(r"^(?:~[A-Za-z0-9_.\-]*|\.{1,2})?/(?:[^\s]*)$|^[A-Za-z]:[\\/]|^file:")
_VARREF_RE = re.compile(r"^(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_][A-Za-z0-9_]*%)$")
_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://\S+$")
_VERSION_RE = re.compile(r"^[=<>~!^]*v?\d+(?:\.\d+)+(?:[-+._]?[A-Za-z0-9]+)*$")
_SPECIAL_TOKEN_VALUE = re.compile(r"^(?:<\|?[A-Za-z0-9_ |./\-]+\|?>|\[[A-Z_]{2,12}\]|</?s>)$")


def is_marker(value: str) -> bool:
    return bool(_MARKER_RE.match(value.strip().strip("\"'")))


def is_trivial_value(value: str) -> bool:
    """True when `value` cannot be a secret whatever its name says (see module doc)."""
    v = value.strip().strip("\"'").strip()
    if len(v) < 4 or _MARKER_RE.match(v) or _BOOL_RE.match(v) or _NUM_RE.match(v):
        return True
    if _VARREF_RE.match(v) or _SPECIAL_TOKEN_VALUE.match(v) or _VERSION_RE.match(v):
        return True
    if _PATH_RE.match(v) and not any(c in v for c in "@+="):    # base64 may start with '/'
        return True
    if _URL_RE.match(v):
        # a URL is only secret by its password or signed query (caught as shapes)
        return not any(rx.search(v) for kind, rx, _ in TOKEN_SHAPES
                       if kind in ("url-password", "url-signature", "slack-webhook"))
    return False


_TOKEN_ALPHABET = re.compile(r"^[A-Za-z0-9+/=_\-.~:]+$")
_HEX = re.compile(r"^[0-9a-fA-F]{32,}$")


def looks_random(value: str) -> bool:
    """A machine-generated credential: long, token alphabet, mixed case and digits (or hex)."""
    v = value.strip().strip("\"'")
    if len(v) < 16 or not _TOKEN_ALPHABET.match(v):
        return False
    if _HEX.match(v):
        return True
    classes = sum(bool(re.search(p, v)) for p in (r"[a-z]", r"[A-Z]", r"\d"))
    if classes < 3:
        return False
    counts: dict[str, int] = {}
    for ch in v:
        counts[ch] = counts.get(ch, 0) + 1
    entropy = -sum(c / len(v) * math.log2(c / len(v)) for c in counts.values())
    return entropy >= 3.0


def value_is_secret(name: str | None, value: str, env_style: bool) -> bool:
    """Is `value`, found under `name`, a secret? env_style: an environment/metadata key."""
    strength = credential_strength(name)
    if strength == 0 or is_trivial_value(value):
        return False
    if strength == 2 and env_style:
        return True
    if strength == 2:
        return len(value.strip().strip("\"'")) >= 6
    return looks_random(value)


_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


def env_style_name(name: str) -> bool:
    return bool(_ENV_NAME.match(name))


# ----------------------------------------------------------------------------------------
# 3. Personal data
# ----------------------------------------------------------------------------------------
USER_KEYS = frozenset({
    "USER", "LOGNAME", "USERNAME", "SUDO_USER", "SLURM_JOB_USER", "PBS_O_LOGNAME", "LSB_USER",
    "EXPORT_USER", "GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "username", "user_name",
    "tw_user", "userName", "user"})
HOST_KEYS = frozenset({
    "HOSTNAME", "HOST", "COMPUTERNAME", "EXPORT_HOST", "Hostname", "DEVICE_DISPLAY_NAME",
    "SLURMD_NODENAME", "SLURM_SUBMIT_HOST", "SLURM_TOPOLOGY_ADDR", "SLURM_NODELIST",
    "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST", "PBS_O_HOST", "SSH_CONNECTION",
    "SSH_CLIENT", "host_name", "hostname", "hostName", "host"})
NOT_PERSONAL = frozenset({"root", "localhost", "localhost.localdomain", "(null)", "null",
                          "none", "unknown", "local", "local (cli)", "127.0.0.1", "::1"})
NAME_STOPLIST = frozenset({
    "root", "user", "users", "admin", "ubuntu", "debian", "centos", "fedora", "nvidia", "cuda",
    "torch", "python", "docker", "runner", "jenkins", "test", "tests", "guest", "nobody",
    "home", "shared", "local", "linux", "default", "public", "work", "workspace", "data",
    "build", "master", "main", "node", "host", "server", "train", "model", "kernel", "device",
    "true", "false", "none", "null", "unknown"})
_HOME_RE = re.compile(
    r"(?<![\w.\-/])(?:/home|/Users|/usr/home|/export/home|/shared/home|/data/home|/mnt/home|"
    r"/gpfs/home|/global/homes/[a-z]|/global/u[0-9]/[a-z]|/var/mail|/var/spool/mail)"
    r"/([A-Za-z0-9_][A-Za-z0-9._\-]*)"
    r"|(?<![\w])[A-Za-z]:[\\/]+(?:Users|Documents and Settings)[\\/]+([A-Za-z0-9_][A-Za-z0-9._\- ]*?)(?=[\\/]|$|[\s\"'\x00])")
_HOME_SKIP = frozenset({"shared", "public", "default", "all users", "default user",
                        "linuxbrew", "user", "username", "runner"})
_EMAIL_RE = re.compile(r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,24}\b")
_IP_RE = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b|\b[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{0,4}){2,7}\b")


def personal_key_kind(name: str | None, path_hint: str = "") -> str | None:
    if not name:
        return None
    if name in USER_KEYS:
        return "user-name"
    if name in HOST_KEYS:
        return "host-name"
    if name == "node" and path_hint.endswith("uname"):
        return "host-name"
    return None


def _personal_value_ok(value: str) -> bool:
    v = value.strip().strip("\"'")
    return bool(v) and v.lower() not in NOT_PERSONAL and not is_marker(v) and len(v) <= 256


# ----------------------------------------------------------------------------------------
# 4. One string -> matches
# ----------------------------------------------------------------------------------------
_SEGMENT = re.compile(r"[^\x00\n\r]+")
_ENV_ASSIGN = re.compile(r"^[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_.\-]*)=(.*)$", re.S)
_INLINE_ASSIGN = re.compile(
    r"(?<![A-Za-z0-9_.\-])(?:--?)?([A-Za-z_][A-Za-z0-9_.\-]{1,127})[\"']?[ \t]*(=|:)(?![=:])[ \t]*[\"']?"
    r"([^\s\"'&;,\x00<>(){}\[\]|=:][^\s\"'&;,\x00<>(){}\[\]|]*)")
_FLAG_SPACE = re.compile(r"(?<!\S)--?([A-Za-z][A-Za-z0-9_\-]{1,127})[ \t]+([^\s\-\x00\"'][^\s\x00\"']*)")
#: Cheap pre-check (lower-case literals, searched with `in`, which is far faster than one big
#: regex alternation): a string containing none of them cannot yield a match.
SECRET_NEEDLES = (
    "token", "secret", "pass", "cred", "key", "auth", "private", "bearer", "akia", "asia",
    "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "hf_", "xox", "sk-",
    "_live_", "aiza", "npm_", "pypi-", "eyj", "://", "sig=")
PERSONAL_NEEDLES = (
    "/home/", "users", "/global/", "mail/", "@", "user=", "name=", "host=", "addr=",
    "nodelist=", "ssh_c")
#: JSON object keys that make a raw trace event worth decoding (top-level values other than
#: the event array, where tools put their metadata, are always decoded)
JSON_KEY_NEEDLES = ('"user":', '"username":', '"user_name":', '"tw_user":', '"logname":',
                    '"hostname":', '"host_name":', '"host":')
_CRED_WORDS = ("token", "secret", "passw", "passphrase", "cred", "key", "auth", "private")
_HOME_NEEDLES = ("/home/", "users", "/export/home", "/shared/home", "/data/home", "/mnt/home",
                 "/gpfs/home", "/global/", "/var/mail/", "/var/spool/mail/")


def suspect(text: str, personal: bool = True) -> bool:
    """Could `text` hold a match at all? (exact: False means find_matches finds nothing)."""
    low = text.lower()
    if any(n in low for n in SECRET_NEEDLES):
        return True
    return personal and any(n in low for n in PERSONAL_NEEDLES)


_SHAPE_GATES: dict[str, tuple[str, ...]] = {
    "private-key": ("private key",), "aws-access-key-id": ("akia", "asia"),
    "github-token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab-token": ("glpat-",), "huggingface-token": ("hf_",),
    "slack-webhook": ("hooks.slack.com",), "slack-token": ("xox",),
    "anthropic-key": ("sk-ant-",), "openai-key": ("sk-",), "stripe-key": ("_live_",),
    "google-api-key": ("aiza",), "npm-token": ("npm_",), "pypi-token": ("pypi-",),
    "jwt": ("eyj",), "bearer-token": ("bearer", "authorization"), "url-password": ("://",),
    "url-signature": ("?",),
}


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start] in " \t\"'":
        start += 1
    while end > start and text[end - 1] in " \t\"'":
        end -= 1
    return start, end


@lru_cache(maxsize=65536)
def _strength(name: str) -> int:
    return credential_strength(name)


def find_matches(text: str, key: str | None = None, path_hint: str = "",
                 personal: bool = True) -> list[Match]:
    """Every secret (and, with personal=True, personal-data) span in `text`.

    key: the name `text` is stored under (a JSON object key, the `name` column of a key/value
    row); path_hint: where it is (used for `uname.node`).
    """
    out: list[Match] = []
    if key is not None and text:
        if value_is_secret(key, text, env_style=True):
            s, e = _strip_span(text, 0, len(text))
            out.append(Match(s, e, "env-credential", SECRET, key, 5))
        elif personal:
            pk = personal_key_kind(key, path_hint)
            if pk and _personal_value_ok(text) and "\x00" not in text and "\n" not in text:
                s, e = _strip_span(text, 0, len(text))
                out.append(Match(s, e, pk, PERSONAL, key, 1))
    if not text:
        return out
    low = text.lower()
    any_secret = any(n in low for n in SECRET_NEEDLES)
    any_personal = personal and any(n in low for n in PERSONAL_NEEDLES)
    if not (any_secret or any_personal):
        return _resolve(out)
    if any_secret:
        for kind, rx, group in TOKEN_SHAPES:
            if not any(g in low for g in _SHAPE_GATES[kind]):
                continue
            for m in rx.finditer(text):
                s, e = m.span(group)
                if e > s and _shape_ok(kind, m.group(group)):
                    out.append(Match(s, e, kind, SECRET, None, 10))
    # NAME=VALUE at the start of a line / NUL-separated segment (environment blocks)
    env_spans: list[tuple[int, int]] = []
    if "=" in text:
        for seg in _SEGMENT.finditer(text):
            m = _ENV_ASSIGN.match(seg.group())
            if not m:
                continue
            name = m.group(1)
            vs, ve = seg.start() + m.start(2), seg.start() + m.end(2)
            value = text[vs:ve]
            env_style = env_style_name(name)
            if _strength(name) and value_is_secret(name, value, env_style=env_style):
                s, e = _strip_span(text, vs, ve)
                out.append(Match(s, e, "env-credential" if env_style else "inline-credential",
                                 SECRET, name, 5))
                env_spans.append((vs, ve))
            elif personal and env_style:
                pk = personal_key_kind(name)
                if pk and _personal_value_ok(value):
                    s, e = _strip_span(text, vs, ve)
                    if name in ("SSH_CONNECTION", "SSH_CLIENT"):
                        for ip in _IP_RE.finditer(value):
                            out.append(Match(vs + ip.start(), vs + ip.end(), pk, PERSONAL, name, 1))
                    else:
                        out.append(Match(s, e, pk, PERSONAL, name, 1))
    # inline name=value / name: value / --name value in free text
    if any_secret and any(w in low for w in _CRED_WORDS):
        for rx, vgroup in ((_INLINE_ASSIGN, 3), (_FLAG_SPACE, 2)):
            for m in rx.finditer(text):
                name = m.group(1)
                strength = _strength(name)
                if strength == 0:
                    continue
                s, e = m.span(vgroup)
                if any(a <= s < b for a, b in env_spans):
                    continue
                sep = m.group(2) if rx is _INLINE_ASSIGN else " "
                if sep != "=" and strength < 2:
                    continue
                if value_is_secret(name, m.group(vgroup), env_style=False):
                    out.append(Match(s, e, "inline-credential", SECRET, name, 4))
    if any_personal:
        if any(n in low for n in _HOME_NEEDLES):
            for m in _HOME_RE.finditer(text):
                g = 1 if m.group(1) is not None else 2
                who = m.group(g)
                if who and who.lower() not in _HOME_SKIP and who.lower() != "root" \
                        and not who.startswith(("<", "$", "%")):
                    out.append(Match(m.start(g), m.end(g), "home-path", PERSONAL, None, 2))
        if "@" in text:
            for m in _EMAIL_RE.finditer(text):
                local = m.group().partition("@")[0]
                if not local.startswith(("-", ".")):
                    out.append(Match(m.start(), m.end(), "email", PERSONAL, None, 1))
    return _resolve(out)


@lru_cache(maxsize=32768)
def _find_cached(text: str, key: str | None, path_hint: str, personal: bool) -> tuple[Match, ...]:
    return tuple(find_matches(text, key, path_hint, personal))


def find_matches_cached(text: str, key: str | None = None, path_hint: str = "",
                        personal: bool = True) -> list[Match]:
    """find_matches, memoised: traces repeat the same names and call stacks many times."""
    if len(text) > 65536:
        return find_matches(text, key, path_hint, personal)
    return list(_find_cached(text, key, path_hint, personal))


def _resolve(matches: list[Match]) -> list[Match]:
    """Merge overlapping matches into one span each: a secret wins over personal data, then
    the most specific kind (token shape > named credential > personal)."""
    if len(matches) <= 1:
        return matches
    matches.sort(key=lambda m: (m.start, -m.end))
    clusters: list[list[Match]] = []
    end = -1
    for m in matches:
        if clusters and m.start < end:
            clusters[-1].append(m)
            end = max(end, m.end)
        else:
            clusters.append([m])
            end = m.end
    out = []
    for c in clusters:
        if len(c) == 1:
            out.append(c[0])
            continue
        secrets = [m for m in c if m.category == SECRET]
        pool = secrets or c
        best = max(pool, key=lambda m: m.priority)
        name = next((m.name for m in sorted(pool, key=lambda m: -m.priority) if m.name), None)
        out.append(Match(min(m.start for m in pool), max(m.end for m in pool), best.kind,
                         best.category, name, best.priority))
    return out


# ----------------------------------------------------------------------------------------
# 5. Masking and replacing
# ----------------------------------------------------------------------------------------
def mask(secret: str, kind: str = "") -> str:
    """A printable stand-in: the public prefix plus one character, and the length.

    `hf_a…(37 chars)`; values of unknown shape show at most 2 characters (none when short).
    """
    n = len(secret)
    m = _PUBLIC_PREFIX.match(secret)
    if m and n >= 12:
        keep = min(len(m.group()) + 1, n // 2)
    elif kind in PERSONAL_MARKS:
        keep = 1 if n >= 4 else 0
    else:
        keep = 2 if n >= 16 else 0
    head = re.sub(r"[\x00-\x1f\x7f]", " ", secret[:keep])
    return f"{head}…({n} chars)"


def replacement(m: Match) -> str:
    return REDACTED if m.category == SECRET else PERSONAL_MARKS.get(m.kind, USER_MARK)


def apply(text: str, matches: Iterable[Match], paths: bool = False) -> str:
    """`text` with every secret span (and personal spans when paths=True) replaced."""
    parts: list[str] = []
    pos = 0
    for m in sorted(matches, key=lambda m: m.start):
        if m.category == PERSONAL and not paths:
            continue
        if m.start < pos:
            continue
        parts.append(text[pos:m.start])
        parts.append(replacement(m))
        pos = m.end
    if not parts:
        return text
    parts.append(text[pos:])
    return "".join(parts)


class NameSet:
    """User and host names discovered in a trace, replaced everywhere with paths=True."""

    def __init__(self, kinds: dict[str, str]):
        self.kinds = {n: k for n, k in kinds.items()
                      if len(n) >= 4 and n.lower() not in NAME_STOPLIST
                      and n.lower() not in NOT_PERSONAL and not is_marker(n)
                      and re.fullmatch(r"[A-Za-z0-9._\-]+", n)}
        names = sorted(self.kinds, key=len, reverse=True)
        self.regex = (re.compile(r"(?<![A-Za-z0-9_\-])(" + "|".join(map(re.escape, names))
                                 + r")(?![A-Za-z0-9_\-])") if names else None)

    def __bool__(self) -> bool:
        return self.regex is not None

    def sub(self, text: str) -> str:
        if self.regex is None or not text:
            return text
        return self.regex.sub(lambda m: HOST_MARK if self.kinds.get(m.group(1)) == "host-name"
                              else USER_MARK, text)


def scrub_string(text: str, paths: bool = False, names: NameSet | None = None,
                 key: str | None = None, path_hint: str = "") -> str:
    """Replace secrets (and with paths=True personal data and the `names`) in one string."""
    if not text:
        return text
    out = apply(text, find_matches(text, key=key, path_hint=path_hint, personal=paths), paths)
    if paths and names:
        out = names.sub(out)
    return out
