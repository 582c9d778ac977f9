"""Anti-pattern: optimizer work one parameter tensor at a time.

A deep, narrow MLP (50 parameter tensors, all small) trained with AdamW(foreach=False),
`zero_grad(set_to_none=False)` and `clip_grad_norm_(foreach=False)`. Every step then runs a
handful of one-tensor ops per parameter: `aten::zero_` in zero_grad, `aten::linalg_vector_norm`
in the clipping, `aten::mul_`, `lerp_`, `addcmul_`, `sqrt`, `div_`, `addcdiv_`, ... in
`Optimizer.step#AdamW.step`. On a GPU each op is a kernel launch of a few microseconds on a tiny
tensor: the host launches hundreds of them per step and the GPU waits between them (TL030
per-parameter-optimizer names the cause, TL002 sees the storm). On the CPU the ops are host work
too, and the trace shows them, one per parameter, under the optimizer's own ranges, called from
`train_step()`. Fixed twin: optimizer_fused.py.

torch.profiler stacks name each Python frame by the line where the function starts; tracelint
reads this file to narrow that to the call inside `train_step()`.
"""
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
WIDTH, DEPTH = 32, 12
layers = []
for _ in range(DEPTH):
    layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.LayerNorm(WIDTH), torch.nn.GELU()]
model = torch.nn.Sequential(*layers, torch.nn.Linear(WIDTH, 1)).to(device)   # 50 parameter tensors
# foreach=False forces the per-parameter loop (on the CPU it is also the default)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
x = torch.randn(64, WIDTH, device=device)
y = torch.randn(64, 1, device=device)


def train_step():  # ANTI-PATTERN: each call below loops over the 50 parameters
    opt.zero_grad(set_to_none=False)                                      # ZERO_GRAD: aten::zero_ per parameter
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False)   # CLIP: a norm per parameter
    opt.step()                                                            # STEP: ~10 ops per parameter
    return loss.detach()


losses = [train_step() for _ in range(8)]
checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
print(f"final loss {float(losses[-1]):.6f} checksum {checksum:.6f}")
