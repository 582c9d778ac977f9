"""Fixed twin of dequant_linear.py: dequantise once, at load, not on every forward.

The checkpoint still arrives as packed int4 with per-channel scales and zero points, but
`Int4Linear` rebuilds the float weight once in `__init__`; every forward is just the matmul. The
per-step dequant chain is gone from the trace (on the CPU: no `aten::bitwise_and` / `__rshift__` /
`sub` / `mul` inside the `prefill` and `decode` ranges, the same `aten::linear` count), and on a
GPU every bucket runs only its GEMMs: no dequant or conversion kernels for TL003 to count, and no
storm of tiny kernels in `decode`.
Trade-off: the weights now sit in memory as float32, 8x the int4 bytes. When memory is what the
quantisation was for, keep int4 in memory and use a fused dequant-GEMM kernel instead (Marlin,
machete, tinygemm via torchao), which dequantises in registers inside the GEMM (TL003 counts it as
GEMM time).
"""
import torch
import torch.nn.functional as F
from torch.profiler import record_function

try:
    from tracelint.capture import step
except ImportError:
    step = lambda: None  # noqa: E731

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
dim, layers, prompt_len, new_tokens = 512, 4, 32, 4


def quantize_int4(w):
    """Asymmetric per-output-channel int4, two codes per byte (what the checkpoint stores)."""
    lo, hi = w.amin(1, keepdim=True), w.amax(1, keepdim=True)
    scale = (hi - lo) / 15
    zero = torch.round(-lo / scale)
    q = torch.clamp(torch.round(w / scale) + zero, 0, 15).to(torch.uint8)
    return q[:, 0::2] | (q[:, 1::2] << 4), scale, zero


class Int4Linear(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        packed, scale, zero = quantize_int4(w)
        q = torch.stack((packed & 0xF, packed >> 4), -1).flatten(1)
        self.weight = (q.to(torch.float32) - zero) * scale   # FIXED: dequantised once, at load

    def forward(self, x):
        return F.linear(x, self.weight)


weights = torch.randn(layers, dim, dim, device=device) * 1.5 / dim ** 0.5
model = torch.nn.Sequential(*[torch.nn.Sequential(Int4Linear(w), torch.nn.SiLU()) for w in weights])
prompts = torch.randn(8, prompt_len, dim, device=device)
with torch.inference_mode():
    for request in range(8):
        with record_function("prefill"):
            h = model(prompts[request])[-1:]
        for _ in range(new_tokens):
            with record_function("decode"):
                h = model(h)
        step()  # one request: lets `tracelint capture` skip warm-up
print(f"checksum {h.sum().item():.4f}")
