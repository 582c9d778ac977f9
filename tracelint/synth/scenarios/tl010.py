"""TL010 readback-in-loop: `.item()` every iteration of a CPU-only trace (Kineto, stacks), and a
near-miss that reads back once after the loop, and one whose reads are the optimizer's own."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario


def _cpu_step(b: TraceBuilder) -> None:
    with b.python("train.py", 30, "train"):
        b.cpu(200_000, name="aten::linear")
        b.cpu(150_000, name="aten::mse_loss")


def item_every_step() -> TraceBuilder:
    b = TraceBuilder(device_name=None)
    for s in range(5):
        with b.step(s):
            _cpu_step(b)
            with b.python("train.py", 33, "train"), b.op("aten::item"), b.op("aten::_local_scalar_dense"):
                b.cpu(2_000)
    return b


def item_after_loop() -> TraceBuilder:
    b = TraceBuilder(device_name=None)
    for s in range(5):
        with b.step(s):
            _cpu_step(b)
    with b.python("train.py", 40, "train"), b.op("aten::item"):
        b.cpu(2_000)
    return b


def item_inside_optimizer() -> TraceBuilder:
    """Single-tensor AdamW reads each parameter's step count (`step.item()`) and a fused
    optimizer op reads scalars inside itself: the framework's reads, not the program's."""
    b = TraceBuilder(device_name=None)
    for s in range(5):
        with b.step(s):
            _cpu_step(b)
            with b.python("train.py", 35, "train"), b.op("Optimizer.step#AdamW.step"):
                for _ in range(4):
                    with b.op("aten::item"), b.op("aten::_local_scalar_dense"):
                        b.cpu(1_000)
                with b.op("aten::_fused_adamw_"), b.op("aten::item"):
                    b.cpu(1_000)
    return b


SCENARIOS = [
    Scenario("TL010", "positive-item-every-step", item_every_step, True,
             expect={"where.line": 33, "occurrences": 5}, formats=("kineto",)),
    Scenario("TL010", "near-miss-item-after-loop", item_after_loop, False, formats=("kineto",)),
    Scenario("TL010", "near-miss-item-inside-optimizer", item_inside_optimizer, False, formats=("kineto",)),
]
