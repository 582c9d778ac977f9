"""Anti-pattern: a torch.compile'd function that recompiles inside the training loop, and a
graph break in it.

`torch.compile(dynamic=False)` specialises the compiled graph on every input shape, so a batch
of a new length (variable sequence lengths, a short last batch) makes Dynamo trace and Inductor
compile the function again, inside the iteration: seconds of host time during which no GPU
work is launched. The `.item()` in the middle is a graph break: Dynamo ends the graph there,
runs the read-back eagerly and starts a second graph after it (on a GPU the read-back also
waits for the device, and nothing is fused across the break). Worse, the code after the break
receives the Python float as an input and Dynamo guards on its value (`___stack0 ==
2.98...` in `TORCH_LOGS=recompiles`), so that part is compiled again in every iteration.

On the CPU the trace shows what tracelint's TL037 reads: the Dynamo/Inductor compile ranges
(`dynamo`, `entire_frame_compile`, `backend_compile`, ...) with their compile id (`1/3`: frame
1, its fourth compilation) inside every ProfilerStep, and each call's `Torch-Compiled Region`
with a second region (the code after the break, `torch_dynamo_resume_in_features_at_N`) nested
in it. Fixed twin: compile_fixed.py.
"""
import torch

import tracelint.capture

torch.manual_seed(0)
w1, w2 = torch.randn(64, 64), torch.randn(64, 64)
LENGTHS = [16, 16, 16, 24, 16, 16, 16, 16]   # one longer batch, in the recorded iterations


@torch.compile(dynamic=False)   # ANTI-PATTERN: one graph per input shape
def features(x):
    h = torch.nn.functional.gelu(x @ w1)
    if h.mean().item() > 10.0:   # GRAPH-BREAK: a Python branch on a tensor value
        h = h * 0.5
    return torch.tanh(h @ w2).sum(dim=1)


total = torch.zeros(())
for it, n in enumerate(LENGTHS):
    y = features(torch.randn(n, 64))
    total += y.sum()   # checksum (same in the fixed twin), read once after the loop
    tracelint.capture.step()
print(f"checksum {float(total):.4f}")
