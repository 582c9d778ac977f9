"""Anti-pattern: transposing activations back and forth between layers, with `.contiguous()` copies.

An MLP-Mixer keeps activations as [batch, tokens, channels], but its token-mixing Linear works
on the last axis, so the usual code transposes to [batch, channels, tokens], makes that
contiguous (a full copy), applies the Linear, transposes back and copies again: two copies of the
whole activation per block that compute nothing. On a GPU each `.contiguous()` is a copy kernel
that moves every byte through DRAM twice; they recur every iteration and take a visible share of
kernel time next to these small GEMMs (TL006 layout-transform). On the CPU the copies are cheap,
but the trace counts them: 2 `aten::contiguous` (each an `aten::clone` + `aten::copy_`) per block,
12 per ProfilerStep, issued from `mix_tokens()`. Fixed twin: transposes_fixed.py.
"""
import torch
import torch.nn.functional as F

try:
    from tracelint.capture import step
except ImportError:
    step = lambda: None  # noqa: E731

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
batch, tokens, channels, depth = 16, 64, 128, 6


class MixerBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = torch.nn.LayerNorm(channels), torch.nn.LayerNorm(channels)
        self.token_mix = torch.nn.Linear(tokens, tokens)        # mixes along the token axis
        self.channel_mix = torch.nn.Linear(channels, channels)  # mixes along the channel axis

    def mix_tokens(self, x):  # ANTI-PATTERN: [B, T, C] -> [B, C, T] copy -> Linear -> copy back
        y = x.transpose(1, 2).contiguous()
        return self.token_mix(y).transpose(1, 2).contiguous()

    def forward(self, x):
        x = x + self.mix_tokens(self.norm1(x))
        return x + F.gelu(self.channel_mix(self.norm2(x)))


model = torch.nn.Sequential(*[MixerBlock() for _ in range(depth)]).to(device)
images = torch.randn(8, batch, tokens, channels, device=device)
with torch.inference_mode():
    for it in range(8):
        out = model(images[it])
        step()  # one batch: lets `tracelint capture` skip warm-up
print(f"checksum {out.sum().item():.4f}")
