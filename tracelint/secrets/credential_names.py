"""Secrets 2: credential-looking names (HF_TOKEN, apiKey, --password) and the values under
them that cannot be secrets (markers, booleans, numbers, paths, versions, plain URLs) or
must look random. The heuristics as a whole: patterns.py."""
from __future__ import annotations

import math
import re

from .token_shapes import TOKEN_SHAPES

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
