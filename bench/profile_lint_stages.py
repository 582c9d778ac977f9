"""Where a lint's memory and CPU go: `tracelint lint ARGS...` with RSS and CPU per stage.

    python bench/profile_lint_stages.py lint FILE -f json -o /dev/null

Prints one line per stage to stderr (wall since start, process CPU and its system part, page
faults, current RSS, peak RSS):
load, every rule, the what-if graph build, each replay, the critical path. Used for the
nsys 10 M-kernel figures in docs/performance.md (input from bench/replicate_nsys.py).
"""
from __future__ import annotations

import resource
import sys
import time

T0 = time.perf_counter()


def mark(what: str) -> None:
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * resource.getpagesize() / 2**20
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{time.perf_counter() - T0:7.3f}s cpu {ru.ru_utime + ru.ru_stime:7.2f} (sys "
          f"{ru.ru_stime:5.1f}, faults {ru.ru_minflt // 1000:6d} k) rss {rss:7.0f} "
          f"peak {ru.ru_maxrss / 1024:7.0f} MiB  {what}", file=sys.stderr, flush=True)


def _wrap(mod, name: str, label: str) -> None:
    f = getattr(mod, name)

    def g(*a, **k):
        mark(f"start {label}")
        r = f(*a, **k)
        mark(f"done {label}")
        return r
    setattr(mod, name, g)


def main(argv: list[str]) -> None:
    import tracelint.api as api
    import tracelint.cli.common as common
    import tracelint.engine.runner as runner
    import tracelint.whatif.analysis as wa
    _wrap(common, "load_trace", "load")
    _wrap(runner, "project", "what-if (project)")
    for name in ("build", "replay", "critical_path"):
        _wrap(wa, name, f"  {name}")
    available = api.available_rules

    def rules(*a, **k):
        out = available(*a, **k)
        for r in out:
            def check(self, ctx, _o=r.check, _id=r.id):
                res = list(_o(self, ctx))
                mark(f"rule {_id}: {len(res)} findings")
                return res
            r.check = check
        return out
    api.available_rules = rules
    from tracelint.cli.app import main as cli
    try:
        cli(argv)
    except SystemExit as e:
        mark(f"exit {e.code}")


if __name__ == "__main__":
    main(sys.argv[1:])
