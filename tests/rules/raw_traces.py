"""Real shared traces read raw (JSON events with exact Decimal microseconds, or SQL),
independent of the importers, for the rules' real-trace cross-checks."""
from __future__ import annotations

import gzip
import json
from decimal import Decimal

from conftest import TRACES


TORCH = TRACES / "torch"
NSYS = TRACES / "nsys"


def raw_kineto(name):
    with gzip.open(TORCH / name, "rt") as fh:
        doc = json.load(fh, parse_float=Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    out = []
    for e in events:
        if e.get("ph") != "X" or "ts" not in e:
            continue
        s = int(Decimal(e["ts"]) * 1000)
        out.append(dict(e, s=s, e=s + int(Decimal(e.get("dur", 0)) * 1000)))
    return out


def load(path):
    import tracelint
    return tracelint.load(path)


def _ns(x) -> int:
    return int(Decimal(str(x)) * 1000)
