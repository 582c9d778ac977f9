"""Fixed twin of alloc_churn.py: the buffers are allocated once, the loop writes into them.

`torch.sub(..., out=buf)` and the in-place `div_`, `mul_` and `add_` reuse the same memory
every iteration: no allocation inside the loop at all (the CPU trace's ProfilerSteps have no
`[memory]` event), and the same numbers as alloc_churn.py (compare the checksums). On a GPU the
same change keeps the caching allocator's working set flat; `torch.compile` would fuse the
chain into one kernel with no temporaries either.
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
buf = torch.empty_like(state)                       # the one temporary, made once


def blend(state, frame):  # FIXED: preallocated buffer, in-place updates
    torch.sub(frame, mean, out=buf)
    buf.div_(std)
    return state.mul_(0.9).add_(buf, alpha=0.1)


for it in range(8):
    state = blend(state, frames[it % 2])
    step()  # one iteration: lets `tracelint capture` skip warm-up
print(f"checksum {state.sum().item():.3f}")
