"""Option values coerced without pydantic (tracelint.cli.coercion) are exactly what typer's
pydantic adapter returns, anything else still goes through typer (its error messages
included), and a lint with options given no longer imports pydantic."""
from __future__ import annotations

import os
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import pytest
from pydantic import TypeAdapter

from tracelint.cli.coercion import _TYPERS, plain_value

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "nsys" / \
    "nsys2022.2_pipit-saxpy-mpi-cuda_a100.sqlite"


class Colour(str, Enum):
    red = "red"
    blue = "blue"


CASES = [
    (str, "a b"), (str, ""), (Optional[str], "x"), (bool, True), (bool, False),
    (int, 3), (int, "12"), (int, "-7"), (int, "+5"), (int, "007"), (Optional[int], "0"),
    (float, "1.5"), (float, "2"), (float, "-.25"), (float, "1e3"), (float, 4),
    (Optional[float], "3.0E-2"), (list[str], ("a", "b")), (list[str], ()),
    (Optional[list[str]], ("TL001,TL002",)), (Colour, "red"), (Colour, Colour.blue),
]
NOT_PLAIN = [
    (int, "1_000"), (int, " 3"), (int, "3.0"), (int, "x"), (int, True), (float, "nan"),
    (float, "1_0.0"), (Colour, "RED"), (Colour, "green"), (list[int], ("1",)),
    (list[str], "ab"), (Path, "a"), (Optional[Path], "a"), (str, 3), (bool, "true"),
    (int | str, "1"),
]


@pytest.mark.parametrize("annotation, value", CASES)
def test_plain_values_are_what_pydantic_returns(annotation, value):
    mine = plain_value(annotation, value)
    theirs = TypeAdapter(annotation).validate_python(value)
    assert mine == theirs and type(mine) is type(theirs)


@pytest.mark.parametrize("annotation, value", NOT_PLAIN)
def test_other_values_are_left_to_typer(annotation, value):
    assert plain_value(annotation, value) is _TYPERS


def test_a_malformed_number_gets_typers_error():
    res = subprocess.run([sys.executable, "-m", "tracelint", "lint", str(FIXTURE), "--jobs",
                          "two"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2
    assert "Invalid value for '--jobs'" in res.stderr and "valid integer" in res.stderr


def test_a_lint_with_options_imports_no_pydantic(tmp_path):
    probe = ("import sys\nfrom tracelint.cli.app import main\n"
             "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\n"
             "print('PYDANTIC', 'pydantic' in sys.modules, file=sys.stderr)\n")
    out = tmp_path / "r.json"
    res = subprocess.run([sys.executable, "-c", probe, "lint", str(FIXTURE), "-f", "json",
                          "-o", str(out), "--select", "TL001,TL002", "--jobs", "1", "-q",
                          "--fail-on", "never"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)})
    assert "PYDANTIC False" in res.stderr, res.stderr[-2000:]
    assert out.stat().st_size > 0
