"""`tracelint capture -o DIR -- python script.py ARGS`: profile, write the trace, lint it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app, fail
from .blas_threads import user_environment
from .common import stderr
from .lint import Format


def _python_command(cmd: list[str]) -> tuple[str, list[str]]:
    """Split `python [-u] script.py args` / `script.py args` into (interpreter, target)."""
    if Path(cmd[0]).name.startswith("python"):
        rest = [a for a in cmd[1:]]
        while rest and rest[0].startswith("-") and rest[0] != "-m":
            rest = rest[1:]   # interpreter flags such as -u
        return cmd[0], rest
    if cmd[0].endswith(".py"):
        return sys.executable, cmd
    raise fail(f"capture runs Python programs: `-- python script.py ...` (got {cmd[0]!r}); "
               "use --nsys for other programs")


def _run_torch(cmd: list[str], out_dir: Path, steps: int, wait: int, warmup: int, stack: bool,
               memory: bool = False) -> dict:
    python, target = _python_command(cmd)
    manifest = out_dir / "capture-manifest.json"
    trace = out_dir / "trace.json"
    argv = [python, "-m", "tracelint.capture.runner", "--manifest", str(manifest), "--out", str(trace),
            "--steps", str(steps), "--wait", str(wait), "--warmup", str(warmup),
            *([] if stack else ["--no-stack"]), *(["--profile-memory"] if memory else []),
            "--", *target]
    env = user_environment()
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    res = subprocess.run(argv, env=env)
    if not manifest.exists():
        raise fail(f"the program failed before profiling started (exit {res.returncode})")
    return json.loads(manifest.read_text())


def _run_nsys(cmd: list[str], out_dir: Path, gpu_metrics: bool, memory: bool = False) -> Path:
    nsys = shutil.which("nsys")
    if nsys is None:
        raise fail("nsys (Nsight Systems CLI) is not on PATH; install it or capture with torch.profiler "
                   "(drop --nsys)")
    rep = out_dir / "report"
    argv = [nsys, "profile", "-t", "cuda,nvtx,osrt", "--force-overwrite", "true", "-o", str(rep)]
    if gpu_metrics:
        argv.append("--gpu-metrics-device=all")
    if memory:
        argv.append("--cuda-memory-usage=true")
    res = subprocess.run([*argv, *cmd], env=user_environment())
    reps = sorted(out_dir.glob("report.*rep"))
    if not reps:
        raise fail(f"nsys profile wrote no report (exit {res.returncode})")
    sqlite = out_dir / "report.sqlite"
    ex = subprocess.run([nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(sqlite),
                         str(reps[-1])], capture_output=True, text=True)
    if ex.returncode != 0 or not sqlite.exists():
        raise fail(f"nsys export failed: {(ex.stderr or ex.stdout).strip().splitlines()[-1:]}")
    return sqlite


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def capture(
    ctx: typer.Context,
    output: Annotated[str, typer.Option("--output", "-o", help="Folder for the trace and report.")] = "tracelint-capture",
    steps: Annotated[int, typer.Option("--steps", help="Iterations to record (0: the whole run).")] = 3,
    wait: Annotated[int, typer.Option("--wait", help="Iterations skipped before warm-up.")] = 1,
    warmup: Annotated[int, typer.Option("--warmup", help="Warm-up iterations (profiled, discarded).")] = 1,
    with_stack: Annotated[bool, typer.Option("--with-stack/--no-stack", help="Record Python stacks (findings point at source lines).")] = True,
    profile_memory: Annotated[bool, typer.Option("--profile-memory", help="Record allocator events (torch.profiler profile_memory; with --nsys: --cuda-memory-usage=true): the memory timeline, TL039/TL040.")] = False,
    nsys: Annotated[bool, typer.Option("--nsys", help="Capture with Nsight Systems instead of torch.profiler.")] = False,
    gpu_metrics: Annotated[bool, typer.Option("--gpu-metrics", help="With --nsys: sample GPU hardware metrics.")] = False,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Report format printed after capture.")] = Format.terminal,
    lint_after: Annotated[bool, typer.Option("--lint/--no-lint", help="Lint the trace after capture.")] = True,
    select: Annotated[Optional[list[str]], typer.Option("--select", help="Rules to run.")] = None,
):
    """Profile a program (`-- python script.py ARGS`), write its trace, then lint it."""
    cmd = list(ctx.args)
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    if not cmd:
        raise fail("nothing to capture: give the program after `--`, e.g. `tracelint capture -- python train.py`")
    out_dir = Path(output)
    out_dir.mkdir(parents=True, exist_ok=True)
    if nsys:
        trace = _run_nsys(cmd, out_dir, gpu_metrics, profile_memory)
    else:
        try:
            import torch  # noqa: F401
        except ImportError:
            raise fail("torch is not installed; `pip install tracelint[capture]` or install PyTorch") from None
        m = _run_torch(cmd, out_dir, steps, wait, warmup, with_stack, profile_memory)
        if m["user_profiler"] and m["user_traces"]:
            stderr.print(f"the program runs torch.profiler itself: linting its trace {m['user_traces'][-1]}")
            trace = Path(m["user_traces"][-1])
        elif not m.get("trace_written"):
            stderr.print(f"saw {m['steps_seen']} iteration boundaries (optimizer.step() or "
                         f"tracelint.capture.step()), fewer than wait+warmup+steps={wait + warmup + steps}: "
                         "profiling the whole run instead")
            m = _run_torch(cmd, out_dir, 0, 0, 0, with_stack, profile_memory)
            trace = Path(m["trace"])
        else:
            trace = Path(m["trace"])
        if m["exit_code"]:
            stderr.print(f"the program exited with code {m['exit_code']}")
    stderr.print(f"trace written: {trace}")
    if not lint_after:
        return
    from .lint import build_config, lint_and_report
    scripts = [str(Path(a).resolve().parent) for a in cmd if a.endswith(".py") and Path(a).is_file()]
    raise typer.Exit(lint_and_report(
        [str(trace)], build_config(None, select, None, None, None, None, scripts[:1]), fmt))
