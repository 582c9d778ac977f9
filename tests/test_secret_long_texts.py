"""The secret scan of long texts (a rendered report, an environment block) looks for each
token shape only where its literal start occurs, and for NAME=VALUE and name=value
credentials only in the lines that hold a credential word (secrets/text_scan.LONG_TEXT). It must find exactly what the
plain scan (every regex over the whole text) finds: checked on random long texts built from
the secrets and near misses of test_secrets, overlapping starts, the characters that fold to
ASCII letters only under re's IGNORECASE, separators, and on real rendered reports."""
from __future__ import annotations

import random

import pytest

from conftest import REPO, run_cli
from test_secrets import NEGATIVES, POSITIVES
from tracelint.secrets import text_scan
from tracelint.secrets.token_shapes import SHAPE_STARTS, TOKEN_SHAPES

#: pieces that make the starts overlap, cut or fold oddly
ODD = ["xoxoxb-", "AKIASIA", "ASIAKIA", "sk-sk-ant-", "hf_hf_", "eyJeyJ", "-----BEGIN ",
       "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "bearer", "BEARER ",
       "Authorization: ", "auth", "\u0130", "\u0131", "\u017f", "\u212a", "beare\u017f",
       "authorızation: token ", "?", "&", "?token=", "&sig=", "=", ":", " --", "\x00", "\n",
       "\r", " ", "\t", '"', "'", "KEY", "Token", "passphrase=", "Bearer=", "credentials: ",
       "https://", "://", "@", "/home/alice/", "bob@example.com", "→", "ü", "HOSTNAME=node7",
       "ASIAQ2ZX7KD3M4N5P6R7", "\nBEARER=Zx8kQ2mN7pL4vR9tW3", "sk-" + "a1" * 12 + "-sk-" + "b2" * 12,
       "-----BEGIN EC PRIVATE KEY-----\n-----BEGIN EC PRIVATE KEY-----\nx"]


def _plain(text: str, personal: bool):
    """find_matches with every regex over the whole text (the long-text path off)."""
    saved = text_scan.LONG_TEXT
    text_scan.LONG_TEXT = 1 << 62
    try:
        return text_scan.find_matches(text, personal=personal)
    finally:
        text_scan.LONG_TEXT = saved


def _random_text(rng: random.Random, odd_folds: bool = True) -> str:
    """odd_folds=False: without the characters that make the scan fall back to whole-text
    regexes for case-insensitive shapes and NAME=VALUE lines (text_scan._ODD_FOLDS)."""
    pool = [t for t, _ in POSITIVES] + NEGATIVES + ODD
    if not odd_folds:
        pool = [p for p in pool if not any(c in p for c in text_scan._ODD_FOLDS)]
    out, n = [], 0
    while n < text_scan.LONG_TEXT + rng.randrange(3000):
        piece = rng.choice(pool)
        if rng.random() < 0.3:                       # cut a piece: starts without their end
            piece = piece[:rng.randrange(len(piece) + 1)]
        out.append(piece)
        out.append(rng.choice(["", "", " ", "\n", "\x00", ",", "_", "x", "-"]))
        n += len(piece) + 1
    return "".join(out)


@pytest.mark.parametrize("seed", range(60))
def test_long_texts_match_the_plain_scan(seed):
    text = _random_text(random.Random(seed), odd_folds=seed % 2 == 0)
    assert len(text) >= text_scan.LONG_TEXT
    for personal in (False, True):
        assert text_scan.find_matches(text, personal=personal) == _plain(text, personal)


def test_random_texts_do_hold_secrets():
    """The random texts exercise the scan: most of them hold several matches of many kinds."""
    kinds = set()
    for seed in range(60):
        text = _random_text(random.Random(seed), odd_folds=seed % 2 == 0)
        kinds |= {m.kind for m in text_scan.find_matches(text)}
    shapes = {k for _, k in POSITIVES}
    assert shapes <= kinds, shapes - kinds


@pytest.mark.parametrize("seed", range(20))
def test_shapes_and_segments_one_by_one(seed):
    """Each shape's matches are finditer's, overlapping starts skipped as finditer skips
    them; the lines read for NAME=VALUE are distinct lines of the text, in order, and every
    line whose name is a credential name is among them."""
    text = _random_text(random.Random(seed), odd_folds=seed % 4 == 0)
    scan = text_scan._LongText(text, text.lower())
    for _, rx, _ in TOKEN_SHAPES:
        assert [m.span() for m in scan.shape_matches(rx)] == [m.span() for m in rx.finditer(text)]
    lines = [(m.start(), m.group()) for m in text_scan._SEGMENT.finditer(text)]
    read = scan.credential_segments()
    if read is None:
        assert any(c in text for c in text_scan._ODD_FOLDS)
        return
    assert read == sorted(set(read)) and set(read) <= set(lines)
    for at, line in lines:
        m = text_scan._ENV_ASSIGN.match(line)
        if m and text_scan._strength(m.group(1)):
            assert (at, line) in read
    for rx in (text_scan._INLINE_ASSIGN, text_scan._FLAG_SPACE):
        named = [m.span() for m in rx.finditer(text) if text_scan._strength(m.group(1))]
        got = [m.span() for m in scan.line_matches(rx)]
        assert got == sorted(set(got)) and set(named) <= set(got)
        assert set(got) <= {m.span() for m in rx.finditer(text)}


def test_every_shape_has_its_starts():
    assert set(SHAPE_STARTS) == {rx for _, rx, _ in TOKEN_SHAPES}
    for text, kind in POSITIVES:
        for m in text_scan.find_matches(text.rjust(text_scan.LONG_TEXT), personal=False):
            assert m.kind == kind


@pytest.mark.parametrize("fmt", ["json", "markdown", "sarif", "html", "terminal"])
def test_rendered_reports_match_the_plain_scan(fmt, tmp_path):
    """A real report, unscrubbed, with planted secrets appended in its own format's lines."""
    out = tmp_path / "report"
    r = run_cli("lint", str(REPO / "fixtures/examples/training_step_antipatterns.json.gz"), "-f", fmt, "-o", str(out), "--no-scrub",
                "--fail-on", "never")
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert len(text) > 10 * text_scan.LONG_TEXT
    text += "\n" + "\n".join(t for t, _ in POSITIVES) + "\n"
    for personal in (False, True):
        found = text_scan.find_matches(text, personal=personal)
        assert found == _plain(text, personal)
        assert {m.kind for m in found} >= {k for _, k in POSITIVES}
