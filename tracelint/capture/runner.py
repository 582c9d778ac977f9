"""Child-process entry point: run a user's script under torch.profiler.

    python -m tracelint.capture.runner --manifest M.json --out trace.json [opts] -- script.py ARGS
    python -m tracelint.capture.runner ... -- -m package.module ARGS

Iteration boundaries come from every `optimizer.step()` (a global post-hook) and from
`tracelint.capture.step()`. If the script starts a torch.profiler of its own, ours steps aside
(one profiler per process) and the traces the script exports are recorded in the manifest.
"""
from __future__ import annotations

import argparse
import json
import runpy
import sys
from pathlib import Path


def _watch_user_profilers(manifest: dict, ours) -> None:
    """Record trace files written by the script's own profiler(s); `ours` is our Profile."""
    import torch.profiler as tp
    original = tp.profile.export_chrome_trace

    def export(self, path, *a, **kw):
        if self is not ours._prof:
            manifest["user_traces"].append(str(Path(path).resolve()))
        return original(self, path, *a, **kw)
    tp.profile.export_chrome_trace = export

    original_enter = tp.profile.__enter__

    def enter(self):
        from . import api
        if api._active is not None and self is not api._active._prof:
            manifest["user_profiler"] = True
            ours = api._active
            api._active = None
            ours._prof.__exit__(None, None, None)   # step aside: one profiler per process
            ours._prof = None
            ours._exported = True
        return original_enter(self)
    tp.profile.__enter__ = enter


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tracelint.capture.runner")
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--wait", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--no-stack", action="store_true")
    ap.add_argument("--profile-memory", action="store_true")
    ap.add_argument("target", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    target = args.target[1:] if args.target[:1] == ["--"] else args.target
    if not target:
        ap.error("nothing to run")
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from .api import Profile, step
    manifest = {"trace": str(Path(args.out).resolve()), "steps_seen": 0, "user_profiler": False,
                "user_traces": [], "exit_code": 0}
    prof = Profile(out=args.out, steps=args.steps, wait=args.wait, warmup=args.warmup,
                   with_stack=not args.no_stack, profile_memory=args.profile_memory)
    _watch_user_profilers(manifest, prof)
    register_optimizer_step_post_hook(lambda *a, **k: step())
    module = target[1] if target[0] == "-m" else None
    sys.argv = target[1:] if module else target
    try:
        with prof:
            try:
                if module:
                    runpy.run_module(module, run_name="__main__", alter_sys=True)
                else:
                    sys.path.insert(0, str(Path(target[0]).resolve().parent))
                    runpy.run_path(target[0], run_name="__main__")
            except SystemExit as exc:
                code = exc.code
                manifest["exit_code"] = code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        manifest["steps_seen"] = prof.steps_seen
        manifest["trace_written"] = Path(args.out).exists()
        Path(args.manifest).write_text(json.dumps(manifest))
    return int(manifest["exit_code"] or 0)


if __name__ == "__main__":
    sys.exit(main())
