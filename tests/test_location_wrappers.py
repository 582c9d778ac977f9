"""Narrowing a Python frame to its call through decorator wrappers (engine/location.py).

torch.profiler names `opt.step()` as `wrapper` -> `_use_grad` -> `step` below the user's frame,
and `opt.zero_grad()` as `inner` -> `_fn` -> `zero_grad`; the body never calls `wrapper`, so the
next frames down are tried. Stacks here are written by hand, the source lines counted in the test.
"""
from __future__ import annotations

import pandas as pd

from tracelint.engine import location

SOURCE = """\
def train_step(opt, model, x):
    opt.zero_grad()
    loss = model(x).sum()
    loss.backward()
    opt.step()
    model.step()
    return loss
"""


def _stack(tmp_path, *inner: tuple[str, str]):
    """enc as Context passes it: innermost frame first; the user frame `train_step` outermost."""
    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    frames = [*reversed(inner), (str(path), "train_step")]
    enc = pd.DataFrame({"file": [f for f, _ in frames], "function": [fn for _, fn in frames],
                        "line": [10] * len(inner) + [1], "start": [100] * len(frames),
                        "end": [200] * len(frames), "depth": list(range(len(frames), 0, -1))})
    site = location.site_in_stack(enc, lines="def")
    return location.narrow(site, path)


def _line(text: str) -> int:
    return next(i for i, ln in enumerate(SOURCE.splitlines(), 1) if ln.strip() == text)


def test_step_through_its_wrappers(tmp_path):
    site = _stack(tmp_path, ("torch/optim/optimizer.py", "wrapper"), ("torch/optim/optimizer.py", "_use_grad"),
                  ("torch/optim/adam.py", "zero_grad"))
    # zero_grad is the first name the body calls once: its line, and the callee says so
    assert (site.line, site.line_kind, site.callee) == (_line("opt.zero_grad()"), "call", "zero_grad")


def test_zero_grad_through_compile_wrappers(tmp_path):
    site = _stack(tmp_path, ("torch/_compile.py", "inner"), ("torch/_dynamo/eval_frame.py", "_fn"),
                  ("torch/optim/optimizer.py", "zero_grad"), ("torch/optim/optimizer.py", "deeper"))
    assert (site.line, site.line_kind) == (_line("opt.zero_grad()"), "call")


def test_ambiguous_name_keeps_the_definition(tmp_path):
    # `step` is called on two lines (opt.step(), model.step()): no guess
    site = _stack(tmp_path, ("torch/optim/optimizer.py", "wrapper"), ("torch/optim/optimizer.py", "_use_grad"),
                  ("torch/optim/adam.py", "step"))
    assert (site.line, site.line_kind) == (1, "def")


def test_too_deep_or_module_call_is_not_looked_through(tmp_path):
    three = _stack(tmp_path, ("torch/a.py", "wrapper"), ("torch/a.py", "w2"), ("torch/a.py", "w3"),
                   ("torch/optim/optimizer.py", "zero_grad"))
    assert (three.line, three.line_kind) == (1, "def")        # more than two wrappers deep
    module = _stack(tmp_path, ("torch/nn/modules/module.py", "_wrapped_call_impl"),
                    ("torch/nn/modules/module.py", "_call_impl"), ("torch/optim/optimizer.py", "zero_grad"))
    assert (module.line, module.line_kind) == (1, "def")      # a module call: never


def _site_of(frames: list[tuple[str, str]], in_tree) -> location.SourceSite:
    """frames innermost first, as Context passes them."""
    enc = pd.DataFrame({"file": [f for f, _ in frames], "function": [fn for _, fn in frames],
                        "line": [10] * len(frames), "start": [100] * len(frames),
                        "end": [200] * len(frames), "depth": list(range(len(frames), 0, -1))})
    return location.site_in_stack(enc, lines="def", in_tree=in_tree)


def test_library_frames_found_in_the_tree_do_not_hide_the_users_program():
    """tracelint's own capture runner is in the tree when tracelint runs from its checkout; the
    program it ran is not (it ran from elsewhere): the program's frame is still the site."""
    frames = [("torch/_dynamo/utils.py", "log_event_start"), ("train.py", "<module>"),
              ("tracelint/capture/runner.py", "main")]
    site = _site_of(frames, in_tree=lambda f: f.startswith("tracelint/"))
    assert (site.file, site.library) == ("train.py", False)
    # a user file that is in the tree still wins over one that is not
    site = _site_of([("helpers.py", "f"), ("train.py", "<module>")], in_tree=lambda f: f == "train.py")
    assert site.file == "train.py"


def test_torch_compile_generated_code_is_not_the_users():
    frames = [("/tmp/torchinductor_alice/lw/clw2akc2mzmaq.py", "call"),
              ("/home/alice/.triton/cache/ab/kernel.py", "launcher"), ("train.py", "<module>")]
    assert _site_of(frames, in_tree=None).file == "train.py"
    assert not location.is_library("/home/alice/torchinductor_notes.py")


def test_source_at_is_the_site_of_the_frames_enclosing_the_time(monkeypatch):
    """Context.source_at finds a thread's enclosing frames with numpy and remembers the site
    per set of frames; at every frame's start, middle and end, and with each frame written
    twice (ties in depth and start), it answers what filtering and sorting the frames with
    pandas and reading their site did."""
    import numpy as np
    import tracelint
    from conftest import REPO
    from tracelint.engine.context import Context
    tl = tracelint.load(REPO / "fixtures" / "captures" / "h200" / "torch_h200_train_step_anti.json.gz")
    frames = tl.python_frames
    assert len(frames) > 1000
    tl.python_frames = pd.concat([frames, frames.iloc[::7]]).reset_index(drop=True)
    ctx = Context(tl)
    lines = str(tl.meta.extra.get("python_frame_lines", "def"))

    def by_pandas(pid, tid, t):
        f = ctx._frames_by_thread.get((pid, tid))
        enc = f[(f["start"] <= t) & (f["end"] > t)].sort_values(["depth", "start"], ascending=False)
        site = location.site_in_stack(enc, ctx._opened_at_start.get((pid, tid), ()), lines, ctx._in_tree) if len(enc) else None
        return None if site is None else ctx._narrowed(site)
    f = tl.python_frames.iloc[::23]
    times = np.concatenate([f["start"], (f["start"] + f["end"]) // 2, f["end"] - 1, f["end"]])
    threads = np.tile(f[["pid", "tid"]].to_numpy(), (4, 1))
    found = 0
    for (pid, tid), t in zip(threads.tolist(), times.tolist()):
        got = ctx.source_at(pid, tid, t)
        assert got == by_pandas(pid, tid, t), (pid, tid, t)
        found += got is not None
    assert found > len(times) // 2


PROFILER = "torch/profiler/profiler.py"


def _frames(rows: list[tuple]) -> pd.DataFrame:
    """(function, depth, start_us, end_us[, file]) of one thread's frames, line 1 each; the
    file is prog.py unless given."""
    return pd.DataFrame({"file": [r[4] if len(r) > 4 else "prog.py" for r in rows],
                         "function": [r[0] for r in rows], "line": 1,
                         "start": [r[2] * 1000 for r in rows], "end": [r[3] * 1000 for r in rows],
                         "depth": [r[1] for r in rows]})


def _kind_at(frames: pd.DataFrame, t_us: int) -> tuple[str, str]:
    """(function, line_kind) of the site at a time."""
    t = t_us * 1000
    enc = frames[(frames["start"] <= t) & (frames["end"] > t)].sort_values("depth", ascending=False)
    opened = location.open_at_start(frames, (int(frames["start"].min()), int(frames["end"].max())))
    site = location.site_in_stack(enc, opened, lines="def")
    return site.function, site.line_kind


def test_a_call_in_a_short_capture_is_not_taken_for_the_stack_open_at_start():
    """CI's flake: in a 2.2 ms capture, `log_loss` ran from 0.9 to 1.3 ms. Within 1 ms of both
    ends of the window, it was called "open when profiling started", and its def line a "start"
    line. The stack open at start is the chain the tracer writes first, microseconds apart,
    down to the profiler's own frames on the thread that started it (as in CI's capture)."""
    frames = _frames([("<module>", 0, 0, 2200), ("wrapper", 1, 2, 400), ("step", 2, 4, 390),
                      ("start_trace", 3, 6, 120, PROFILER), ("perf_counter", 4, 9, 10, "<built-in>"),
                      ("log_loss", 1, 900, 1300), ("item", 2, 1000, 1100)])
    assert _kind_at(frames, 950) == ("log_loss", "def")
    assert _kind_at(frames, 200) == ("step", "start")     # open at start, though it returned early
    assert _kind_at(frames, 2000) == ("<module>", "start")
    window = (0, 2_200_000)
    assert location.open_at_start(frames, window) == frozenset({0, 1, 2, 3})   # not the call after
    # a thread whose first frame came after profiling began has nothing open at its start
    later = frames.assign(start=frames["start"] + 1_500_000)
    assert location.open_at_start(later, window) == frozenset()
    # nor one whose first frame returned early: that frame was a call (synthetic traces)
    assert location.open_at_start(frames[frames["function"] != "<module>"], window) == frozenset()
    # a call made 0.2 ms after the stack was written is not part of it
    late = _frames([("<module>", 0, 0, 2200), ("log_loss", 1, 200, 2100)])
    assert location.open_at_start(late, window) == frozenset({0})
    # another thread (no profiler frames): its open stack is taken whole, frames that return
    # early too (a monitor thread's `wait` wakes up mid-capture)
    worker = _frames([("_bootstrap", 0, 0, 2200), ("run", 1, 2, 2200), ("wait", 2, 4, 1500),
                      ("notify", 2, 1600, 1700)])
    assert location.open_at_start(worker, window) == frozenset({0, 1, 2})
