"""Kernel and API classification across vendors, libraries and name manglings."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import tracelint
from conftest import TRACES
from tracelint.timeline import classify
from tracelint.timeline.classify import (api_role, is_fp32_cuda_core_gemm, kernel_class, strip_api_version,
                                         sync_kind)

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
    # Tensor-core GEMM libraries whose names say no "gemm" or carry low-bit element types.
    "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNT": "gemm",
    "nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNN": "gemm",
    "bmm_E2m1_E2m1E2m1_Fp32_t128x8x512u2_s3_et128x8_m128x8x64_cga1x1x1_16dp256b_TN_transOut_schedS_sm100a": "gemm",
    "bmm_E4m3_E4m3E4m3_Fp32_t128x16x128_s6_et128x16_m128x16x32_cga1x1x1_16dp256b_TN_schedS_sm100a": "gemm",
    "sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1_execute_kernel": "gemm",
    "Custom_Cijk_Ailk_Bljk_F8BS_BH_MT256x256x64_MI16x16x1_SN_LDSB1": "gemm",
    "triton_tem_fused_addmm_relu_0": "gemm",
    "fused_moe_kernel": "gemm",
    "fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t>)": "attention",
    # Expert-parallel communication: DeepEP-style dispatch/combine and NVSHMEM kernels.
    "void dpsk::ep::intranode::dispatch<8, 768, 6144>(int4*, float*, int*)": "communication",
    "_ZN4dpsk2ep9internode7combineILi4EEEvPv": "communication",
    "void nvshmemi_transfer_rma_nbi_kernel<float>(float*, float const*, unsigned long)": "communication",
    # Library names that are not GEMMs: cuDNN batch norm, TensorRT pooling, fbgemm converters.
    "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float, float)": "reduction",
    "sm50_xmma_pooling_coalescedC_NHWC_kMAX_3_False_execute_kernel_trt": "reduction",
    "void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::_float_to_hfp8_gpu(at::Tensor const&)::{lambda(float)#1}>(int)": "elementwise",
}


@pytest.mark.parametrize("name,cls", CASES.items())
def test_kernel_class(name, cls):
    assert kernel_class(name) == cls


@pytest.mark.parametrize("name,fp32", [
    ("ampere_sgemm_128x64_nn", True),
    ("cudnn_infer_volta_scudnn_128x64_relu_small_nn_v1", True),
    ("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, float const*)", True),
    ("void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, float*)", True),
    ("void cudnn::detail::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false>(int)", True),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4", True),
    ("void cudnn::detail::dgrad_engine<__half, 512, 6, 5, 3, 3, 3, false>(int, __half const*)", False),
    ("sm80_xmma_dgrad_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16", False),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", False),
])
def test_fp32_cuda_core_gemm(name, fp32):
    assert is_fp32_cuda_core_gemm(name) is fp32


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


def test_classify_categorical_keeps_only_labels_that_occur():
    """Counting the codes gives what pandas' remove_unused_categories gives (category order,
    codes and their dtype), on random columns with missing rows and unused categories."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        k, n = int(rng.integers(1, 40)), int(rng.integers(0, 60))
        cat = pd.Categorical.from_codes(rng.integers(-1, k, n), [f"k{i}" for i in range(k)])
        m = int(rng.integers(1, 6))
        fn = lambda s: f"class{int(s[1:]) % m}"  # noqa: E731
        labels = np.array([fn(c) for c in cat.categories], dtype=object)
        uniq, inv = np.unique(labels, return_inverse=True)
        codes = np.asarray(cat.codes)
        want = pd.Categorical.from_codes(inv[np.where(codes >= 0, codes, 0)], uniq) \
            .remove_unused_categories()
        got = classify.classify_categorical(cat, fn)
        assert list(got.categories) == list(want.categories)
        assert got.codes.dtype == want.codes.dtype and np.array_equal(got.codes, want.codes)
