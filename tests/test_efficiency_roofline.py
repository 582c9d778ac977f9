"""Roofline and MFU on synthetic traces with known shapes and durations (exact values), the
`estimated` evidence status, and every shared trace running without error."""
from __future__ import annotations

import pytest

from conftest import TORCH_TRACES, NSYS_TRACES, needs_shared
from tracelint.efficiency.roofline import efficiency
from tracelint.engine.finding import Evidence, Finding, Layer, Measure, Severity, Where
from tracelint.synth.builder import TraceBuilder

H100_BF16, H100_BW = 989.4e12, 3350e9
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
SOFTMAX = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float>"
BF16 = "c10::BFloat16"


def _trace(tmp_path, steps=2, gemm_ns=1_000_000, softmax_ns=500_000, n=4096):
    b = TraceBuilder()                                  # NVIDIA H100 80GB HBM3
    for s in range(steps):
        with b.step(s):
            with b.op("aten::mm", {"Input Dims": [[n, n], [n, n]], "Input type": [BF16, BF16]}):
                b.launch(GEMM, gemm_ns)
            with b.op("aten::_softmax", {"Input Dims": [[16, n, n], [], []],
                                         "Input type": [BF16, "Scalar", "Scalar"]}):
                b.launch(SOFTMAX, softmax_ns)
            b.sync("cudaDeviceSynchronize")
    return b.write_kineto(tmp_path / "t.json.gz")


def test_exact_achieved_and_percent_of_bound(tmp_path):
    import tracelint
    n = 4096
    e = efficiency(tracelint.load(_trace(tmp_path, n=n)))
    assert e.available
    k = e.kernels.set_index("op")
    flops, nbytes = 2 * n ** 3, 2 * 3 * n * n
    mm = k.loc["aten::mm"]
    assert mm["calls"] == 2 and mm["kernel_ns"] == 2_000_000 and mm["math"] == "bf16"
    assert mm["achieved_flops"] == pytest.approx(flops / 1e-3)               # 137.4 TFLOP/s
    t_min = max(flops / H100_BF16, nbytes / H100_BW)
    assert mm["pct_of_bound"] == pytest.approx(t_min / 1e-3)                # 13.9 %
    assert mm["bound"] == "compute" and mm["intensity"] == pytest.approx(flops / nbytes)
    sm = k.loc["aten::_softmax"]
    sm_bytes = 2 * 2 * 16 * n * n
    assert sm["bound"] == "memory"
    assert sm["achieved_bps"] == pytest.approx(sm_bytes / 0.5e-3)
    assert sm["pct_of_bound"] == pytest.approx((sm_bytes / H100_BW) / 0.5e-3)
    dev = e.devices[0]
    assert dev.match.spec.key == "H100-SXM" and dev.modelled_ns == dev.kernel_ns
    # MFU: model FLOPs (the GEMMs) at peak over the device's kernel window
    assert dev.mfu == pytest.approx(2 * flops / H100_BF16 / (dev.window_ns * 1e-9))
    its = dev.iterations
    assert [i["step"] for i in its] == [0, 1]
    assert its[0]["model_flops"] == flops
    d = e.to_dict()
    assert d["status"] == "estimated" and d["devices"][0]["status"] == "estimated"
    assert d["kernels"][0]["op"] == "aten::mm"


def test_trace_without_shapes_names_the_capture_option(tmp_path):
    import tracelint
    b = TraceBuilder()
    with b.step(0):
        b.launch(GEMM, 100_000, op="aten::mm")
    e = efficiency(tracelint.load(b.write_kineto(tmp_path / "t.json.gz")))
    assert not e.available and "record_shapes=True" in e.capture_hint
    e2 = efficiency(tracelint.load(b.write_nsys_sqlite(tmp_path / "t.sqlite")))
    assert not e2.available and "record_shapes=True" in e2.capture_hint


def test_unknown_device_gives_rates_but_no_bound(tmp_path):
    import tracelint
    b = TraceBuilder(device_name="Mystery Accelerator 9000")
    with b.step(0), b.op("aten::mm", {"Input Dims": [[64, 64], [64, 64]], "Input type": [BF16, BF16]}):
        b.launch(GEMM, 10_000)
    e = efficiency(tracelint.load(b.write_kineto(tmp_path / "t.json.gz")))
    row = e.kernels.iloc[0]
    assert row["achieved_flops"] == pytest.approx(2 * 64 ** 3 / 10e-6)
    assert row["bound"] == "unknown" and e.devices[0].mfu is None
    assert "unknown device" in e.devices[0].match.reason


def test_estimated_evidence_is_weaker_than_measured():
    est = Evidence.estimated("GEMM at 14% of its roofline bound", "t_min / t",
                             {"flops": 1.0}, pct=Measure(0.14, "ratio"))
    d = est.to_dict()
    assert d["status"] == "estimated" and d["formula"] == "t_min / t" and d["inputs"] == {"flops": 1.0}

    def finding(kernel_ev):
        return Finding("TL999", "x", "t", Severity.INFO, "m", 1, 10, Where(),
                       {Layer.SYSTEM: Evidence.measured("s"), Layer.KERNEL: kernel_ev})
    assert finding(Evidence.measured("k")).verdict == "agree"
    assert finding(est).verdict == "partial"             # not "agree": nothing measured it
    contra = Evidence.estimated("e", "f", supports=False)
    assert finding(contra).verdict == "partial"          # an estimate alone is no conflict
    assert Evidence.measured("s").to_dict().get("formula") is None   # old shape unchanged


@needs_shared()
@pytest.mark.parametrize("path", TORCH_TRACES + NSYS_TRACES, ids=lambda p: p.name)
def test_every_shared_trace_runs(path):
    import tracelint
    tl = tracelint.load(path)
    e = efficiency(tl)
    d = e.to_dict()
    if "shapes" in tl.meta.captured and len(tl.kernels) and e.available:
        for dev in d["devices"]:
            assert dev["mfu"] is None or 0 <= dev["mfu"] < 1.0
        for r in d["kernels"]:
            assert r["kernel_ns"] > 0 and r["flops"] >= 0
    elif len(tl.kernels):
        assert not e.available
        if "shapes" not in tl.meta.captured:
            assert "record_shapes=True" in d["capture_hint"]


def test_info_shows_mfu_and_the_missing_shapes_hint(tmp_path):
    import json
    from conftest import run_cli
    path = _trace(tmp_path)
    r = run_cli("info", "--json", path)
    assert r.returncode == 0, r.stderr
    eff = json.loads(r.stdout)["efficiency"]
    n = 4096
    dev = eff["devices"][0]
    assert eff["status"] == "estimated" and dev["matched"] == "H100-SXM"
    assert dev["mfu"] == pytest.approx(2 * 2 * n ** 3 / H100_BF16 / (dev["window_ns"] * 1e-9), abs=1e-5)
    text = run_cli("info", path).stdout
    assert "MFU" in text and "estimated" in text
    b = TraceBuilder()
    with b.step(0):
        b.launch(GEMM, 100_000, op="aten::mm")
    bare = run_cli("info", b.write_kineto(tmp_path / "bare.json.gz")).stdout
    assert "record_shapes=True" in " ".join(bare.split())


def test_html_report_has_roofline_and_table(tmp_path):
    import re
    import xml.etree.ElementTree as ET
    import tracelint
    from tracelint.reporters import render
    html = render(tracelint.lint(_trace(tmp_path)), "html")
    svg = re.search(r'<svg[^>]*aria-label="Roofline.*?</svg>', html, re.S).group(0)
    root = ET.fromstring(svg)
    ns = {"s": "http://www.w3.org/2000/svg"}
    pts = root.findall("s:circle", ns)
    assert len(pts) == 2                                   # mm and softmax
    big = max(pts, key=lambda c: float(c.get("r")))
    assert "aten::mm" in big.find("s:title", ns).text      # the GEMM has most of the time
    assert len(root.findall("s:polyline", ns)) >= 1        # the roofs
    assert "Kernel efficiency" in html and "estimated" in html
    assert ">measured<" not in html.split("Kernel efficiency")[1].split("<h2>")[0]


def test_ncu_measurements_shown_beside_the_estimate(tmp_path):
    import json
    import tracelint
    from tracelint.reporters import render
    csv = tmp_path / "ncu.csv"
    csv.write_text('"ID","Kernel Name","dram__throughput.avg.pct_of_peak_sustained_elapsed",'
                   '"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"\n'
                   '"","","%","%"\n'
                   f'"0","{GEMM}","12.5","71.0"\n"1","{GEMM}","13.5","73.0"\n')
    doc = json.loads(render(tracelint.lint(_trace(tmp_path), ncu=csv), "json"))
    rows = {r["op"]: r for r in doc["efficiency"]["kernels"]}
    m = rows["aten::mm"]["measured"]
    assert m["status"] == "measured" and m["source"] == "Nsight Compute"
    assert m["metrics"]["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == 13.0
    assert rows["aten::mm"]["pct_of_bound"] is not None            # the estimate stays beside
    assert "measured" not in rows["aten::_softmax"]                # no ncu row for it
