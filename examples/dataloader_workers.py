"""Fixed twin of dataloader_main.py: two worker processes build the batches.

Same dataset, model and maths (no shuffling; each sample is seeded by its index, so the batches
are the same). With num_workers=2 and persistent_workers=True the decode and collate run in two
worker processes that stay alive between epochs and prefetch `prefetch_factor` batches each;
the training thread only takes finished batches off a queue
(`enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__`). On a GPU add pin_memory=True
and `.to(device, non_blocking=True)`. The profiler records the training process only, so the
workers' `aten::` ops are not in the trace. The `if __name__ == "__main__"` guard is required
where workers start by spawning (macOS, Windows).
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


def load(it):  # FIXED: next() only takes a batch the workers built
    return next(it)


def train():
    loader = DataLoader(Decoded(), batch_size=BATCH, shuffle=False, num_workers=2, persistent_workers=True, prefetch_factor=2)
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
