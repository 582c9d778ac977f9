"""Work models against hand-computed FLOPs and bytes; op -> kernel attribution on a real trace."""
from __future__ import annotations


from conftest import SHARED, needs_shared
from tracelint.efficiency.work import causal_pairs, op_work

BF16, F32 = "c10::BFloat16", "float"


def test_matmul_and_addmm():
    w = op_work("aten::mm", [[128, 256], [256, 512]], [BF16, BF16])
    assert w.flops == 2 * 128 * 512 * 256 == 33_554_432
    assert w.bytes == 2 * (128 * 256 + 256 * 512 + 128 * 512) == 458_752
    assert (w.dtype, w.kind) == ("bf16", "gemm")
    a = op_work("aten::addmm", [[512], [128, 256], [256, 512], [], []],
                [BF16, BF16, BF16, "Scalar", "Scalar"], ["", "", "", "1", "1"])
    assert a.flops == w.flops and a.bytes == w.bytes + 2 * 512
    b = op_work("aten::bmm", [[16, 5185, 64], [16, 64, 5185]], [BF16, BF16])   # owlv2's QK^T
    assert b.flops == 2 * 16 * 5185 * 5185 * 64
    assert b.bytes == 2 * 16 * (5185 * 64 * 2 + 5185 * 5185)
    f = op_work("aten::mm", [[10, 20], [20, 30]], [F32, F32])
    assert f.dtype == "fp32" and f.bytes == 4 * (200 + 600 + 300)


def test_conv_forward_from_concrete_inputs():
    # ViT patch embedding (shared nsfw_vit trace): 16x16 stride 16, no padding -> 14x14
    w = op_work("aten::cudnn_convolution", [[4, 3, 224, 224], [768, 3, 16, 16], [], [], [], [], [], [], []],
                [BF16, BF16, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"],
                ["", "", "[0, 0]", "[16, 16]", "[1, 1]", "1", "False", "False", "True"])
    assert w.inputs["output"] == [4, 768, 14, 14]
    assert w.flops == 2 * 4 * 768 * 14 * 14 * 3 * 16 * 16 == 924_844_032
    assert w.bytes == 2 * (4 * 3 * 224 * 224 + 768 * 3 * 256 + 4 * 768 * 196)
    # MIOpen argument order (bias before padding): 3x3, padding 1, stride 2: 14 -> 7
    m = op_work("aten::miopen_convolution", [[10, 256, 14, 14], [512, 256, 3, 3], [], [], [], [], [], [], []],
                [BF16, BF16, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar"],
                ["", "", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False"])
    assert m.inputs["output"] == [10, 512, 7, 7]
    assert m.flops == 2 * 10 * 512 * 49 * 256 * 9
    # no Concrete Inputs (PyTorch < 1.13): stride unknown, so no estimate rather than a guess
    assert op_work("aten::cudnn_convolution", [[32, 3, 224, 224], [64, 3, 7, 7]], [F32, F32]) is None


def test_conv_backward_passes():
    d = op_work("aten::cudnn_convolution_backward_input", [[], [32, 2048, 7, 7], [2048, 512, 1, 1]],
                ["GenericList", F32, F32])
    assert d.flops == 2 * 32 * 2048 * 49 * 512 and d.inputs["pass"] == "dgrad"
    g = op_work("aten::cudnn_convolution_backward_weight", [[], [32, 2048, 7, 7], [32, 512, 7, 7]],
                ["GenericList", F32, F32], ["[2048, 512, 1, 1]", "", ""])
    assert g.flops == d.flops and g.inputs["pass"] == "wgrad"
    # without the weight size a 1x1 and a padded 3x3 convolution look the same: no estimate
    assert op_work("aten::cudnn_convolution_backward_weight", [[], [32, 64, 56, 56], [32, 64, 56, 56]],
                   ["GenericList", F32, F32]) is None
    both = op_work("aten::convolution_backward",
                   [[10, 512, 7, 7], [10, 512, 7, 7], [512, 512, 3, 3], [], [], [], [], [], [], [], []],
                   [BF16] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"],
                   ["", "", "", "[0]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"])
    assert both.flops == 2 * (2 * 10 * 512 * 49 * 512 * 9)


def _flash(b, s, h, d, causal, sk=None):
    sk = sk or s
    return op_work("aten::_flash_attention_forward",
                   [[b, s, h, d], [b, sk, h, d], [b, sk, h, d]] + [[]] * 12,
                   [BF16] * 3 + ["", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "", "", "", ""],
                   ["", "", "", "", "", str(s), str(sk), "0.", str(causal), "False", "0.125", "", "", "", ""])


def test_attention_causal_and_not():
    full = _flash(2, 8, 4, 16, False)
    assert full.flops == 4 * 2 * 4 * 16 * 8 * 8 == 32_768
    causal = _flash(2, 8, 4, 16, True)
    assert causal.flops == 4 * 2 * 4 * 16 * 36          # 8 + 7 + ... + 1 = 36 pairs
    assert causal.bytes == full.bytes == 2 * 2 * 4 * 16 * (8 * 4)
    assert causal_pairs(4, 8) == 5 + 6 + 7 + 8           # bottom-right aligned: query i sees i+4
    assert causal_pairs(8, 4) == 1 + 2 + 3 + 4
    sdpa = op_work("aten::_scaled_dot_product_flash_attention",
                   [[2, 4, 8, 16], [2, 4, 8, 16], [2, 4, 8, 16], [], [], [], []],
                   [BF16] * 3 + ["Scalar"] * 4, ["", "", "", "0.", "True", "False", ""])
    assert sdpa.flops == causal.flops                   # B,H,S,D layout reads the same


def test_memory_bound_models():
    sm = op_work("aten::_softmax", [[16, 5185, 5185], [], []], [BF16, "Scalar", "Scalar"])
    n = 16 * 5185 * 5185
    assert sm.bytes == 2 * 2 * n and sm.flops == 5 * n and sm.kind == "softmax"
    ln = op_work("aten::native_layer_norm", [[4, 197, 768], [], [768], [768], []],
                 [BF16, "ScalarList", BF16, BF16, "Scalar"])
    assert ln.bytes == 2 * (2 * 4 * 197 * 768 + 2 * 768)
    mul = op_work("aten::mul", [[1, 5185, 1024], []], [BF16, "double"])   # tensor x python scalar
    assert mul.bytes == 2 * 2 * 5185 * 1024 and mul.flops == 5185 * 1024
    cp = op_work("aten::copy_", [[1, 3, 8, 8], [1, 3, 8, 8], []], [BF16, F32, "Scalar"])
    assert cp.bytes == 192 * 2 + 192 * 4 and cp.flops == 0
    emb = op_work("aten::index_select", [[5185, 1024], [], [5185]], [BF16, "Scalar", "long int"],
                  ["", "0", ""])
    assert emb.bytes == 2 * 5185 * 1024 * 2 + 5185 * 8


def test_no_model_or_bad_shapes_give_none():
    assert op_work("aten::unknown_op", [[4, 4]], [BF16]) is None
    assert op_work("aten::mm", [[4, 4]], [BF16]) is None
    assert op_work("aten::mm", "garbage", None) is None
    assert op_work("aten::bmm", [["x", 2, 3], [1, 3, 4]], [BF16, BF16]) is None


@needs_shared()
def test_attribution_matches_external_id_links():
    """On a trace where runtime calls carry the op's External id, the time-containment link
    must agree with it for every kernel it attributes."""
    import tracelint
    from tracelint.efficiency.attribute import op_works

    tl = tracelint.load(SHARED / "traces/torch/tracelens_h100_nsfw_vit_inference.json.gz")
    launch = tl.launch_index("kernels")
    ow = op_works(tl, launch)
    assert len(ow) > 100
    api_ext = tl.api_calls["external_id"].to_numpy()
    r_ext = tl.ranges["external_id"].to_numpy()
    for op_row, krows in zip(ow["op_row"], ow["kernel_rows"]):
        assert {int(api_ext[launch[k]]) for k in krows} == {int(r_ext[op_row])}
    addmm = ow[ow["op"] == "aten::addmm"]
    k = tl.kernels
    dur = (k["end"] - k["start"]).to_numpy()
    assert addmm["kernel_ns"].sum() == sum(int(dur[kr].sum()) for kr in addmm["kernel_rows"])
    first = addmm.iloc[0]["work"]
    assert first.flops == 2 * first.inputs["M"] * first.inputs["N"] * first.inputs["K"]


def test_out_argument_is_written_not_read():
    # relu_ -> clamp_min_ -> clamp_min(self, 0, out=self) (shared V100 ResNet-50 trace)
    w = op_work("aten::clamp_min", [[32, 64, 112, 112], [], [32, 64, 112, 112]], [F32, "Int", F32])
    assert w.bytes == 2 * 4 * 32 * 64 * 112 * 112
    add = op_work("aten::add", [[8, 8], [8, 8], []], [F32, F32, "Scalar"])   # a + b: both read
    assert add.bytes == 3 * 4 * 64


def test_hostile_shapes_give_no_estimate():
    assert op_work("aten::mm", [[-4, 4], [4, 4]], [BF16, BF16]) is None
    assert op_work("aten::mm", [[True, 4], [4, 4]], [BF16, BF16]) is None
    assert op_work("aten::_softmax", [[{"a": 1}], [], []], [BF16, "Scalar", "Scalar"]) is None
    assert op_work("aten::addmm", [[4], [4, 4], [4, 4]], None) is None      # types missing
    assert op_work("aten::_flash_attention_forward", [[1, 2, 3]] * 3, [BF16] * 3) is None


def test_attention_backward_and_transposed_conv():
    # _flash_attention_backward(grad_out, q, k, v, out, lse, cum_q, cum_k, max_q, max_k,
    #                           dropout_p, is_causal, ...): is_causal is argument 11
    dims = [[2, 8, 4, 16]] * 5 + [[]] * 10
    concrete = [""] * 11 + ["True"] + [""] * 3
    bwd = op_work("aten::_flash_attention_backward", dims, [BF16] * 5 + ["Scalar"] * 10, concrete)
    assert bwd.flops == 10 * 2 * 4 * 16 * 36 and bwd.inputs["causal"] and bwd.inputs["pass"] == "bwd"
    tconv = op_work("aten::convolution", [[1, 8, 4, 4], [8, 4, 3, 3], [], [], [], [], [], [], []],
                    [F32, F32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
                    ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[1, 1]", "1"])
    assert tconv is None                                   # transposed: no forward formula


def test_index_select_only_along_rows():
    assert op_work("aten::index_select", [[5185, 1024], [], [5185]], [BF16, "Scalar", "long int"],
                   ["", "1", ""]) is None
    assert op_work("aten::index_select", [[5185, 1024], [], [5185]], [BF16, "Scalar", "long int"]) is None
