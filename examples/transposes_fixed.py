"""Fixed twin of transposes.py: one layout, [batch, tokens, channels], end to end.

Token mixing is a matrix product on the left: y[b] = W @ x[b] + bias for every batch item, which
`torch.bmm` computes directly on the [B, T, C] tensor (the weight is broadcast with a stride-0
`expand`, no copy). No transpose, no `.contiguous()`: the CPU trace has 0 `aten::contiguous` and
0 `aten::clone` per ProfilerStep, and on a GPU the copy kernels TL006 layout-transform counts are
gone. Same numbers as transposes.py (compare the checksums). In general: let each layer consume the
layout its producer writes (pre-transpose weights once at load, channels_last for convolutions)
instead of copying activations into the layout a layer prefers.
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

    def mix_tokens(self, x):  # FIXED: W @ x[b] for every b; x stays [B, T, C]
        w = self.token_mix.weight.expand(x.shape[0], -1, -1)
        return torch.bmm(w, x) + self.token_mix.bias[:, None]

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
