"""Committed generated files equal what their generators write now.

docs/rules.md, the built-in case library (case.yaml + excerpt), its Markdown pages in
docs/cases/ and the bundled example traces are generated; when a rule's docstring, a case seed
or the trace builder changes, the committed copy must be regenerated in the same change (the
failure message names the command).
"""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO


def _same_files(got: Path, want: Path, pattern: str) -> list[str]:
    stale = []
    names = {p.relative_to(want) for p in want.glob(pattern)} | {p.relative_to(got) for p in got.glob(pattern)}
    for rel in sorted(names):
        a, b = got / rel, want / rel
        if not a.exists() or not b.exists():
            stale.append(f"{rel}: {'missing from the commit' if a.exists() else 'no longer generated'}")
        elif a.read_bytes() != b.read_bytes():
            stale.append(f"{rel}: differs")
    return stale


def test_rules_doc_is_fresh(tmp_path):
    out = tmp_path / "rules.md"
    subprocess.run([sys.executable, str(REPO / "scripts" / "gen_rules_doc.py"), "--out", str(out)],
                   check=True, cwd=REPO, capture_output=True)
    assert out.read_text() == (REPO / "docs" / "rules.md").read_text(), \
        "docs/rules.md is stale: run .venv/bin/python scripts/gen_rules_doc.py"


@pytest.mark.slow
def test_case_library_is_fresh(tmp_path):
    """The synthetic cases (fixtures/cases/make_cases.py); the real ones are cut from real traces
    and checked against them in tests/test_real_cases.py."""
    from tracelint.cases.model import load_case
    lib = tmp_path / "library"
    subprocess.run([sys.executable, str(REPO / "fixtures" / "cases" / "make_cases.py"), "--out", str(lib)],
                   check=True, cwd=REPO, capture_output=True)
    committed = REPO / "tracelint" / "cases" / "library"
    stale = [s for s in _same_files(lib, committed, "*/*")       # real cases: test_real_cases.py
             if not s.endswith("no longer generated") or "/" not in s
             or load_case(committed / s.split("/")[0]).synthetic]
    assert not stale, ("the built-in case library is stale: run .venv/bin/python "
                       "fixtures/cases/make_cases.py\n" + "\n".join(stale))


def test_case_pages_are_fresh(tmp_path):
    from tracelint.cases.library import builtin_library, load_library
    from tracelint.cases.render import render_library
    render_library(load_library(builtin_library()), tmp_path)
    # pages link to the excerpts relative to where they are written: as if under docs/cases
    lib = builtin_library()
    here, there = os.path.relpath(lib, tmp_path), os.path.relpath(lib, REPO / "docs" / "cases")
    for page in tmp_path.glob("*.md"):
        page.write_text(page.read_text().replace(f"]({here}/", f"]({there}/"))
    stale = _same_files(tmp_path, REPO / "docs" / "cases", "*.md")
    assert not stale, ("docs/cases is stale: run .venv/bin/tracelint case render -o docs/cases\n"
                       + "\n".join(stale))


def test_example_traces_are_fresh(tmp_path):
    sys.path.insert(0, str(REPO / "fixtures" / "examples"))
    try:
        import make_examples
    finally:
        sys.path.pop(0)
    for written in make_examples.main(tmp_path):
        committed = REPO / "fixtures" / "examples" / written.name
        if written.suffix == ".gz":   # compare the JSON text: gzip headers may differ by zlib build
            same = gzip.decompress(written.read_bytes()) == gzip.decompress(committed.read_bytes())
        else:
            same = _same_sqlite(written, committed)
        assert same, f"{committed.name} is stale: run .venv/bin/python fixtures/examples/make_examples.py"


def _same_sqlite(a: Path, b: Path) -> bool:
    import sqlite3

    def dump(p: Path) -> list[str]:
        con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        try:
            return list(con.iterdump())
        finally:
            con.close()
    return dump(a) == dump(b)
