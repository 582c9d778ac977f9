"""An installed (non-editable) tracelint has every package and data file the source tree has:
the explicit package list in pyproject.toml is easy to forget when a package is added, and the
editable install the tests use would never notice."""
from __future__ import annotations

import fnmatch
import tomllib

from conftest import REPO


def _config() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_is_listed():
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "tracelint").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    found.add("tracelint.rules")
    assert set(_config()["packages"]) == found


def test_every_data_file_is_package_data():
    patterns = _config()["package-data"]["tracelint"]
    data = [p.relative_to(REPO / "tracelint").as_posix() for p in (REPO / "tracelint").rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    missing = [d for d in data if not any(fnmatch.fnmatch(d, pat) for pat in patterns)]
    assert not missing, f"not installed with the package: {missing[:10]}"
