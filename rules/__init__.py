"""The built-in rules, one per file, in catalogue order.

Adding a rule = one rule file here + one line in TABLE + one fixture scenario
(docs/contributing.md). tests/test_rule_table.py checks that every rule file is in the table,
that every line names a Rule with the id in its file name, and that ids and slugs are unique.
"""
from __future__ import annotations

import importlib

#: (module, class) per rule. Trace scope first (TL0xx performance, TL1xx privacy), then the
#: job scope rules that read a multi-rank job's summaries (TL2xx).
TABLE: tuple[tuple[str, str], ...] = (
    ("tl001_launch_gap", "LaunchGap"),
    ("tl002_small_op_storm", "SmallOpStorm"),
    ("tl003_dequant_overhead", "DequantOverhead"),
    ("tl004_unoverlapped_copy", "UnoverlappedCopy"),
    ("tl005_hidden_sync", "HiddenSync"),
    ("tl006_layout_transform", "LayoutTransform"),
    ("tl007_register_spill", "RegisterSpill"),
    ("tl008_tail_latency", "TailLatency"),
    ("tl009_exposed_communication", "ExposedCommunication"),
    ("tl010_readback_in_loop", "ReadbackInLoop"),
    ("tl011_fp32_gemm", "Fp32Gemm"),
    ("tl012_device_copy", "DeviceCopy"),
    ("tl020_gemm_efficiency", "GemmEfficiency"),
    ("tl021_old_arch_kernel", "OldArchKernel"),
    ("tl022_memory_bound_dominant", "MemoryBoundDominant"),
    ("tl030_per_parameter_optimizer", "PerParameterOptimizer"),
    ("tl031_dataloader_main_process", "DataLoaderMainProcess"),
    ("tl032_blocking_or_pageable_h2d", "BlockingOrPageableH2D"),
    ("tl033_cpu_tensor_moved_each_step", "CpuTensorMovedEachStep"),
    ("tl034_conv_bias_before_batchnorm", "ConvBiasBeforeBatchNorm"),
    ("tl035_data_parallel", "DataParallel"),
    ("tl036_cudnn_autotune_in_steps", "CudnnAutotuneInSteps"),
    ("tl037_torch_compile_recompile", "TorchCompileRecompile"),
    ("tl038_cuda_graph_opportunity", "CudaGraphOpportunity"),
    ("tl039_allocator_churn", "AllocatorChurn"),
    ("tl040_memory_peak_near_capacity", "MemoryPeakNearCapacity"),
    ("tl100_secret_in_trace", "SecretInTrace"),
    ("tl101_personal_data", "PersonalDataInTrace"),
    ("tl201_job_exposed_comm", "JobExposedCommunication"),
    ("tl202_collective_straggler", "CollectiveStraggler"),
    ("tl203_slow_iterations", "SlowRankIterations"),
    ("tl204_load_imbalance", "ComputeImbalance"),
    ("tl205_collective_bandwidth", "CollectiveBandwidth"),
)


def builtin_rules() -> list:
    """The rule classes of TABLE, imported on demand (the catalogue needs no trace)."""
    return [getattr(importlib.import_module(f"{__name__}.{module}"), cls) for module, cls in TABLE]
