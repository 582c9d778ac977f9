"""Fixed twin of tiny_ops_loop.py: the same maths once on the stacked [16, 8, 64] tensor.

Instead of 16 heads x 14 ops, RMSNorm runs as one expression over all heads (6 ops) and the
activation is PyTorch's single GELU op (`approximate="tanh"`, the same formula): 7 ops per step
instead of ~225, each over 8192 numbers. On a GPU the launches no longer outnumber the work
(TL002 / TL001 have no storm or gaps to report); the CPU trace shows the drop in `aten::` ops per
ProfilerStep (~30 instead of ~780). Same result as tiny_ops_loop.py (compare the checksums).
Going further, torch.compile would fuse the whole chain into one kernel.
"""
import torch

try:
    from tracelint.capture import step
except ImportError:
    step = lambda: None  # noqa: E731

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
heads, rows, dim = 16, 8, 64
proj = torch.randn(dim, dim, device=device) / dim ** 0.5
gain = torch.ones(dim, device=device)
x = torch.randn(heads, rows, dim, device=device)


def activate(h):  # FIXED: every head at once, GELU as one op
    y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * gain                  # RMSNorm
    return torch.nn.functional.gelu(y, approximate="tanh")


with torch.inference_mode():
    for it in range(8):
        x = activate(x @ proj)
        step()  # one decode step: lets `tracelint capture` skip warm-up
print(f"checksum {x.sum().item():.4f}")
