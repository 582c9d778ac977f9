"""Anti-pattern: dequantising int4 weights with separate ops before every matmul, every forward.

The weights are stored as in a W4A16 checkpoint: two 4-bit codes per byte, a scale and zero point
per output channel. `Int4Linear.dequantize()` rebuilds the float weight on every forward (unpack
the nibbles, cast, subtract the zero point, scale: six passes over the weight) before the matmul.
In decode (one token per forward) the matmul is tiny and these passes dominate. On a GPU this is
the pattern of TL003 dequant-overhead, bucketed by the `prefill` / `decode` ranges, but TL003 knows
dequant kernels by name (dequantize, int4, awq, gptq, ... as low-bit libraries name them); plain
PyTorch ops like these run as generic kernels (bitwise_and, rshift, stack, a copy for the cast,
sub, mul) that it does not count as dequant, so expect TL002 small-op-storm in `decode` and TL006
counting the stack/cast copies instead. On the CPU the trace shows the chain itself, issued from
`dequantize()`: `aten::__and__`, `aten::__rshift__`, `aten::stack`, `aten::to`, `aten::sub`,
`aten::mul` before every `aten::linear`, in both ranges. Fixed twin: dequant_fused.py.
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
        self.packed, self.scale, self.zero = quantize_int4(w)

    def dequantize(self):  # ANTI-PATTERN: six passes over the weight, before every matmul
        q = torch.stack((self.packed & 0xF, self.packed >> 4), -1).flatten(1)   # unpack
        return (q.to(torch.float32) - self.zero) * self.scale                  # cast, zero, scale

    def forward(self, x):
        return F.linear(x, self.dequantize())


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
