"""Fixed twin of optimizer_per_param.py: multi-tensor optimizer work.

Same model, data and maths. AdamW(fused=True) updates all 50 parameters in one
`aten::_fused_adamw_` (CPU and CUDA builds of PyTorch >= 2.4 have it; foreach=True, the default
on CUDA, is the other multi-tensor path), `zero_grad(set_to_none=True)` (the default since
PyTorch 2.0) drops the gradients instead of zeroing each, and `clip_grad_norm_(foreach=True)`
computes the norms with `aten::_foreach_norm` and scales with `aten::_foreach_mul_`. On the CPU
foreach defaults to False, so both are set explicitly. The results match the anti-pattern's up
to float rounding (compare the printed checksum).
"""
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
WIDTH, DEPTH = 32, 12
layers = []
for _ in range(DEPTH):
    layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.LayerNorm(WIDTH), torch.nn.GELU()]
model = torch.nn.Sequential(*layers, torch.nn.Linear(WIDTH, 1)).to(device)   # 50 parameter tensors
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
x = torch.randn(64, WIDTH, device=device)
y = torch.randn(64, 1, device=device)


def train_step():  # FIXED: one multi-tensor op (or none) per call below
    opt.zero_grad(set_to_none=True)                                       # ZERO_GRAD: no op at all
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)    # CLIP: _foreach_norm
    opt.step()                                                            # STEP: _fused_adamw_
    return loss.detach()


losses = [train_step() for _ in range(8)]
checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
print(f"final loss {float(losses[-1]):.6f} checksum {checksum:.6f}")
