"""GPU names: host link and tensor cores by device name, and the architecture a kernel was
built for (from its name).

Part of the name classification (`timeline.classify` re-exports every public name).
"""
from __future__ import annotations

import re

# ----- GPU (device) names: host link and tensor cores ---------------------------------------
#: (device-name pattern, usable host-link GB/s, link) in priority order: the peak a host copy
#: is compared against.
HOST_LINKS = (
    (r"GH200|GB200|Grace", 450.0, "NVLink-C2C"),
    (r"H100|H200|H800|H20\b|B200|B100|L40|MI300|MI325|MI355", 50.0, "PCIe Gen5 x16"),
    (r"A100|A800|A10\b|A30|A40|A6000|RTX 30|RTX 40|RTX A|3090|3080|4090|MI2\d0|MI100", 25.0, "PCIe Gen4 x16"),
    (r"V100|T4|RTX 20|2080|TITAN|P100|Quadro|MI50|MI60", 12.0, "PCIe Gen3 x16"),
)
#: GPUs whose tensor cores take FP32 inputs via TF32, and GPUs with FP16-only tensor cores.
_TF32_GPUS = re.compile(r"A100|A10|A30|A40|A800|H100|H200|H800|GH200|B100|B200|GB200|L4|L40|RTX (?:30|40|50)|RTX A\d", re.I)
_FP16_TC_GPUS = re.compile(r"V100|T4|TITAN V|RTX 20|Quadro RTX|RTX \d000", re.I)


def host_link(device_name: str) -> tuple[float, str] | None:
    """(peak GB/s, link name) of the GPU's host link, from its name; None when not known."""
    for pattern, gbps, link in HOST_LINKS:
        if device_name and re.search(pattern, device_name, re.I):
            return gbps, link
    return None


def tensor_cores_by_name(device_name: str) -> str | None:
    """'tf32' (FP32 inputs can use TF32 tensor cores), 'fp16' (FP16-only tensor cores) or
    None (none, or a GPU name this list does not know)."""
    if device_name and _TF32_GPUS.search(device_name):
        return "tf32"
    if device_name and _FP16_TC_GPUS.search(device_name):
        return "fp16"
    return None


# ----- which GPU architecture a kernel was built for --------------------------------------
#: Architecture tags in kernel names: CUTLASS `cutlass_75_*`, xmma/cuBLASLt `sm75_*`,
#: CUTLASS 3 `arch::Sm80`, cuBLAS `volta_* / turing_* / ampere_*`.
ARCH_TAG = re.compile(r"cutlass_(\d)(\d)_|\bsm_?(\d)(\d)_|arch::Sm(\d)(\d)\b|\b(volta|turing|ampere|hopper)_",
                      re.IGNORECASE)
_NAMED = {"volta": (7, 0), "turing": (7, 5), "ampere": (8, 0), "hopper": (9, 0)}
#: Tensor-core kernels only: an old SIMT kernel (pooling, sgemm) is no tensor-core fallback.
TENSOR_OP = re.compile(r"tensorop|h884|h1688|h16816|s1688|s16816|i8816|hmma|wgmma|imma|tensor\d+x\d+x\d+",
                       re.IGNORECASE)


def is_tensor_op_kernel(name: str) -> bool:
    """True for a tensor-core kernel by its name (TENSOR_OP)."""
    return bool(TENSOR_OP.search(name))


def is_align1_kernel(name: str) -> bool:
    """True for a library kernel built for 1-element alignment (CUTLASS / cuBLAS `align1`):
    the operands' dimensions were not 16-byte aligned, so the library fell back."""
    return "align1" in name


def arch_of(name: str) -> tuple[int, int] | None:
    """(major, minor) the kernel was built for, from its name; None when untagged."""
    m = ARCH_TAG.search(name)
    if not m:
        return None
    g = m.groups()
    if g[6]:
        return _NAMED[g[6].lower()]
    digits = next((g[i:i + 2] for i in (0, 2, 4) if g[i]), None)
    return (int(digits[0]), int(digits[1])) if digits else None


def is_old(kernel_cc: tuple[int, int], device_cc: tuple[int, int]) -> bool:
    """Two major generations behind (sm75 on sm90), or Volta/Turing tensor cores on Ampere or
    newer. One generation behind (sm80 kernels on an H100: FlashAttention-2, CUTLASS 2) is
    common and runs the same mma.sync instructions, so it is not reported."""
    return device_cc[0] - kernel_cc[0] >= 2 or (kernel_cc[0] == 7 and device_cc[0] >= 8)
