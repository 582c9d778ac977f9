"""Synthetic trace generation: planted anti-patterns written as Kineto JSON and nsys SQLite.

>>> from tracelint.synth import TraceBuilder
>>> b = TraceBuilder(device_name="NVIDIA H100 80GB HBM3", pid=1000)
>>> with b.step(0):
...     k = b.launch("void gemm_kernel<128>(float*)", 20_000, grid=(132, 1, 1), block=(256, 1, 1))
...     s = b.sync("cudaStreamSynchronize")
>>> (k.start, k.end) == (1_000_004_000, 1_000_024_000)
True

See :mod:`tracelint.synth.builder` for the timing rules and the format mapping.
"""
from __future__ import annotations

from .builder import DEVICE_PRESETS, GpuActivity, HostEvent, TraceBuilder
from .vocab import nsys_api_name

__all__ = ["TraceBuilder", "GpuActivity", "HostEvent", "DEVICE_PRESETS", "nsys_api_name"]
