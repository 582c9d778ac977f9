"""Fixed twin of item_in_loop.py: keep the losses on the device and read them back once.

The loop never waits for the device, so the host can queue the next iteration's kernels while
the GPU works; the single read-back after the loop costs one synchronisation in total.
"""
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(256, 64, device=device)
y = torch.randn(256, 1, device=device)
losses = []
for it in range(8):
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.detach())  # stays on the device: no synchronisation
print(f"final loss {torch.stack(losses)[-1].item():.4f}")  # one read-back, after the loop
