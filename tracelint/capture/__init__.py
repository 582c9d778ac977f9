"""Capture: profile a PyTorch program with torch.profiler (or nsys) and lint the result.

`tracelint capture -- python train.py` runs the script in a child process under
`tracelint.capture.runner`, which drives torch.profiler's schedule from iteration boundaries
(every `optimizer.step()`, or an explicit `tracelint.capture.step()`), so warm-up iterations
are skipped. In-process use: `with tracelint.profile() as p: ...; p.report()`.
"""
from __future__ import annotations

from .api import Profile, profile, step  # noqa: F401
