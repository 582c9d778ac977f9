"""Print, for every trace of the shared collection, the best case match of its findings: the
table in docs/cases.md ("How the library matches the shared traces").

    .venv/bin/python scripts/case_match_table.py [TRACES_DIR]
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from tracelint.api import lint
from tracelint.cases.library import builtin_library, load_library
from tracelint.cases.match import trace_context
from tracelint.engine.config import Config

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(os.environ.get("TRACELINT_TRACES", REPO.parent / "shared" / "traces"))
    labels = {c.id: ("real" if not c.synthetic else "illustrative") for c in load_library(builtin_library())}
    print("| trace | device / vendor / workload | best match (finding → case) | similarity | case kind |")
    print("|---|---|---|---:|---|")
    for path in sorted(root.glob("*/*.json.gz")) + sorted(root.glob("*/*.sqlite")):
        report = lint(path, Config())
        ctx = trace_context(report.timeline)
        best = max(((c["similarity"], f.rule, c["id"]) for f in report.findings for c in f.cases),
                   default=None)
        kind = f"{ctx['device']} / {ctx['vendor']} / {ctx['workload']}"
        if best is None:
            print(f"| {path.name} | {kind} | — | | |")
        else:
            sim, rule, cid = best
            print(f"| {path.name} | {kind} | {rule} → {cid} | {sim:.2f} | {labels.get(cid, '?')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
