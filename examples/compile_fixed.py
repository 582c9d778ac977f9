"""Fixed twin of compile_recompile.py: compile once for every length, no graph break.

`torch.compile(dynamic=True)` (or `torch._dynamo.mark_dynamic(x, 0)` on the input) makes the
batch dimension symbolic, so the longer batch reuses the compiled graph; the branch on a tensor
value becomes `torch.where`, which stays in the graph. The trace shows one compilation in the
first iteration (before the recorded ones) and one `Torch-Compiled Region` per call, with no
region nested in it. Same checksum as the anti-pattern.
"""
import torch

import tracelint.capture

torch.manual_seed(0)
w1, w2 = torch.randn(64, 64), torch.randn(64, 64)
LENGTHS = [16, 16, 16, 24, 16, 16, 16, 16]


@torch.compile(dynamic=True)   # FIXED: the batch dimension is symbolic
def features(x):
    h = torch.nn.functional.gelu(x @ w1)
    h = torch.where(h.mean() > 10.0, h * 0.5, h)   # stays in the graph
    return torch.tanh(h @ w2).sum(dim=1)


total = torch.zeros(())
for it, n in enumerate(LENGTHS):
    y = features(torch.randn(n, 64))
    total += y.sum()
    tracelint.capture.step()
print(f"checksum {float(total):.4f}")
