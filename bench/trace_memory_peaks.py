"""Where a lint's memory peaks, without the heap's free space: every numpy array is traced.

    python bench/trace_memory_peaks.py FILE [N] [STAGE]

Runs load, every rule and the what-if stage of `tracelint lint FILE` under `tracemalloc`,
polled every 3 ms. Prints the traced peak of each stage (rules by id; "between": after the
rules, the savings replays' plans and the path's breakdown) and the N (default 25) largest
allocations alive at the overall peak (or at STAGE's own peak: a rule id, build, replay ...),
by the tracelint lines that made them. RSS
(bench/profile_lint_stages.py) also counts freed memory the heap keeps between stages, so
it cannot say which arrays to cut. Used for the 3 M-kernel table in docs/performance.md
("Eighth pass"); tracing slows the lint about 1.5x.
"""
from __future__ import annotations

import sys
import threading
import time
import tracemalloc


def main(path: str, top: int, at: str | None = None) -> None:
    from tracelint.heap import keep_freed_pages
    keep_freed_pages()
    import tracelint
    import tracelint.engine.runner as runner
    import tracelint.whatif.analysis as wa
    from tracelint.api import available_rules

    stage, peaks, best = ["load"], {}, [0, None, ""]
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            cur, _ = tracemalloc.get_traced_memory()
            peaks[stage[0]] = max(peaks.get(stage[0], 0), cur)
            if cur > best[0] * 1.01 and at in (None, stage[0]):
                best[:] = [cur, tracemalloc.take_snapshot(), stage[0]]
            time.sleep(0.003)

    def staged(fn, name):
        def run(*a, **k):
            outer, stage[0] = stage[0], name
            try:
                return fn(*a, **k)
            finally:
                stage[0] = outer
        return run

    for name in ("build", "replay", "critical_path"):
        setattr(wa, name, staged(getattr(wa, name), name))
    rules = available_rules()
    for r in rules:
        def check(self, ctx, _check=r.check, _id=r.id):
            stage[0] = _id
            out = list(_check(self, ctx))
            stage[0] = "between"
            return out
        r.check = check
    tracemalloc.start(10)
    watcher = threading.Thread(target=poll)
    watcher.start()
    runner.run_rules(tracelint.load(path), rules)
    done.set()
    watcher.join()
    print(f"traced peak {best[0] / 2**20:.0f} MiB, in {best[2]}")
    for name, v in sorted(peaks.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {name:16s} {v / 2**20:8.0f} MiB")
    for st in best[1].statistics("traceback")[:top]:
        mine = [f"{f.filename.split('/')[-1]}:{f.lineno}" for f in st.traceback
                if "/tracelint/" in f.filename or "/rules/" in f.filename]
        print(f"{st.size / 2**20:8.1f} MiB  {' <- '.join(reversed(mine[-4:]))}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25,
         sys.argv[3] if len(sys.argv) > 3 else None)
