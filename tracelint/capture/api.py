"""In-process capture API: `with tracelint.profile() as p: ...` then `p.report()`."""
from __future__ import annotations

import tempfile
from pathlib import Path

_active: "Profile | None" = None


def step() -> None:
    """Mark an iteration boundary for the active capture (no-op when none is active)."""
    if _active is not None:
        _active.step()


def torch_activities():
    """CPU always; CUDA (or ROCm, which torch also reports as CUDA) when a device is present."""
    import torch
    from torch.profiler import ProfilerActivity
    acts = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(ProfilerActivity.CUDA)
    return acts


class Profile:
    """A torch.profiler session that writes a Kineto trace and lints it.

    steps: number of iterations to record after `wait` + `warmup` skipped ones; 0 records
    everything between enter and exit (no schedule).
    """

    def __init__(self, out: str | Path | None = None, steps: int = 0, wait: int = 1,
                 warmup: int = 1, with_stack: bool = True, record_shapes: bool = True,
                 profile_memory: bool = False):
        self.out = Path(out) if out else Path(tempfile.mkdtemp(prefix="tracelint-")) / "trace.json"
        self.steps, self.wait, self.warmup = steps, wait, warmup
        self.with_stack, self.record_shapes = with_stack, record_shapes
        self.profile_memory = profile_memory      # [memory] events: the memory timeline
        self.steps_seen = 0
        self._prof = None
        self._exported = False

    def __enter__(self) -> "Profile":
        import torch.profiler as tp
        global _active
        schedule = None
        if self.steps > 0:
            schedule = tp.schedule(wait=self.wait, warmup=self.warmup, active=self.steps, repeat=1)
        self._prof = tp.profile(activities=torch_activities(), schedule=schedule,
                                on_trace_ready=self._export if schedule else None,
                                record_shapes=self.record_shapes, with_stack=self.with_stack,
                                profile_memory=self.profile_memory)
        self._prof.__enter__()
        _active = self
        return self

    def _export(self, prof) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(self.out))
        self._exported = True

    def step(self) -> None:
        self.steps_seen += 1
        if self._prof is not None:
            self._prof.step()

    def __exit__(self, *exc) -> None:
        global _active
        _active = None
        if self._prof is None:  # stepped aside for the script's own profiler
            return
        self._prof.__exit__(*exc)
        if not self._exported and self.steps == 0:
            self._export(self._prof)
        # With a schedule that never reached its active steps nothing was recorded: the caller
        # sees trace_path missing and can profile the whole run instead.

    @property
    def trace_path(self) -> Path:
        return self.out

    def report(self, **kw):
        """Lint the captured trace; returns a tracelint Report."""
        from ..api import lint
        return lint(self.out, **kw)


def profile(**kw) -> Profile:
    return Profile(**kw)
