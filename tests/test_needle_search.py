"""The numpy needle search (secrets/needle_search) behind the secret gate over many texts
finds exactly the texts that a search for each needle in each text finds: on random texts
with planted needles, at chunk edges, with one-character, overlapping, repeated and non-ASCII
needles, and on the names of a real trace."""
from __future__ import annotations

import random
import string

import numpy as np
import pytest

from tracelint.secrets import needle_search, text_scan as T

from conftest import BUNDLED


def _want(needles, texts):
    return [i for i, t in enumerate(texts) if any(n in t for n in needles)]


def _random_texts(seed: int, n: int, planted: list[str]) -> list[str]:
    rng = random.Random(seed)
    alphabet = string.ascii_lowercase + string.digits + ":/_-=@.?, \x00"
    texts = []
    for _ in range(n):
        t = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        if rng.random() < 0.02:           # a needle somewhere, maybe cut short
            k = rng.randrange(len(t) + 1)
            p = rng.choice(planted)
            t = t[:k] + p[:rng.randint(1, len(p))] + t[k:]
        texts.append(t)
    return texts


NEEDLES = list(T.SECRET_NEEDLES + T.PERSONAL_NEEDLES)


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_the_numpy_search_finds_what_a_search_per_text_finds(monkeypatch, chunk):
    monkeypatch.setattr(needle_search, "CHUNK", chunk)       # needles across chunk edges
    monkeypatch.setattr(T, "NUMPY_FROM", 0)
    extra = ["aa", "aaa", "a", "keykey", "é", "xx\u00e9"]    # overlaps, repeats, not ASCII
    texts = _random_texts(11, 5000, NEEDLES + extra[:4]) + ["aaaa", "keykeykey", "", "k", "ssh_"]
    assert "\x00".join(texts).isascii()                     # the numpy path
    for needles in (NEEDLES, extra, ["@"], ["sk-", "sk-ant-"], ["ssh_c"]):
        assert T.containing(needles, texts) == _want(needles, texts), needles
    lowered = [t.lower() for t in texts]
    assert T.suspects(texts) == _want(NEEDLES, lowered)
    assert T.suspects(texts, personal=False) == _want(T.SECRET_NEEDLES, lowered)
    texts += ["é", "xxé"]                                     # str.find, text by text
    assert T.containing(extra, texts) == _want(extra, texts)


def test_starts_gives_every_occurrence_once():
    text = "keykey@sk-ant-@@"
    got = needle_search.starts(text, ["key", "eyk", "@", "sk-", "sk-ant-", "ant"])
    want = sorted({i for n in ["key", "eyk", "@", "sk-", "sk-ant-", "ant"]
                   for i in range(len(text)) if text.startswith(n, i)})
    assert got.tolist() == want
    assert needle_search.starts(text, ["é", "zz"]).dtype == np.int64
    assert not len(needle_search.starts(text, ["é", "zz"]))


def test_the_gate_on_a_real_traces_names_and_with_upper_case():
    import tracelint
    tl = tracelint.load(BUNDLED / "nsys" / "nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite")
    names = [str(x) for t in ("kernels", "api_calls", "ranges")
             for x in tl.table(t)["name"].cat.categories]
    planted = ["x/HOME/alice", "Bearer abc", "API_KEY=1", "İstanbul token"]   # İ: lower() grows
    texts = names * max(1, (1 << 17) // max(1, sum(map(len, names)))) + planted
    assert len("\x00".join(texts)) >= T.NUMPY_FROM                  # the numpy path
    lowered = [t.lower() for t in texts]
    assert T.suspects(texts) == _want(NEEDLES, lowered)
    assert T.suspects(texts[:-1]) == _want(NEEDLES, lowered[:-1])    # all ASCII: joined lower()
