"""The example programs in examples/, captured end to end on the CPU.

For each anti-pattern and its fixed twin: `tracelint capture` runs the program under
torch.profiler and lints it; the assertions check what a CPU trace CAN show, computed from the
trace itself (op counts per ProfilerStep, the Python line that issued them), and that tracelint
stays honest: a trace without GPU activity gets no GPU-rule finding.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, capture_example

torch = pytest.importorskip("torch")

import tracelint  # noqa: E402
from tracelint.engine.context import Context  # noqa: E402

pytestmark = pytest.mark.slow   # 8 captures, ~10-20 s each

EXAMPLES = REPO / "examples"
PAIRS = {
    "tiny_ops": ("tiny_ops_loop.py", "tiny_ops_fused.py"),
    "copy": ("pageable_copy.py", "pinned_copy.py"),
    "dequant": ("dequant_linear.py", "dequant_fused.py"),
    "transposes": ("transposes.py", "transposes_fixed.py"),
}
ALL = [ex for pair in PAIRS.values() for ex in pair]
#: Rules that measure GPU activity (kernels, copies, syncs, counters), and the one each pair is
#: about on a GPU. TL008 tail-latency is not one: it judges host ranges too, which a CPU trace has.
GPU_RULES = {"TL001", "TL002", "TL003", "TL004", "TL005", "TL006", "TL007", "TL009", "TL032", "TL033"}
TARGET_RULES = {"tiny_ops": ("TL001", "TL002"), "copy": ("TL004", "TL032"), "dequant": ("TL003",),
                "transposes": ("TL006",)}
STEPS = 3   # `tracelint capture` records 3 iterations by default (after 1 skipped + 1 warm-up)


def _line_of(path: Path, marker: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if marker in ln)


@dataclass
class Capture:
    example: str
    report: dict
    manifest: dict
    tl: object

    def __post_init__(self):
        self.ctx = Context(self.tl)
        r = self.tl.ranges
        self.ranges = r
        self.steps = r[r["kind"] == "step"].sort_values("start")

    def ops(self, start: int, end: int):
        """Framework ops (aten::... and the like) that start inside [start, end)."""
        r = self.ranges
        return r[(r["kind"] == "op") & (r["start"] >= start) & (r["start"] < end)].sort_values("start")

    def step_ops(self) -> list:
        return [self.ops(int(s), int(e)) for s, e in zip(self.steps["start"], self.steps["end"])]

    def frame(self, row) -> tuple[str, int, str] | None:
        """The innermost user-code Python frame that issued an op (what findings point at)."""
        return self.ctx.python_frame_at(int(row["pid"]), int(row["tid"]), int(row["start"]))

    def marker_line(self, marker: str) -> int:
        return _line_of(EXAMPLES / self.example, marker)

    def from_line(self, ops, line: int):
        """The ops whose Python frame is `line` of this example."""
        keep = [i for i, (_, row) in enumerate(ops.iterrows())
                if (f := self.frame(row)) is not None and f[0].endswith(self.example) and f[1] == line]
        return ops.iloc[keep]

    def children(self, position: int):
        """Ops nested directly inside the range at `position` (`parent` is a row position)."""
        r = self.ranges
        return r[r["parent"] == position]


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    """Capture each example once per module (a capture takes ~10-20 s)."""
    cache: dict[str, Capture] = {}

    def get(example: str) -> Capture:
        if example not in cache:
            out = tmp_path_factory.mktemp(Path(example).stem)
            res = capture_example(EXAMPLES / example, out)
            report = json.loads(res.stdout[res.stdout.index("{"):])   # after the program's own prints
            manifest = json.loads((out / "capture-manifest.json").read_text())
            cache[example] = Capture(example, report, manifest, tracelint.load(out / "trace.json"))
        return cache[example]
    return get


# ----- every example: a clean capture, and no GPU claim from a CPU trace ------------------------
@pytest.mark.parametrize("example", ALL)
def test_cpu_capture_is_honest(capture, example):
    c = capture(example)
    assert c.manifest["exit_code"] == 0 and c.manifest["trace_written"]
    assert c.manifest["steps_seen"] == 8, c.manifest   # one step() / optimizer.step() per iteration
    assert len(c.steps) == STEPS
    assert c.report["summary"]["has_gpu_activity"] is False and not c.tl.has_gpu_activity
    gpu_findings = [f["rule"] for f in c.report["findings"] if f["rule"] in GPU_RULES]
    assert not gpu_findings, gpu_findings
    assert GPU_RULES <= set(c.report["skipped_rules"]), c.report["skipped_rules"]   # and says so
    pair = next(k for k, v in PAIRS.items() if example in v)
    for rule in TARGET_RULES[pair]:   # the rule the example is about says why it did not run
        assert "no GPU activity" in c.report["skipped_rules"].get(rule, ""), c.report["skipped_rules"]
    # No read-back inside the loops (the checksums are read after them): TL010 stays quiet too.
    assert not [f for f in c.report["findings"] if f["rule"] == "TL010"]


# ----- 1. tiny ops ---------------------------------------------------------------------------------
def test_tiny_ops_storm_vs_fused(capture):
    loop, fused = capture("tiny_ops_loop.py"), capture("tiny_ops_fused.py")
    n_loop = [int(o["name"].astype(str).str.startswith("aten::").sum()) for o in loop.step_ops()]
    n_fused = [int(o["name"].astype(str).str.startswith("aten::").sum()) for o in fused.step_ops()]
    assert min(n_loop) >= 5 * max(n_fused), (n_loop, n_fused)
    line = loop.marker_line("ANTI-PATTERN")
    for ops in loop.step_ops():
        # 16 heads x 14 elementwise ops, all issued from activate()
        assert len(loop.from_line(ops, line)) >= 16 * 14, len(loop.from_line(ops, line))
    fline = fused.marker_line("FIXED")
    for ops in fused.step_ops():
        names = Counter(fused.from_line(ops, fline)["name"].astype(str))
        assert names["aten::gelu"] == 1 and names["aten::tanh"] == 0, names


# ----- 2. pageable vs pinned copies ---------------------------------------------------------------
@pytest.mark.parametrize("example,marker",
                         [("pageable_copy.py", "ANTI-PATTERN"), ("pinned_copy.py", "FIXED")])
def test_copies_are_visible_but_free_on_cpu(capture, example, marker):
    c = capture(example)
    line = c.marker_line(marker)   # `def load` / `def prefetch`
    for ops in c.step_ops():
        to = c.from_line(ops, line)
        to = to[to["name"].astype(str) == "aten::to"]
        assert len(to) == 2, len(to)   # inputs and targets, every step
        for idx in to.index:           # a no-op on the CPU: nothing copied under it
            kids = set(c.children(c.ranges.index.get_loc(idx))["name"].astype(str))
            assert not kids & {"aten::_to_copy", "aten::copy_"}, kids
    names = set(c.ranges["name"].astype(str))
    assert "aten::pin_memory" not in names   # no accelerator: the twin does not (cannot) pin


# ----- 3. dequantisation per forward vs once at load ----------------------------------------------
CHAIN = {"aten::__and__", "aten::__rshift__", "aten::stack", "aten::to", "aten::sub", "aten::mul"}


def _chains_before_linears(ops) -> list[set[str]]:
    """For each aten::linear, the dequant-chain ops seen since the previous one."""
    seen, out = set(), []
    for name in ops["name"].astype(str):
        if name == "aten::linear":
            out.append(seen)
            seen = set()
        elif name in CHAIN:
            seen.add(name)
    return out


def test_dequant_every_forward_vs_once(capture):
    deq, fused = capture("dequant_linear.py"), capture("dequant_fused.py")
    forwards = 4 * (1 + 4)   # 4 layers x (prefill + 4 decode tokens) per request
    line = deq.marker_line("ANTI-PATTERN")   # def dequantize
    for ops in deq.step_ops():
        chains = _chains_before_linears(ops)
        assert len(chains) == forwards and all(ch == CHAIN for ch in chains), chains
        from_deq = Counter(deq.from_line(ops, line)["name"].astype(str))
        assert all(from_deq[n] >= forwards for n in CHAIN), from_deq
    for ops in fused.step_ops():
        names = Counter(ops["name"].astype(str))
        assert names["aten::linear"] == forwards
        assert not {n: names[n] for n in CHAIN | {"aten::bitwise_and", "aten::_to_copy"} if names[n]}
    # the prefill / decode buckets TL003 uses on a GPU are in both traces; the chain runs in both
    for c, per_range in ((deq, 4), (fused, 0)):
        r = c.ranges
        for bucket, count in (("prefill", 1), ("decode", 4)):
            rs = r[(r["kind"] == "annotation") & (r["name"].astype(str) == bucket)]
            assert len(rs) == count * STEPS, (c.example, bucket, len(rs))
            for s, e in zip(rs["start"], rs["end"]):
                subs = c.ops(int(s), int(e))
                assert int((subs["name"].astype(str) == "aten::sub").sum()) == per_range


# ----- 4. layout transforms ------------------------------------------------------------------------
def test_transposes_copy_every_block(capture):
    anti, fixed = capture("transposes.py"), capture("transposes_fixed.py")
    depth = 6
    line = anti.marker_line("ANTI-PATTERN")   # def mix_tokens
    for ops in anti.step_ops():
        names = Counter(ops["name"].astype(str))
        assert names["aten::contiguous"] >= 2 * depth and names["aten::clone"] >= 2 * depth, names
        mine = Counter(anti.from_line(ops, line)["name"].astype(str))
        assert mine["aten::contiguous"] == 2 * depth, mine
    for ops in fixed.step_ops():
        names = Counter(ops["name"].astype(str))
        assert names["aten::contiguous"] == 0 and names["aten::clone"] == 0, names
        assert names["aten::bmm"] == depth
