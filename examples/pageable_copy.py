"""Anti-pattern: copying each batch from pageable host memory, synchronously, right before compute.

The data set lives in an ordinary (pageable) CPU tensor and every iteration calls `.to(device)` on
its batch just before the forward pass. On a GPU the driver stages pageable memory through a
pinned bounce buffer, the copy runs on the compute stream, and no kernel can start until it lands:
the GPU sits idle for the whole host-to-device transfer, every step (TL004 unoverlapped-copy, which
also counts the copies as pageable and on the compute stream; the idle time can show as TL001
launch-gap too). On the CPU, `.to("cpu")` is a no-op that returns the same tensor: nothing is
copied and nothing waits, and TL004 has no GPU copies to measure. The CPU trace only shows where
the copy would be: an `aten::to` per tensor per ProfilerStep, issued from `load()`, with no
`aten::_to_copy` / `aten::copy_` under it. Fixed twin: pinned_copy.py (pinned memory,
non_blocking copies, the next batch prefetched on a side stream).
"""
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
steps, batch, features, hidden = 8, 1024, 256, 1024
inputs = torch.randn(steps, batch, features)       # pageable host memory
targets = torch.randn(steps, batch, 1)
model = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(),
                            torch.nn.Linear(hidden, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def load(i):  # ANTI-PATTERN: blocking copy from pageable memory, on the compute stream
    return inputs[i].to(device), targets[i].to(device)


for it in range(steps):
    x, y = load(it)                                 # compute cannot start until the copy lands
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
print(f"final loss {loss.item():.4f}")
