"""Anti-pattern: large temporaries allocated anew in every iteration.

`blend()` normalises a batch of frames and folds it into a running average. Each expression
makes a new full-size tensor (`frame - mean`, `/ std`, `0.9 * state`, `0.1 * x`): four 25 MB
temporaries per iteration, freed again a moment later. The CPU allocator caches nothing, so
each one is a fresh allocation whose pages are faulted in and zeroed by the kernel; on a GPU
the caching allocator hides most of that, until memory gets tight and it has to give segments
back (TL039 allocator-churn reports both). A CPU trace captured with `--profile-memory` shows
the `[memory]` events: ~100 MB allocated and freed per ProfilerStep, all from `blend()`.
Fixed twin: alloc_churn_fixed.py.

    tracelint capture --profile-memory -o out/churn -- python examples/alloc_churn.py
"""
import torch

try:
    from tracelint.capture import step
except ImportError:
    step = lambda: None  # noqa: E731

torch.manual_seed(0)
frames = torch.randn(2, 8, 3, 512, 512)            # two input batches, 25 MB each
mean, std = torch.full((3, 1, 1), 0.1), torch.full((3, 1, 1), 1.5)
state = torch.zeros(8, 3, 512, 512)


def blend(state, frame):  # ANTI-PATTERN: every expression allocates a new 25 MB tensor
    x = (frame - mean) / std
    return 0.9 * state + 0.1 * x


for it in range(8):
    state = blend(state, frames[it % 2])
    step()  # one iteration: lets `tracelint capture` skip warm-up
print(f"checksum {state.sum().item():.3f}")
