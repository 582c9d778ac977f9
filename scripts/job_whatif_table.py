"""The job replay table of docs/whatif.md ("Jobs"): replay fidelity per job (no edit) and the
straggler saving against the fixed twin.

    .venv/bin/python scripts/job_whatif_table.py [TRACES]   (TRACES: ../shared/traces)
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from tracelint.engine.config import Config
from tracelint.ranks.job import lint_job
from tracelint.ranks.job_whatif import JobWhatIf
from tracelint.ranks.synth import RawTrace, make_job

JOB_RULES = ["TL201", "TL202", "TL203", "TL204", "TL205"]


def ms(ns) -> str:
    return f"{ns / 1e6:.2f} ms"


def fidelity_row(name: str, paths: list[str]) -> str:
    # job rules only: the per-trace rules are not what this table measures
    rep = lint_job(paths, Config(select=JOB_RULES), jobs=0, replay=False)
    w = JobWhatIf.from_members(rep.ranks, rep.context)
    f = w.fidelity()
    worst = max(abs(r["replayed_span_ns"] - r["span_ns"]) / max(r["span_ns"], 1) for r in f["ranks"])
    err = abs(f["replayed_job_span_ns"] - f["job_span_ns"]) / max(f["job_span_ns"], 1)
    return (f"| {name} | {len(f['ranks'])} | {f['matched_calls']} | {ms(f['job_span_ns'])} | "
            f"{ms(f['replayed_job_span_ns'])} | {err:.2%} | {worst:.2%} |")


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "../shared/traces")
    torch, nsys = root / "torch", root / "nsys"
    tmp = Path(tempfile.mkdtemp(prefix="jobwhatif-"))
    try:
        print("| job | ranks | matched calls | job span | replayed | error | worst rank error |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        pair = tmp / "pair"
        pair.mkdir()
        for n in ("hta_sampled_rank0of128.json.gz", "hta_sampled_rank1of128.json.gz"):
            (pair / n).symlink_to(torch / n)
        print(fidelity_row("hta_sampled rank 0+1 of 128 (windows differ: no call matched)", [str(pair)]))
        print(fidelity_row("nsys2026.2 2-GPU H100 slice (2 processes, no collective)",
                           [str(nsys / "nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite")]))
        raw = RawTrace.load(torch / "hta_nccl_a100_rank0of2.json.gz")
        for name, kw in (("control", {}), ("planted", {"straggler": 1, "delay_us": 3000.0, "exposed": 2,
                                                          "clock_offsets_us": [0.0, 1700.0, -900.0, 400.0]})):
            d = tmp / name
            d.mkdir()
            make_job(raw, d, ranks=4, **kw)
            print(fidelity_row(f"4 ranks from hta_nccl_a100_rank0of2, {name}", [str(d)]))
        print()
        print("| synthetic job | format | twin span difference | job saving of the finding(s) | saving_all_ns |")
        print("|---|---|---:|---:|---:|")
        import test_job_whatif as t
        for fmt, host in (("kineto", False), ("nsys", False), ("kineto", True)):
            d = tmp / f"syn-{fmt}-{host}"
            d.mkdir()
            late = t._write(t._job(straggler=1, host=host), fmt, d / "late")
            twin = t._write(t._job(straggler=None), fmt, d / "twin")
            rep = lint_job([str(d / "late")], Config(select=["TL202"]), jobs=0)
            (f,) = [x for x in rep.findings if x.rule == "TL202"]
            where = "on the host" if host else "on the GPU"
            print(f"| {t.RANKS} ranks, {t.STEPS} all-reduces, rank 1 late {ms(t.LATE_NS)} each {where} | {fmt} | "
                  f"{ms(t._job_span(late) - t._job_span(twin))} | {ms(f.saving_ns)} | "
                  f"{ms(rep.whatif['saving_all_ns'])} |")
        d = tmp / "loose"
        d.mkdir()
        late = t._write(t._loose_job(slow=2), "kineto", d / "late")
        twin = t._write(t._loose_job(slow=None), "kineto", d / "twin")
        rep = lint_job([str(d / "late")], Config(select=["TL203", "TL204"]), jobs=0)
        got = ", ".join(f"{f.rule} {ms(f.saving_ns)}" for f in rep.sorted_findings())
        print(f"| {t.RANKS} independent ranks, rank 2's GEMMs x{t.SLOW} | kineto | "
              f"{ms(t._job_span(late) - t._job_span(twin))} | {got} | {ms(rep.whatif['saving_all_ns'])} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
