"""Findings identical after a speed-up: every report of this checkout against another revision's.

    python bench/golden_reports.py [--base REV] [--base-path DIR] [--ignore KEY ...] [--scrubbed]
                                   [--also] [FILE ...]

Lints each trace twice, with this working tree and with REV (default HEAD, so uncommitted
changes are what is checked) checked out in a temporary git worktree, and compares the JSON
reports with their timings dropped. Without FILEs: every shared nsys export and torch trace,
the bundled real traces and examples (one of each file name) and, when built, the 287 MB
reference (bench/out/big.json); with --also, those and the FILEs (a generated trace such as
bench/replicate_nvtx_names.py's, which the default set cannot know). Reports are made with
--no-scrub; --scrubbed also compares the default, scrubbed, reports (the report sink's path).
--base-path DIR puts DIR on the other side's PYTHONPATH too: with the default --base HEAD, the
same code is compared with and without an optional package installed in DIR (pyarrow, which
pandas uses when it finds it). --ignore KEY drops that field wherever it appears as well as the
timings (`--ignore doc`: a change that rewrites a rule's documentation, which every report
carries, still has its findings compared).
Prints one line per trace, SAME or DIFF with where the first differences are, and exits 1
when any differs.

The worktree gets a link tracelint/rules -> ../rules: the editable install maps the package
tracelint.rules to this checkout's rules/, so without it the other revision would run this
checkout's rule files.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "traces"
#: report fields that differ from run to run
VOLATILE = frozenset({"timing_s", "generated_at", "tracelint_version", "peak_rss_mib",
                      "elapsed_s"})


def default_traces() -> list[Path]:
    """Every shared and bundled trace, one per file name, and the reference when built."""
    found = [*sorted((SHARED / "nsys").glob("*.sqlite")),
             *sorted((SHARED / "torch").glob("*.json.gz")),
             *sorted((REPO / "fixtures" / "real" / "torch").glob("*.json.gz")),
             *sorted((REPO / "fixtures" / "examples").glob("*.json.gz")),
             *sorted((REPO / "fixtures" / "examples").glob("*.sqlite"))]
    seen: set[str] = set()
    out = [p for p in found if not (p.name in seen or seen.add(p.name))]
    big = REPO / "bench" / "out" / "big.json"
    return out + ([big] if big.exists() else [])


def _stable(x, drop: frozenset = VOLATILE):
    if isinstance(x, dict):
        return {k: _stable(v, drop) for k, v in x.items() if k not in drop}
    if isinstance(x, list):
        return [_stable(v, drop) for v in x]
    return x


def differences(a, b, path: str = "", out: list | None = None, limit: int = 5) -> list[str]:
    """Where two decoded reports differ (JSON paths), the first `limit` of them."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if type(a) is not type(b):
        out.append(f"{path or '/'}: {type(a).__name__} against {type(b).__name__}")
    elif isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'this tree' if k in a else 'the base'}")
            else:
                differences(a[k], b[k], f"{path}/{k}", out, limit)
    elif isinstance(a, list) and len(a) != len(b):
        out.append(f"{path}: {len(a)} items against {len(b)}")
    elif isinstance(a, list):
        for i, (u, v) in enumerate(zip(a, b)):
            differences(u, v, f"{path}[{i}]", out, limit)
    elif a != b:
        out.append(f"{path}: {str(a)[:60]!r} against {str(b)[:60]!r}")
    return out[:limit]


def lint(checkout: Path, trace: Path, out: Path, scrub: bool, env: dict,
         extra_path: str = "", drop: frozenset = VOLATILE) -> dict | str:
    """The stable part of one report, or the reason there is none."""
    argv = [sys.executable, "-m", "tracelint", "lint", str(trace.resolve()), "-f", "json",
            "-o", str(out), "--fail-on", "never"] + ([] if scrub else ["--no-scrub"])
    proc = subprocess.run(argv, cwd=checkout,
                          env={**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(checkout),
                                                                           extra_path]))},
                          capture_output=True, text=True)
    if proc.returncode != 0 or not out.exists():
        return f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1][:120]}"
    return _stable(json.loads(out.read_text()), drop)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--base", default="HEAD", help="revision to compare with (default HEAD)")
    ap.add_argument("--base-path", default="",
                    help="a folder put on the other side's PYTHONPATH too (an optional package)")
    ap.add_argument("--ignore", action="append", default=[], metavar="KEY",
                    help="a report field not to compare, wherever it appears (repeatable)")
    ap.add_argument("--scrubbed", action="store_true", help="also compare scrubbed reports")
    ap.add_argument("--also", action="store_true",
                    help="the FILEs after the default traces, not instead of them")
    args = ap.parse_args()
    traces = default_traces() + args.traces if args.also or not args.traces else args.traces
    drop = VOLATILE | frozenset(args.ignore)
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(base),
                        args.base], check=True)
        try:
            (base / "tracelint" / "rules").symlink_to("../rules")
            env = {**os.environ, "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            differ = 0
            for scrub in ([False, True] if args.scrubbed else [False]):
                print(f"# {'scrubbed' if scrub else '--no-scrub'} reports, this tree against "
                      f"{args.base}" + (f" with {args.base_path}" if args.base_path else ""))
                for t in traces:
                    mine = lint(REPO, t, Path(tmp) / "mine.json", scrub, env, drop=drop)
                    theirs = lint(base, t, Path(tmp) / "theirs.json", scrub, env, args.base_path,
                                  drop)
                    same = mine == theirs and isinstance(mine, dict)
                    n = len(mine.get("findings", [])) if isinstance(mine, dict) else mine
                    print(f"{'SAME' if same else 'DIFF'} {t.name} ({n} findings)", flush=True)
                    if not same:
                        differ += 1
                        where = differences(mine, theirs) if isinstance(mine, dict) and \
                            isinstance(theirs, dict) else [f"this tree: {mine}", f"base: {theirs}"]
                        for line in where:
                            print(f"    {line}")
            print(f"# {differ} of {len(traces) * (2 if args.scrubbed else 1)} differ")
            return 1 if differ else 0
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)],
                           check=False)


if __name__ == "__main__":
    sys.exit(main())
