"""The numba columnar scan that bench/bench_json_parsers.py times against the msgspec route
must read the same values, or its time says nothing: every event's ts and dur (exact ns),
integer pid and tid, args correlation and External id, name and category on the bundled
Kineto traces, against msgspec decoding with the importer's own value conversion."""
from __future__ import annotations

import gzip
import sys
from pathlib import Path

import msgspec
import numpy as np
import pytest

from tracelint.importers.kineto_values import us_to_ns

pytest.importorskip("numba")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import json_scan_prototype as proto  # noqa: E402

TRACES = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "real" / "torch")
                .glob("*.json.gz"))


def _expected(events: list[dict], key: str, scale_ns: bool) -> np.ndarray:
    vals = [e.get(key) for e in events]
    if scale_ns:
        ns, ok = us_to_ns([v if isinstance(v, (int, bytes)) else -1 for v in vals])
        return np.where(ok & [isinstance(v, (int, bytes)) for v in vals], ns, -1)
    return np.array([v if isinstance(v, int) and not isinstance(v, bool) else -1 for v in vals])


@pytest.mark.parametrize("path", TRACES, ids=[p.name.split(".")[0] for p in TRACES])
def test_scan_reads_what_msgspec_reads(path):
    data = gzip.decompress(path.read_bytes())
    top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    if "traceEvents" not in top:
        pytest.skip("a bare event array")
    events = msgspec.json.Decoder(float_hook=str.encode).decode(top["traceEvents"])
    ints, spans, codes = proto.columns(data)
    assert ints.shape[1] == len(events)
    for row, key, ns in ((0, "ts", True), (1, "dur", True), (2, "pid", False), (3, "tid", False)):
        want = _expected(events, key, ns)
        if key == "dur":                   # the scan writes -1 for a missing dur
            want = np.where([("dur" in e) for e in events], want, -1)
        numeric = want >= 0
        assert np.array_equal(ints[row][numeric], want[numeric]), key
    for row, key in ((4, "correlation"), (5, "External id")):
        args = [e.get("args") if isinstance(e.get("args"), dict) else {} for e in events]
        want = _expected(args, key, False)
        assert np.array_equal(ints[row][want >= 0], want[want >= 0]), key
    names = [data[a:a + n].decode() for a, n in zip(spans[0], spans[1])]
    plain = [isinstance(e.get("name"), str) and "\\" not in data[a:a + n].decode()
             for e, a, n in zip(events, spans[0], spans[1])]
    assert [n for n, p in zip(names, plain) if p] == \
        [e["name"] for e, p in zip(events, plain) if p]
    assert len(np.unique(codes)) == len({data[a:a + n] for a, n in zip(spans[0], spans[1])})
