"""Anti-pattern: a storm of tiny elementwise ops, one attention head at a time.

Every decode step normalises (RMSNorm) and activates (tanh-GELU) 16 heads of shape [8, 64] in a
Python loop, written out op by op: 14 small ops per head, about 225 per step, each on 512 numbers.
On a GPU every op is its own kernel launch: the kernel runs for a microsecond or two, less than
the few microseconds the host needs to launch it, so the GPU finishes each kernel before the next
arrives and waits on Python (TL002 small-op-storm; the idle time between kernels is TL001
launch-gap). On the CPU each op is just as cheap and no GPU rule can run, but the trace shows the
count: hundreds of `aten::` ops per ProfilerStep (~780 with the ops they call inside), nearly all
issued from `activate()`. Fixed twin: tiny_ops_fused.py (same maths once on the stacked tensor).
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


def activate(h):  # ANTI-PATTERN: 14 tiny ops per head, 16 heads one after the other
    out = []
    for head in h.unbind(0):
        y = head * torch.rsqrt(head.pow(2).mean(-1, keepdim=True) + 1e-6) * gain       # RMSNorm
        y = 0.5 * y * (1.0 + torch.tanh(0.7978845608 * (y + 0.044715 * y.pow(3))))   # GELU (tanh)
        out.append(y)
    return torch.stack(out)


with torch.inference_mode():
    for it in range(8):
        x = activate(x @ proj)
        step()  # one decode step: lets `tracelint capture` skip warm-up
print(f"checksum {x.sum().item():.4f}")
