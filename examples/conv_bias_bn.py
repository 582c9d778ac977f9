"""Anti-pattern: a convolution with a bias directly followed by BatchNorm.

`Conv2d(..., bias=True)` then `BatchNorm2d`: in training BatchNorm subtracts the per-channel
batch mean, so the constant the bias adds to each channel is removed again (and in eval mode
BatchNorm's own shift can absorb it). The bias is a parameter that cannot change the output: its
add runs forward, its gradient (always ~0) is reduced in backward, and the optimizer updates it
every step. On a GPU that is an extra bias-add in (or after) every convolution kernel, a
per-channel reduction over the whole activation in backward and a few tiny optimizer launches
per layer (TL034 conv-bias-before-batchnorm). A CPU trace shows the pattern itself:
`record_shapes=True` records `aten::conv2d` with a bias input of shape [C_out] (the third
entry of Input Dims) and the next op on its output is `aten::batch_norm`, 4 times per forward,
issued from `ConvBlock.forward`. Fixed twin: conv_bias_bn_fixed.py (same loss: the bias
is cancelled, so removing it changes nothing but the work).
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
BIAS = True  # ANTI-PATTERN: the bias BatchNorm cancels (conv_bias_bn_fixed.py: False)


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
