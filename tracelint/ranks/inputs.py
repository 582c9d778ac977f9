"""Which command-line inputs make a job of ranks, decided from the paths alone.

Kept apart from the job machinery (pandas, summaries): `tracelint lint FILE` asks this before
it loads the file, and a parallel Kineto load forks its workers before pandas is imported
(importers/kineto_parallel)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]+://|::")


def is_url(source: str) -> bool:
    """True for an fsspec URL (s3://, gs://, memory://, file://, chained a::b)."""
    return bool(_URL.search(str(source)))


def is_job_input(paths: Sequence[str]) -> bool:
    """True when `tracelint lint` should analyse a job: several paths, a folder, a glob or an
    fsspec URL (one local trace file keeps the per-trace path)."""
    paths = [str(p) for p in paths]
    if len(paths) != 1:
        return True
    p = paths[0]
    return is_url(p) or any(ch in p for ch in "*?[") or Path(p).is_dir()
