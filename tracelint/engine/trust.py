"""Which configuration may name rule code, and which rule files may be imported.

A `rules-dirs` setting makes `lint` import Python files: code execution. So:
- the upward search for a config stops at the repository root (a folder holding `.git`) or at
  the user's home folder, as ruff and others do; outside both, rule folders are only taken from
  a config in the current folder itself (a config in some parent, e.g. a shared /tmp, is read
  for its other settings, its `rules-dirs` ignored with a note);
- a rule file (or its folder) that is world-writable, or owned by someone other than the user
  (or root), is refused;
- every rule file imported is named on stderr.
`--rules-dir` on the command line is the user's explicit choice and is loaded as designed (the
file checks still apply). `--dask ADDRESS` sends pickled work to that scheduler and runs what
its workers send back: only use a scheduler you trust (docs/security.md).
"""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from ..errors import ConfigError

_announced: set[str] = set()


def search_folders(start: Path) -> tuple[list[Path], bool]:
    """(folders to look in, nearest first; whether a repository root or home bounded them)."""
    try:
        home = Path.home().resolve()
    except (RuntimeError, OSError):
        home = None
    out: list[Path] = []
    for folder in (start, *start.parents):
        out.append(folder)
        if (folder / ".git").exists() or folder == home:
            return out, True
    return out, False


def untrusted_rules_note(config: Path) -> None:
    from ..reporters.escape import terminal_text
    print(f"tracelint: note: ignoring rules-dirs of {terminal_text(str(config))}: it is above the "
          "current folder and outside any repository or your home; pass --rules-dir or --config",
          file=sys.stderr)


def check_rule_file(path: Path) -> None:
    """Refuse a rule file or folder others could have written (one-line ConfigError)."""
    from ..reporters.escape import terminal_text
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    for p in (path.parent, path):
        try:
            st = p.stat()
        except OSError as exc:
            raise ConfigError(f"{terminal_text(str(p))}: cannot read: {exc.strerror}") from None
        if st.st_mode & stat.S_IWOTH:
            raise ConfigError(f"refusing rule code {terminal_text(str(path))}: "
                              f"{'its folder' if p != path else 'it'} is world-writable")
        if uid is not None and st.st_uid not in (uid, 0):
            raise ConfigError(f"refusing rule code {terminal_text(str(path))}: "
                              f"{'its folder' if p != path else 'it'} belongs to another user "
                              f"(uid {st.st_uid})")


def announce(path: Path) -> None:
    """Say once on stderr which rule file was imported."""
    key = str(path)
    if key not in _announced:
        _announced.add(key)
        from ..reporters.escape import terminal_text
        print(f"tracelint: loaded rule file {terminal_text(key)}", file=sys.stderr)
