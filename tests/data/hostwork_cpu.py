"""A CPU training loop whose host work is data loading in the main process, printing and an
explicit gc.collect() each step: the real capture tests/test_hostidle.py checks the host
activity attribution on (a CPU capture has no GPU idle; the test attributes the host time
between one step's optimizer step and the next forward). Captured with torch 2.13.0 CPU:

    python tests/data/hostwork_cpu.py && gzip -9 hostwork.json && mv hostwork.json.gz tests/data/hostwork_cpu.json.gz
"""
import gc
import torch
from torch.profiler import ProfilerActivity, _ExperimentalConfig, profile
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(256, 32), torch.randn(256, 1))
loader = DataLoader(data, batch_size=32, num_workers=0)
model = torch.nn.Linear(32, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
cfg = _ExperimentalConfig(record_python_gc_info=True)
with profile(activities=[ProfilerActivity.CPU], with_stack=True, experimental_config=cfg,
             ) as prof:   # no schedule: the whole loop, no ProfilerStep ranges
    for i, (x, y) in enumerate(loader):
        junk = [[j] for j in range(3000)]
        gc.collect()
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print("step", i, float(loss.detach()))
        prof.step()
        if i == 5:
            break
prof.export_chrome_trace("hostwork.json")
