"""One string -> Matches: token shapes anywhere, NAME=VALUE segments of environment blocks,
a key/value row's value, inline name=value / --name value in free text, home paths and
e-mail addresses; overlapping matches merged into one span. The heuristics: patterns.py."""
from __future__ import annotations

import re
from bisect import bisect_right
from functools import cached_property, lru_cache
from itertools import accumulate
from typing import Iterable

from .credential_names import credential_strength, env_style_name, is_trivial_value, value_is_secret
from .kinds import PERSONAL, SECRET, Match
from .personal_data import (EMAIL_RE, HOME_RE, HOME_SKIP, IP_RE, personal_key_kind,
                            personal_value_ok)
from .token_shapes import SHAPE_STARTS, TOKEN_SHAPES

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
#: JSON keys of profilers' records that hold a needle but can neither match themselves nor make
#: their value match (tests/test_secret_needles.py checks both): the byte pre-filter ignores
#: them, or every rocprofv3 kernel dispatch ("private_segment_size") would be decoded and walked.
BENIGN_JSON_KEYS = ("private_segment_size",)
_CRED_WORDS = ("token", "secret", "passw", "passphrase", "cred", "key", "auth", "private")
_HOME_NEEDLES = ("/home/", "users", "/export/home", "/shared/home", "/data/home", "/mnt/home",
                 "/gpfs/home", "/global/", "/var/mail/", "/var/spool/mail/")


#: Each needle list as one alternation: a search of it is `any(n in low for n in NEEDLES)` in
#: one pass of C, not a Python step per needle (a trace of 332,000 distinct range names ran
#: 18.6 M of those steps per scan).
_SECRET_NEEDLE = re.compile("|".join(map(re.escape, SECRET_NEEDLES)))
_PERSONAL_NEEDLE = re.compile("|".join(map(re.escape, PERSONAL_NEEDLES)))
#: From this many characters of joined texts on, numpy searches them (needle_search).
NUMPY_FROM = 1 << 16


def suspect(text: str, personal: bool = True) -> bool:
    """Could `text` hold a match at all? (exact: False means find_matches finds nothing)."""
    low = text.lower()
    if _SECRET_NEEDLE.search(low):
        return True
    return personal and _PERSONAL_NEEDLE.search(low) is not None


#: What joins many texts into one for a single scan (suspects, containing, matching): no
#: needle, exact value or user/host name holds it, so no match of theirs spans two texts.
JOIN = "\x00"


def suspects(texts: list[str], personal: bool = True) -> list[int]:
    """The indexes of the texts for which suspect() holds, in order, found in them all at once:
    an emit_nvtx export's 340,000 text cells hold 18 suspects, and a call per text made the
    gate most of the scan's time."""
    needles = SECRET_NEEDLES + PERSONAL_NEEDLES if personal else SECRET_NEEDLES
    joined = JOIN.join(texts)
    if joined.isascii():             # lower() keeps every length: one call for all the texts
        return _found(needles, joined.lower(), texts)
    return containing(needles, [t.lower() for t in texts])   # lower() may change a length


def containing(needles: Iterable[str], texts: list[str]) -> list[int]:
    """The indexes of the texts that hold any of the needles, in order, from one search through
    the texts joined by JOIN. A needle that holds JOIN itself is looked for text by text."""
    needles = list(needles)
    if any(JOIN in n for n in needles):
        return [i for i, t in enumerate(texts) if any(n in t for n in needles)]
    return _found(needles, JOIN.join(texts), texts)


def _found(needles, joined: str, texts: list[str]) -> list[int]:
    """containing() over `joined` (the texts joined by JOIN, or a copy of the same lengths).
    A long ASCII text: numpy finds every needle at once (needle_search). Otherwise str.find,
    needle by needle, a step of Python per text found, not per text."""
    if not texts:
        return []
    if len(joined) >= NUMPY_FROM and joined.isascii() and all(needles):
        from .needle_search import starts
        at = starts(joined, list(needles))
        if not len(at):
            return []
        import numpy as np          # not at import: the light commands never scan
        ends = np.cumsum(np.fromiter(map(len, texts), np.int64, len(texts)) + 1)
        return np.unique(np.searchsorted(ends, at, side="right")).tolist()
    ends = list(accumulate(len(t) + 1 for t in texts))
    found: set[int] = set()
    for needle in needles:
        at = joined.find(needle)
        while at >= 0:
            i = bisect_right(ends, at)
            found.add(i)
            at = joined.find(needle, ends[i])
    return sorted(found)


def matching(rx: re.Pattern, texts: list[str]) -> list[int]:
    """The indexes of the texts in which `rx` finds a match, in order, from one pass over the
    texts joined by JOIN. Exact for a pattern none of whose matches can hold JOIN, and whose
    lookarounds, if any, treat JOIN as they treat a text's start and end."""
    joined, ends = _joined(texts)
    out: list[int] = []
    at = 0
    while (m := rx.search(joined, at)) is not None:
        i = bisect_right(ends, m.start())
        out.append(i)
        at = ends[i]                    # the next text: one match per text is all it takes
    return out


def _joined(texts: list[str]) -> tuple[str, list[int]]:
    """The texts joined by JOIN, and where each one's JOIN ends (the next text starts)."""
    return JOIN.join(texts), list(accumulate(len(t) + 1 for t in texts))


_HAS_DIGIT = re.compile(r"\d")
_HAS_ALPHA = re.compile(r"[A-Za-z]")


def _shape_ok(kind: str, secret: str) -> bool:
    """The per-kind checks a token-shape match must pass (shapes: token_shapes.py)."""
    if kind == "openai-key":
        body = secret.split("-", 1)[1]
        return bool(_HAS_DIGIT.search(body) and _HAS_ALPHA.search(body))
    if kind == "bearer-token":
        return bool(_HAS_DIGIT.search(secret)) or len(secret) >= 24
    if kind in ("url-password", "url-signature"):
        return not is_trivial_value(secret)
    return True


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
            if pk and personal_value_ok(text) and "\x00" not in text and "\n" not in text:
                s, e = _strip_span(text, 0, len(text))
                out.append(Match(s, e, pk, PERSONAL, key, 1))
    if not text:
        return out
    low = text.lower()
    any_secret = _SECRET_NEEDLE.search(low) is not None
    any_personal = personal and _PERSONAL_NEEDLE.search(low) is not None
    if not (any_secret or any_personal):
        return _resolve(out)
    long_text = _LongText(text, low) if len(text) >= LONG_TEXT else None
    if any_secret:
        for kind, rx, group in TOKEN_SHAPES:
            if not any(g in low for g in _SHAPE_GATES[kind]):
                continue
            for m in (long_text.shape_matches(rx) if long_text else rx.finditer(text)):
                s, e = m.span(group)
                if e > s and _shape_ok(kind, m.group(group)):
                    out.append(Match(s, e, kind, SECRET, None, 10))
    # NAME=VALUE at the start of a line / NUL-separated segment (environment blocks)
    env_spans: list[tuple[int, int]] = []
    if "=" in text:
        segments = long_text.credential_segments() if long_text and not personal else None
        for seg_start, seg in segments if segments is not None else (
                (s.start(), s.group()) for s in _SEGMENT.finditer(text)):
            m = _ENV_ASSIGN.match(seg)
            if not m:
                continue
            name = m.group(1)
            vs, ve = seg_start + m.start(2), seg_start + m.end(2)
            value = text[vs:ve]
            env_style = env_style_name(name)
            if _strength(name) and value_is_secret(name, value, env_style=env_style):
                s, e = _strip_span(text, vs, ve)
                out.append(Match(s, e, "env-credential" if env_style else "inline-credential",
                                 SECRET, name, 5))
                env_spans.append((vs, ve))
            elif personal and env_style:
                pk = personal_key_kind(name)
                if pk and personal_value_ok(value):
                    s, e = _strip_span(text, vs, ve)
                    if name in ("SSH_CONNECTION", "SSH_CLIENT"):
                        for ip in IP_RE.finditer(value):
                            out.append(Match(vs + ip.start(), vs + ip.end(), pk, PERSONAL, name, 1))
                    else:
                        out.append(Match(s, e, pk, PERSONAL, name, 1))
    # inline name=value / name: value / --name value in free text
    if any_secret and any(w in low for w in _CRED_WORDS):
        for rx, vgroup in ((_INLINE_ASSIGN, 3), (_FLAG_SPACE, 2)):
            for m in (long_text.line_matches(rx) if long_text and long_text.folds_plainly
                      else rx.finditer(text)):
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
            for m in HOME_RE.finditer(text):
                g = 1 if m.group(1) is not None else 2
                who = m.group(g)
                if who and who.lower() not in HOME_SKIP and who.lower() != "root" \
                        and not who.startswith(("<", "$", "%")):
                    out.append(Match(m.start(g), m.end(g), "home-path", PERSONAL, None, 2))
        if "@" in text:
            for m in EMAIL_RE.finditer(text):
                local = m.group().partition("@")[0]
                if not local.startswith(("-", ".")):
                    out.append(Match(m.start(), m.end(), "email", PERSONAL, None, 1))
    return _resolve(out)


#: From this length on, find_matches tries each token shape only where its literal start
#: occurs, and reads for named credentials only the lines that hold a credential word. The
#: same matches, found in a fraction of the time: the final scan of a lint's 250 KB JSON
#: report took 73 ms with a pass of every shape's regex over all of it.
LONG_TEXT = 1024
#: what every credential name (credential_names.credential_strength() > 0) holds, lower case
_NAME_WORDS = _CRED_WORDS + ("bearer",)
#: the characters that re's IGNORECASE matches to an ASCII letter other than by lower():
#: where one occurs, the lower-case text does not find every case-insensitive start
_ODD_FOLDS = ("\u0130", "\u0131", "\u017f", "\u212a")


class _LongText:
    """Where in a long text the matches can start (find_matches, from LONG_TEXT on)."""

    def __init__(self, text: str, low: str):
        self.text, self.low = text, low
        self.folds_plainly = len(low) == len(text) and not any(c in text for c in _ODD_FOLDS)

    def shape_matches(self, rx: re.Pattern):
        """rx.finditer(text), trying rx only where one of its starts occurs: the same matches,
        as finditer tries every position from the end of the previous match on."""
        starts = SHAPE_STARTS[rx]
        folded = bool(rx.flags & re.IGNORECASE)
        if starts is None or (folded and not self.folds_plainly):
            yield from rx.finditer(self.text)
            return
        hay = self.low if folded else self.text
        end = 0
        for at in sorted({i for s in starts for i in _find_all(hay, s)}):
            if at >= end and (m := rx.match(self.text, at)):
                yield m
                end = m.end()

    def credential_segments(self) -> list[tuple[int, str]] | None:
        """(start, text) of each NUL/line-separated segment that holds a credential word, in
        order: no other segment can be a credential NAME=VALUE. None: cannot tell."""
        if not self.folds_plainly:
            return None
        return [(lo, self.text[lo:hi]) for lo, hi in self._around_words("\x00\n\r")]

    def line_matches(self, rx: re.Pattern):
        """rx.finditer(text) for a regex whose matches never hold a line break and are
        credentials only where their name holds a credential word (the inline name=value
        scans): run over the lines with such a word, line break included."""
        for lo, hi in self._around_words("\n"):
            yield from rx.finditer(self.text, lo, hi + 1)

    def _around_words(self, breaks: str) -> list[tuple[int, int]]:
        """(start, end) of each distinct piece between `breaks` that holds a credential word
        (in the lower-case text: folds_plainly must hold)."""
        text, out, end = self.text, [], -1
        for at in self._words:
            if at < end:
                continue               # in the piece already taken
            lo = max(text.rfind(c, 0, at) for c in breaks) + 1
            ends = [e for e in (text.find(c, at) for c in breaks) if e >= 0]
            end = min(ends) if ends else len(text)
            out.append((lo, end))
        return out

    @cached_property
    def _words(self) -> list[int]:
        return sorted({i for w in _NAME_WORDS for i in _find_all(self.low, w)})


def _find_all(hay: str, needle: str):
    """Every start of needle in hay, overlapping ones too."""
    at = hay.find(needle)
    while at >= 0:
        yield at
        at = hay.find(needle, at + 1)


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
