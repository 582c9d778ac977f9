"""Anti-pattern: the DataLoader builds every batch in the training process (num_workers=0).

Each sample is "decoded" from bytes in Python and augmented with a few tensor ops, then
collated; with num_workers=0 all of it runs on the thread that also runs the model, inside
`enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`, one range per batch. On a GPU
the launching thread cannot queue kernels while it builds the batch, so the GPU idles for every
load (TL031 dataloader-main-process measures that idle time inside the ranges). A CPU-only
trace shows the loading (the ranges, and the `aten::` ops of `__getitem__` and the collate
inside them, called from `load()`) but has no GPU to idle: TL031 is skipped there and says
why. Fixed twin: dataloader_workers.py.
"""
import torch
from torch.utils.data import DataLoader, Dataset

device = "cuda" if torch.cuda.is_available() else "cpu"
FEATURES, BATCH, ITERS = 64, 16, 8


class Decoded(Dataset):
    """A sample costs a Python decode loop and a small augmentation, as image decoding does."""

    def __len__(self):
        return BATCH * ITERS

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        raw = torch.randint(0, 256, (FEATURES * 8,), generator=g, dtype=torch.uint8).tolist()
        pix = [sum(raw[j:j + 8]) / 2040.0 for j in range(0, len(raw), 8)]      # "decode"
        x = torch.tensor(pix)
        x = torch.roll(x - x.mean(), shifts=i % 7)                                # "augment"
        return x, torch.tensor([float(raw[0] % 2)])


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05)


def load(it):  # ANTI-PATTERN: next() builds the batch on this thread
    return next(it)


def train():
    loader = DataLoader(Decoded(), batch_size=BATCH, shuffle=False, num_workers=0)
    it, losses = iter(loader), []
    for _ in range(ITERS):
        x, y = load(it)
        x, y = x.to(device), y.to(device)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


if __name__ == "__main__":
    losses = train()
    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    print(f"final loss {float(losses[-1]):.6f} checksum {checksum:.6f}")
