"""Anti-pattern: reading a scalar back with `.item()` inside the training loop.

On a GPU every `.item()` blocks the host until the device has finished all queued work (a
hidden synchronisation, TL005/TL010), so the host cannot run ahead and launch the next kernels:
the GPU idles between iterations. On the CPU the call is cheap, but the trace still shows the
`aten::item` read-back in `record()`, once per iteration. Fixed twin: item_fixed.py.

torch.profiler stacks name each Python frame by the line where the function starts; tracelint
reads this file to narrow that to the `.item()` call inside `record()`.
"""
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(256, 64, device=device)
y = torch.randn(256, 1, device=device)
losses = []


def record(loss):  # ANTI-PATTERN: called every iteration, it waits for the device
    losses.append(loss.item())


for it in range(8):
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    record(loss)
print(f"final loss {losses[-1]:.4f}")
