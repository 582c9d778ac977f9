"""File output helpers: every file tracelint writes is written atomically."""
from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, data: str | bytes, private: bool = False) -> None:
    """Write to a temp file in the same folder, then rename: a crash never leaves half a file.

    The file gets the permissions the user's umask gives new files (mkstemp alone would leave
    0600, which breaks CI artifact uploads and shared report folders); private=True keeps
    0600, for outputs that may hold unscrubbed secrets.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        if not private:
            os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": "utf-8"})) as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def readonly_sqlite_uri(path: str | Path) -> str:
    """A file: URI that opens a SQLite file read-only and immutable: no journal, no WAL, no
    write of any kind to a user's trace, whatever its name contains (spaces, #, %, ?)."""
    return Path(path).resolve().as_uri() + "?mode=ro&immutable=1"


def copy_sqlite(src: str | Path, dst: str | Path) -> sqlite3.Connection:
    """Copy a SQLite trace into `dst` with the backup API (the source opened read-only) and
    return a writable connection to the copy. Raises TraceFormatError for unreadable input."""
    from .errors import TraceFormatError
    try:
        source = sqlite3.connect(readonly_sqlite_uri(src), uri=True)
    except sqlite3.Error as exc:
        raise TraceFormatError(f"{src}: cannot open as SQLite: {exc}") from None
    out = sqlite3.connect(dst)
    try:
        source.backup(out)
    except sqlite3.DatabaseError as exc:
        out.close()
        raise TraceFormatError(f"{src}: cannot copy the SQLite file (corrupt?): {exc}") from None
    finally:
        source.close()
    return out
