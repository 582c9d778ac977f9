"""Gzip traces inflate to the same bytes, with the same one-line errors, through python-isal
(the `fast` extra) as through the standard library's zlib (tracelint.io.inflater); the ends of
the text kept while staging one (io.TextEnds) are its ends."""
from __future__ import annotations

import gzip
import zlib

import pytest
from conftest import TRACES, trace_or_skip

from tracelint import io
from tracelint.errors import TraceFormatError

isal_zlib = pytest.importorskip("isal.isal_zlib")

REAL = "hta_v100_rank0of1.pt.trace.json.gz"


@pytest.fixture(params=["zlib", "isal"])
def inflate(request, monkeypatch):
    module = zlib if request.param == "zlib" else isal_zlib
    monkeypatch.setattr(io, "inflater", lambda: module)
    return module


def test_isal_is_chosen_where_installed_unless_turned_off(monkeypatch):
    assert io.inflater() is isal_zlib
    monkeypatch.setenv("TRACELINT_ISAL", "0")
    assert io.inflater() is zlib


def test_a_real_trace_inflates_to_the_same_bytes(inflate):
    src = trace_or_skip(TRACES / "torch" / REAL)
    data = src.read_bytes()
    blocks = list(io.gunzip_blocks(data, src, block=1 << 16))
    assert max(map(len, blocks)) <= 1 << 16
    assert b"".join(blocks) == gzip.decompress(data)


def test_members_padding_and_trailing_garbage(inflate, tmp_path):
    one, two = b'{"traceEvents": [' * 50, b"]}" * 70
    # two members, zero padding between them (as tape archives pad), then bytes that are not
    # gzip: read as gzip reads them, the garbage ignored
    data = gzip.compress(one) + b"\x00" * 7 + gzip.compress(two) + b"not gzip"
    assert io.gunzip_capped(data, tmp_path / "t.json.gz") == one + two


@pytest.mark.parametrize("damage, says", [
    ("truncated", "truncated gzip data"),
    ("corrupt", "truncated or corrupt gzip data"),
    ("bomb", "a decompression bomb?"),
])
def test_bad_gzip_is_one_line_either_way(inflate, tmp_path, monkeypatch, damage, says):
    text = b'{"traceEvents": [' + b'{"ph": "X", "name": "k", "ts": 1, "dur": 1},' * 20_000 + b"]}"
    data = gzip.compress(text)
    if damage == "truncated":
        data = data[:len(data) // 2]
    elif damage == "corrupt":
        data = data[:40] + bytes(b ^ 0x5A for b in data[40:80]) + data[80:]
    else:
        monkeypatch.setenv("TRACELINT_GZIP_MAX_BYTES", str(len(text) // 2))
    with pytest.raises(TraceFormatError) as err:
        io.gunzip_capped(data, tmp_path / "t.json.gz")
    assert says in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("sizes", [[10], [3, 3, 3, 3], [1, 7, 2, 9, 4, 4, 1], [25], [0, 5, 0, 6]])
def test_text_ends_keeps_the_first_and_last_window_of_any_blocks(sizes):
    """The ends the quick secret scan reads of a staged gzip trace, whatever the blocks."""
    text = bytes(range(256))
    blocks, at = [], 0
    for n in sizes:
        blocks.append(text[at:at + n])
        at += n
    seen = text[:at]
    ends = io.TextEnds(window=6)
    for b in blocks:
        ends.add(b)
    assert ends.ends() == (seen[:6], seen[-6:])
