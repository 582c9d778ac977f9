"""Kernel and API classification across vendors, libraries and name manglings."""
from __future__ import annotations

import pytest

import tracelint
from conftest import TRACES
from tracelint.timeline.classify import api_role, kernel_class, strip_api_version, sync_kind

CASES = {
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)": "communication",
    "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*)": "communication",
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(...)": "communication",
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)": "layout",
    "void scal_kernel<float, float, 1, true>(cublasTransposeParams<float>, float const*, float*)": "other",
    "Marlin<256, 1, 8, 8, 4, 8>(int4 const*, int4 const*, int4*, int4 const*, int, int, int, int*)": "gemm",
    "void dequantize_int4_kernel<__half>(int const*, __half*)": "dequant",
    "ampere_sgemm_32x32_sliced1x4_tn": "gemm",
    "Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1": "gemm",
    "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionIN7PermuteE": "gemm",
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda>>(int)": "layout",
    "batched_transpose_16x32_half": "layout",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float)": "reduction",
    "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4>>": "attention",
}


@pytest.mark.parametrize("name,cls", CASES.items())
def test_kernel_class(name, cls):
    assert kernel_class(name) == cls


def test_api_roles_cuda_driver_hip():
    assert api_role(strip_api_version("cudaLaunchKernel_v7000")) == "launch"
    assert api_role("cuLaunchKernelEx") == "launch" and api_role("hipExtModuleLaunchKernel") == "launch"
    assert api_role("hipGraphLaunch") == "launch"
    assert api_role(strip_api_version("cudaStreamSynchronize_v3020")) == "sync"
    assert api_role("cuStreamSynchronize") == "sync" and api_role("hipDeviceSynchronize") == "sync"
    assert api_role("hipMemcpyWithStream") == "copy" and api_role("cuMemcpyHtoDAsync_v2") == "copy"
    assert api_role("cudaMalloc") == "alloc" and api_role("hipFree") == "alloc"
    assert sync_kind("cudaStreamWaitEvent") == "stream_wait_event" and sync_kind("cuCtxSynchronize") == "device"


@pytest.mark.parametrize("name", ["hta_nccl_a100_rank0of2.json.gz", "tracelens_mi300x_resnet_actckpt_rank0of8.json.gz"])
def test_communication_on_real_traces(name):
    path = TRACES / "torch" / name
    if not path.exists():
        pytest.skip("real trace not present")
    tl = tracelint.load(path)
    names = tl.kernels["name"].astype(str)
    is_comm = tl.kernel_class == "communication"
    nccl_named = names.str.contains("nccl|rccl", case=False).to_numpy()
    assert nccl_named.any()
    assert (is_comm[nccl_named]).all()           # every NCCL/RCCL kernel is communication
    assert not (is_comm & ~nccl_named).any()     # and nothing else is, on these traces
