"""Case libraries: folders of cases, where they are, loading them and finding one by id.

The built-in library ships inside the package (tracelint/cases/library/), so it is found the
same way from a source checkout and from an installed wheel; a team's own library folders are
added with `default_libraries(extra)` (config: `case-libraries = ["perf-cases"]`). Replaying
cases is check.py, naming the cases a finding resembles is match.py, adding cases is add.py.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Iterable

from .model import (CASE_FILE, Case, CaseError, load_case)

# ----- where libraries are ----------------------------------------------------------------
def builtin_library() -> Path:
    """The built-in library folder, resolved relative to the installed package."""
    return Path(str(resources.files("tracelint.cases").joinpath("library")))


def default_libraries(extra: Iterable[str | Path] | None = None) -> list[Path]:
    """The built-in library followed by `extra` folders (a team's own), without duplicates.
    Relative paths are taken as given (the config loader resolves them against the config
    file). A missing extra folder is an error when the library is read, not here."""
    out: list[Path] = []
    seen: set[Path] = set()
    for p in [builtin_library(), *(Path(x) for x in (extra or []))]:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


# ----- reading ----------------------------------------------------------------------------
_CACHE: dict[Path, tuple[tuple, list[Case]]] = {}


def case_folders(library: str | Path) -> list[Path]:
    lib = Path(library)
    if not lib.exists():
        raise CaseError(f"{lib}: case library not found")
    if not lib.is_dir():
        raise CaseError(f"{lib}: not a folder (a case library is a folder of case folders)")
    if (lib / CASE_FILE).is_file():     # a single case folder given as a library
        return [lib]
    return sorted(p.parent for p in lib.glob(f"*/{CASE_FILE}") if not p.parent.name.startswith("."))


def load_library(library: str | Path) -> list[Case]:
    """Every case of one library, validated; CaseError (one line) on the first bad one.
    Cached by the case files' modification times."""
    lib = Path(library)
    folders = case_folders(lib)
    stamp = tuple((str(f), (f / CASE_FILE).stat().st_mtime_ns, (f / CASE_FILE).stat().st_size)
                  for f in folders)
    key = lib.resolve()
    hit = _CACHE.get(key)
    if hit and hit[0] == stamp:
        return list(hit[1])
    cases = [load_case(f) for f in folders]
    seen: dict[str, Path] = {}
    for c in cases:
        if c.id in seen:
            raise CaseError(f"{lib}: duplicate case id {c.id!r} in {seen[c.id].name} and {c.folder.name}")
        seen[c.id] = c.folder
    _CACHE[key] = (stamp, cases)
    return list(cases)


def forget_library(library: str | Path) -> None:
    """Drop a library's cached cases (after a case was added to it)."""
    _CACHE.pop(Path(library).resolve(), None)


def load_libraries(libraries: Iterable[str | Path]) -> list[Case]:
    out: list[Case] = []
    for lib in libraries:
        out += load_library(lib)
    return out


def find_case(libraries: Iterable[str | Path], case_id: str) -> Case:
    cases = load_libraries(libraries)
    for c in cases:
        if c.id == case_id:
            return c
    import difflib
    near = difflib.get_close_matches(case_id, [c.id for c in cases], n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise CaseError(f"no case {case_id!r} in the library{hint}; see `tracelint case list`")


