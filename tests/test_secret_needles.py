"""The secret scanner's first gate (text_scan: one regex alternation per needle list) says
exactly what a search for each needle says, on every needle and on random text."""
from __future__ import annotations

import random
import string

from tracelint.secrets import text_scan as T


def _any(needles, low: str) -> bool:
    return any(n in low for n in needles)


def test_the_needle_gate_equals_a_search_for_each_needle():
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + ":/_-=@.?, "
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 50))) for _ in range(20000)]
    texts += [f"x{n}y" for n in T.SECRET_NEEDLES + T.PERSONAL_NEEDLES]
    texts += [n[:-1] for n in T.SECRET_NEEDLES + T.PERSONAL_NEEDLES if len(n) > 1]
    hits = 0
    for text in texts:
        low = text.lower()
        want = _any(T.SECRET_NEEDLES, low) or _any(T.PERSONAL_NEEDLES, low)
        assert T.suspect(text) == want, text
        assert T.suspect(text, personal=False) == _any(T.SECRET_NEEDLES, low), text
        hits += want
    assert 0 < hits < len(texts)
