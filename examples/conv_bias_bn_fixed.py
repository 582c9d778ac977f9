"""Fixed twin of conv_bias_bn.py: `Conv2d(..., bias=False)` before every BatchNorm2d.

BatchNorm's mean subtraction (and its learnt shift) does what the bias did, so the bias is
dropped: no bias-add, no bias gradient reduction, no optimizer update for it. Same weights and
data as the anti-pattern; the printed loss matches it to float rounding. A CPU trace shows
`aten::conv2d` with an empty bias entry in Input Dims before each `aten::batch_norm`.
"""
import torch
import torch.nn.functional as F

try:
    from tracelint.capture import step
except ImportError:
    step = lambda: None  # noqa: E731

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
widths = (3, 16, 32, 32, 64)
BIAS = False  # FIXED: BatchNorm follows, so the conv needs no bias


class ConvBlock(torch.nn.Module):
    def __init__(self, c_in, c_out, seed):
        super().__init__()
        self.conv = torch.nn.Conv2d(c_in, c_out, 3, padding=1, bias=BIAS)
        self.bn = torch.nn.BatchNorm2d(c_out)
        g = torch.Generator().manual_seed(seed)   # same weights in both twins
        with torch.no_grad():
            self.conv.weight.copy_(torch.randn(self.conv.weight.shape, generator=g) * 0.2)
            if self.conv.bias is not None:
                self.conv.bias.copy_(torch.randn(c_out, generator=g))

    def forward(self, x):  # conv -> bn -> relu (torch.profiler names the frame by this line)
        return F.relu(self.bn(self.conv(x)))


blocks = [ConvBlock(a, b, i) for i, (a, b) in enumerate(zip(widths, widths[1:]))]
model = torch.nn.Sequential(*blocks, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                            torch.nn.Linear(widths[-1], 10)).to(device)
with torch.no_grad():
    model[-1].weight.copy_(torch.randn(model[-1].weight.shape, generator=torch.Generator().manual_seed(99)) * 0.1)
    model[-1].bias.zero_()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
data = torch.Generator().manual_seed(1)
images = torch.randn(8, 16, 3, 32, 32, generator=data).to(device)
labels = torch.randint(0, 10, (8, 16), generator=data).to(device)
for it in range(8):
    loss = F.cross_entropy(model(images[it]), labels[it])
    opt.zero_grad()
    loss.backward()
    opt.step()  # one iteration: lets `tracelint capture` skip warm-up
print(f"loss {loss.item():.5f}")
