"""Which raw trace events the secret scan and redaction decode (secrets/json_slices
.suspicious_events): exactly those whose squeezed bytes hold a needle, found with one search
per needle over all events joined, on real traces and on events cut so that a needle would
straddle two of them."""
from __future__ import annotations

import random

import pytest

from conftest import TORCH_TRACES
from tracelint.secrets import json_slices as js


def _by_definition(raws, needles=js.BYTE_NEEDLES) -> list[int]:
    qs = [q for q in {js.squeeze(n) for n in needles} if q]
    return [i for i, r in enumerate(raws) if any(q in js.squeeze(r) for q in qs)]


def _events(path):
    data, _ = js.read_json_bytes(path)
    kind, top = js.split_json(path, data)
    return js.events_of(kind, top)[1]


@pytest.mark.parametrize("path", TORCH_TRACES, ids=lambda p: p.name)
def test_real_traces(path):
    events = _events(path)
    assert js.suspicious_events(events) == _by_definition(events)


def test_needles_at_the_edges_of_events_and_of_the_trigram_pieces():
    rng = random.Random(7)
    words = [b"ke", b"y", b"KEY", b"to", b"ken", b"T.O.K.E.N", b"\\u0074", b"\\/", b"@", b"us",
             b"ers", b'"host"', b":", b"hf_", b"12", b" ", b"\xc3\xa9", b"x" * 40, b"sk-", b"a"]
    raws = [b"".join(rng.choice(words) for _ in range(rng.randrange(0, 6))) for _ in range(3000)]
    got = js.suspicious_events(raws)
    assert got == _by_definition(raws) and 0 < len(got) < len(raws)
    assert js.suspicious_events([]) == []
    assert js.suspicious_events([b"ke", b"y"]) == []          # "key" only across two events
    names = (b"node7", b"alice")
    assert js.suspicious_events([b"x", b"NODE7", b"no de7"], names) == [1, 2]
    odd = [b"tok\x01en", b"key"]                   # not JSON: the slices squeezed one by one
    assert js.suspicious_events(odd) == [0, 1] == _by_definition(odd)


@pytest.mark.parametrize("batch", [1, 7, 40, 1 << 20])
def test_batches_of_any_size(monkeypatch, batch):
    """Slices are joined in batches of BATCH_BYTES: any cut gives the same slices."""
    rng = random.Random(batch)
    raws = [rng.choice([b"key", b"x" * rng.randrange(30), b"tok", b"en", b"hf_x"])
            for _ in range(500)]
    monkeypatch.setattr(js, "BATCH_BYTES", batch)
    assert js.suspicious_events(raws) == _by_definition(raws)


def test_long_data_spans_several_trigram_pieces():
    """The 3-byte table is filled in pieces of 4 MiB: a needle across a piece's end counts."""
    step = 1 << 22
    for cut in range(-4, 2):
        raws = [b"z" * (step + cut) + b"token", b"zz", b"qq" * step]
        assert js.suspicious_events(raws) == [0] == _by_definition(raws)
    raws = [b"z" * (step - 3), b"toke" + b"z" * step]
    assert js.suspicious_events(raws) == [] == _by_definition(raws)
