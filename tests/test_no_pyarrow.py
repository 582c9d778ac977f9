"""The tracelint command keeps pandas from loading pyarrow (tracelint.cli.no_pyarrow); a user's
program that imports tracelint is left alone, but tracelint's own calls make text columns as
Python objects (tracelint.pandas_text). The command is probed with a stand-in pyarrow package
that leaves a mark when it is imported."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

import tracelint
from tracelint.engine import runner

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "fixtures" / "examples" / "training_step_antipatterns.json.gz"


def _env(tmp_path: Path) -> dict:
    fake = tmp_path / "site" / "pyarrow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "import os, pathlib\n"
        "pathlib.Path(os.environ['PYARROW_MARK']).write_text('imported')\n"
        "__version__ = '1.0.0'\n")
    env = {**os.environ, "PYARROW_MARK": str(tmp_path / "mark"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO)])}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def test_a_program_importing_tracelint_gets_pyarrow(tmp_path):
    env = _env(tmp_path)
    subprocess.run([sys.executable, "-c", "import tracelint, pandas"], env=env, check=True)
    assert (tmp_path / "mark").exists()


def test_the_command_lints_without_importing_pyarrow(tmp_path):
    env = _env(tmp_path)
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "tracelint", "lint", str(EXAMPLE), "-f", "json",
                           "-o", str(out), "--fail-on", "never"], env=env, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "mark").exists()
    assert json.loads(out.read_text())["findings"]


def test_the_library_makes_text_as_python_objects_during_its_calls_only(monkeypatch):
    seen = []
    real = runner.run_rules

    def spy(*args, **kw):
        seen.append(pd.get_option("mode.string_storage"))
        return real(*args, **kw)
    monkeypatch.setattr(runner, "run_rules", spy)
    before = pd.get_option("mode.string_storage")
    tl = tracelint.load(EXAMPLE)
    assert tracelint.lint(tl).findings
    assert seen == ["python"]
    assert pd.get_option("mode.string_storage") == before
