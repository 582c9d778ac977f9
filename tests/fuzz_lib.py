"""A seeded mutation fuzzer for tracelint's input loaders (shared by tests/test_fuzz.py and
scripts/fuzz.py): Kineto JSON, nsys SQLite, tracelint.toml and findings baselines.

Each case mutates a valid seed (from the synthetic generator) with a seeded RNG, loads it, and
checks the contract: the loader returns or raises TracelintError with a one-line message; no other
exception; the input file is never modified. Memory is bounded by the small seeds and the gzip cap.
"""
from __future__ import annotations

import copy
import hashlib
import json
import random
import shutil
import sqlite3
from pathlib import Path

from tracelint.errors import TracelintError

JUNK = [None, True, -1, 0, 2**63, -2**80, 1e308, float("inf"), float("nan"), "", "x" * 300,
        "\x1b[2J\u202e", [], [1, 2], {}, {"a": [1]}, "ProfilerStep#99999999999999999999", 3.7]


def planted_trace(folder: Path, names: dict[str, str], device: str) -> tuple[Path, Path]:
    """A small synthetic trace (Kineto JSON and nsys SQLite) with `names` planted in an
    annotation, an op and two kernel names; also the fuzzer's seed."""
    from tracelint.synth import TraceBuilder
    b = TraceBuilder(device_name=device, pid=1000)
    vals = list(names.values())
    for i in range(4):
        with b.step(i):
            with b.range(f"fwd {vals[0]}"):
                with b.op(f"aten::mm_{vals[1 % len(vals)]}"):
                    b.launch(f"gemm_kernel_{vals[2 % len(vals)]}", 20_000 + i * 100)
                    b.launch(f"sgemm {vals[3 % len(vals)]} {vals[4 % len(vals)]}", 5_000)
                b.copy("H2D", 1 << 16, 5_000)
            b.sync("cudaDeviceSynchronize")
            b.advance(50_000)
    j, s = folder / "planted.json", folder / "planted.sqlite"
    b.write_kineto(j)
    b.write_nsys_sqlite(s)
    return j, s


def seeds(folder: Path) -> tuple[Path, Path]:
    return planted_trace(folder, {"a": "x"}, "NVIDIA H100 80GB HBM3")


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def check_load(path: Path, loader) -> str:
    """Run `loader(path)`; 'ok' or 'error'; raise AssertionError on a broken contract."""
    before = _digest(path)
    try:
        loader(path)
        outcome = "ok"
    except TracelintError as exc:
        msg = str(exc)
        assert "\n" not in msg and len(msg) <= 2000, f"{path.name}: message not one bounded line: {msg[:300]!r}"
        outcome = "error"
    assert _digest(path) == before, f"{path.name}: the input changed"
    return outcome


def _mutate_value(rng: random.Random, v):
    r = rng.random()
    if r < 0.5:
        return copy.deepcopy(rng.choice(JUNK))
    if isinstance(v, str) and r < 0.7:
        return v + rng.choice(["\x00", "\udcff"[:0] + "\ufeff", "\u2028", "é" * 3, "]"])
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return rng.choice([-v, v * 10**12, v / 3, str(v)])
    return {"nested": v}


def mutate_kineto(seed: bytes, rng: random.Random) -> bytes:
    """Type-valid-ish mutations of the JSON document, or byte-level damage."""
    if rng.random() < 0.2:                       # byte level: truncate, flip, insert
        b = bytearray(seed)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            op = rng.random()
            if op < 0.4:
                b[i] = rng.randrange(256)
            elif op < 0.7:
                del b[i:i + rng.randint(1, 50)]
            else:
                b[i:i] = rng.choice([b"{", b"[", b'"', b"\xff", b"\xef\xbb\xbf", b"1e999"])
        return bytes(b)
    doc = json.loads(seed)
    for _ in range(rng.randint(1, 6)):
        events = doc.get("traceEvents")
        events = events if isinstance(events, list) else []
        target = rng.random()
        if target < 0.7 and events:
            e = rng.choice(events)
            if isinstance(e, dict) and e:
                k = rng.choice(list(e) + ["ts", "dur", "ph", "pid", "tid", "args", "cat", "name"])
                e[k] = _mutate_value(rng, e.get(k))
        elif target < 0.85:
            k = rng.choice(["deviceProperties", "distributedInfo", "traceEvents", "schemaVersion"])
            doc[k] = _mutate_value(rng, doc.get(k))
        elif events:
                events.insert(rng.randrange(len(events)), copy.deepcopy(rng.choice(JUNK)))
    return json.dumps(doc, allow_nan=True).encode()


def mutate_sqlite(seed: Path, dst: Path, rng: random.Random) -> None:
    """Values of random columns replaced by values of other storage types."""
    shutil.copyfile(seed, dst)
    con = sqlite3.connect(dst)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for _ in range(rng.randint(1, 4)):
        t = rng.choice(tables)
        cols = [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]
        if not cols:
            continue
        c = rng.choice(cols)
        v = rng.choice([None, "abc", 9e999, -9e999, b"\x00\xff", "\udcff".encode("utf-8", "surrogatepass"),
                        2**62, -1, 1.5, "\u202e"])
        try:
            con.execute(f'UPDATE "{t}" SET "{c}" = ? WHERE rowid IN (SELECT rowid FROM "{t}" '
                        f'ORDER BY random() LIMIT {rng.randint(1, 3)})', (v,))
        except sqlite3.Error:
            pass
    if rng.random() < 0.1 and "StringIds" in tables:
        con.execute("DROP TABLE StringIds")
    con.commit()
    con.close()


TOML_KEYS = ["select", "ignore", "fail-on", "rules-dirs", "baseline", "case-libraries", "unknown"]
TOML_VALUES = ['5', '[5]', '"x"', '["ALL"]', '"abc"', '1e400', 'true', '[]', '{a = 1}', '"warning"',
               '"\\u202e"', '[[1]]', '-0', '2.9']


def random_toml(rng: random.Random) -> str:
    lines = ["[tool.tracelint]"]
    for k in rng.sample(TOML_KEYS, rng.randint(0, 3)):
        lines.append(f"{k} = {rng.choice(TOML_VALUES)}")
    if rng.random() < 0.5:
        lines.append("[tool.tracelint.severity]")
        lines.append(f"TL00{rng.randint(1, 9)} = {rng.choice(TOML_VALUES)}")
    if rng.random() < 0.6:
        lines.append("[tool.tracelint.rules.launch-gap]")
        lines.append(f"{rng.choice(['min_gap_ns', 'min_share', 'top', 'bogus'])} = {rng.choice(TOML_VALUES)}")
    if rng.random() < 0.1:
        lines.append("[[[broken")
    return "\n".join(lines) + "\n"


def random_baseline(rng: random.Random) -> str:
    doc = {"version": 1, "findings": [{"fingerprint": "ab" * 8, "rule": "TL001", "key": "k"}]}
    for _ in range(rng.randint(1, 3)):
        where = rng.choice(["top", "finding", "list"])
        if where == "top":
            doc[rng.choice(["version", "findings", "x"])] = copy.deepcopy(rng.choice(JUNK))
        elif where == "finding" and isinstance(doc.get("findings"), list) and doc["findings"]:
            f = doc["findings"][0]
            if isinstance(f, dict):
                f[rng.choice(["fingerprint", "rule", "key"])] = copy.deepcopy(rng.choice(JUNK))
        elif isinstance(doc.get("findings"), list):
            doc["findings"].append(copy.deepcopy(rng.choice(JUNK)))
    return json.dumps(doc, allow_nan=True)


def mutate_doc(doc, rng: random.Random, times: int = 3):
    """A JSON document with `times` random nodes (any depth) replaced by junk values."""
    doc = json.loads(json.dumps(doc))
    for _ in range(times):
        node, key = doc, None
        for _ in range(rng.randint(1, 5)):
            kids = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) \
                if isinstance(node, list) else []
            if not kids:
                break
            k, v = rng.choice(kids)
            if not isinstance(v, (dict, list)) or rng.random() < 0.3:
                node, key = node, k
                break
            node, key = v, None
        if key is not None:
            node[key] = copy.deepcopy(rng.choice(JUNK))
    return doc


def perf_baseline_seed(trace: Path) -> dict:
    """A real performance baseline (`tracelint baseline save`) of the seed trace."""
    from tracelint.analysis.buckets import profile
    from tracelint.analysis.perf_baseline import make_baseline
    from tracelint.importers import load
    return json.loads(json.dumps(make_baseline([profile(load(trace))]), default=str))


def run(folder: Path, n: int, seed: int = 0) -> dict[str, dict[str, int]]:
    """n cases per loader; returns outcome counts. Raises AssertionError on a broken contract."""
    from tracelint.engine.baseline import read_baseline
    from tracelint.engine.config import load_config
    from tracelint.rules import builtin_rules
    from tracelint.importers import load
    folder.mkdir(parents=True, exist_ok=True)
    j, s = seeds(folder)
    rng = random.Random(seed)
    counts: dict[str, dict[str, int]] = {}
    rules = builtin_rules()
    from tracelint.analysis.perf_baseline import read_metrics_baseline
    perf = perf_baseline_seed(j)

    def config_loader(p):
        load_config(str(p)).validate(rules)

    def tally(kind, outcome):
        counts.setdefault(kind, {}).setdefault(outcome, 0)
        counts[kind][outcome] += 1

    seed_json = j.read_bytes()
    for i in range(n):
        p = folder / f"k{i % 4}.json"
        p.write_bytes(mutate_kineto(seed_json, rng))
        tally("kineto", check_load(p, load))
        q = folder / f"n{i % 4}.sqlite"
        mutate_sqlite(s, q, rng)
        tally("nsys", check_load(q, load))
        c = folder / f"c{i % 4}" / "tracelint.toml"
        c.parent.mkdir(exist_ok=True)
        c.write_text(random_toml(rng))
        tally("config", check_load(c, config_loader))
        b = folder / f"b{i % 4}.json"
        b.write_text(random_baseline(rng))
        tally("baseline", check_load(b, read_baseline))
        pb = folder / f"p{i % 4}.json"
        pb.write_text(json.dumps(mutate_doc(perf, rng, rng.randint(1, 4)), allow_nan=True))
        tally("perf-baseline", check_load(pb, read_metrics_baseline))
    return counts
