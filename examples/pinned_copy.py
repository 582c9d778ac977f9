"""Fixed twin of pageable_copy.py: pinned host memory, non_blocking copies, next batch prefetched.

The data set is pinned once at load (page-locked, so the GPU's DMA engine reads it directly) and
each batch is copied with `non_blocking=True` on a side stream one iteration ahead: while the GPU
computes batch i, batch i+1 is already crossing the bus. The compute stream waits only for the
copy it needs (`wait_stream`), and `record_stream` keeps the allocator from reusing the buffer
early. On a GPU the copies overlap compute, so TL004 unoverlapped-copy, which counts only copy time
no kernel covers, has little or nothing left to report (as long as a batch's compute outlasts its
copy). On the CPU there is nothing to pin (PyTorch refuses to pin memory without an accelerator,
so the script skips it) and no stream: the CPU trace shows the same per-step `aten::to` no-ops as
pageable_copy.py, issued from `prefetch()` for the NEXT batch. Only a GPU trace shows the overlap.
"""
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
steps, batch, features, hidden = 8, 1024, 256, 1024
inputs = torch.randn(steps, batch, features)
targets = torch.randn(steps, batch, 1)
if device == "cuda":
    inputs, targets = inputs.pin_memory(), targets.pin_memory()   # page-locked, once at load
model = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(),
                            torch.nn.Linear(hidden, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
side = torch.cuda.Stream() if device == "cuda" else None             # copy stream (None: no-op)


def prefetch(i):  # FIXED: asynchronous copy on the side stream; returns at once on a GPU
    with torch.cuda.stream(side):
        return inputs[i].to(device, non_blocking=True), targets[i].to(device, non_blocking=True)


nxt = prefetch(0)
for it in range(steps):
    if side is not None:
        torch.cuda.current_stream().wait_stream(side)             # only wait for this batch
        for t in nxt:
            t.record_stream(torch.cuda.current_stream())
    x, y = nxt
    if it + 1 < steps:
        nxt = prefetch(it + 1)                                      # overlaps the compute below
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
print(f"final loss {loss.item():.4f}")
