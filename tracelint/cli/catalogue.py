"""The rule catalogue behind `tracelint rules`: each rule's id, slug, severity, scope, layers and
one-line summary, cached on disk so that listing the rules does not import them.

Rule modules import pandas and numpy (about 0.7 s of CPU before the first line prints), yet the
list needs only their metadata. The cache key is tracelint's version plus the path, size and
mtime of every file that can define or change a rule (the built-in rules and their table, the rule base
classes, --rules-dir folders), so an edited, added or removed rule file rebuilds it. An
unwritable cache folder costs only the speed; a broken user rule file still fails as before
because nothing is cached until the rules import cleanly.
"""
from __future__ import annotations

import hashlib
import json
import os
from importlib.util import find_spec
from pathlib import Path

from .. import __version__

_ENGINE = Path(__file__).resolve().parent.parent / "engine"
_FIELDS = {"id", "slug", "severity", "scope", "layers", "summary"}


def _rule_sources(extra_dirs) -> list[Path]:
    spec = find_spec("tracelint.rules")
    folders = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    folders += [Path(d) for d in extra_dirs]
    files = [p for d in folders if d.is_dir() for p in sorted(d.glob("*.py"))]
    return files + [_ENGINE / "rule.py", _ENGINE / "registry.py", _ENGINE / "finding.py"]


def _key(extra_dirs) -> str:
    h = hashlib.sha256(__version__.encode())
    for p in _rule_sources(extra_dirs):
        st = p.stat()
        h.update(f"\0{p.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()[:24]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tracelint"


def _build(extra_dirs) -> list[dict]:
    from ..api import available_rules
    from ..engine.config import Config
    return [{"id": r.id, "slug": r.slug, "severity": r.severity.value,
             "scope": "job (several ranks)" if r.scope == "job" else "trace",
             "layers": sorted(x.value for x in r.layers), "summary": r.summary()}
            for r in available_rules(Config(rules_dirs=list(extra_dirs)))]


def rule_catalogue(extra_dirs=()) -> list[dict]:
    """One dict per rule (as api.available_rules lists them), from the cache when it is current."""
    path = cache_dir() / f"rules-{_key(extra_dirs)}.json"
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(rows, list) and all(isinstance(r, dict) and _FIELDS <= r.keys() for r in rows):
            return rows
    except (OSError, ValueError):
        pass
    rows = _build(extra_dirs)
    try:
        from ..io import write_atomic
        write_atomic(path, json.dumps(rows))
    except OSError:
        pass
    return rows
