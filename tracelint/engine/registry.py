"""Rule lists: loading user rule folders (--rules-dir / config), checking ids and slugs, and
matching selectors. The built-in list is tracelint.rules.TABLE; tracelint.api joins the two
(the engine never imports the rules it runs)."""
from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from pathlib import Path

from ..errors import ConfigError
from .rule import Rule

ID_RE = re.compile(r"^[A-Z]{2,5}\d{3}$")
SLUG_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def _rules_in_module(mod) -> list[type[Rule]]:
    return [obj for _, obj in inspect.getmembers(mod, inspect.isclass)
            if issubclass(obj, Rule) and obj is not Rule and obj.id and obj.__module__ == mod.__name__]


def rules_from_dir(folder: str | Path) -> list[type[Rule]]:
    from .trust import announce, check_rule_file
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"rules directory not found: {folder}")
    found = []
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        check_rule_file(path)          # untrusted code: see tracelint.engine.trust
        name = f"tracelint_user_rules.{path.stem}_{abs(hash(str(path))) % 10**8}"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except Exception as exc:  # a user's rule file is untrusted code with bugs
            raise ConfigError(f"cannot import rule file {path}: {type(exc).__name__}: "
                              f"{str(exc)[:200]}") from None
        announce(path)
        found += _rules_in_module(mod)
    return found


def checked(rules: list[type[Rule]]) -> list[type[Rule]]:
    """The rules sorted by id, after checking that ids and slugs are well formed and unique."""
    seen_id: dict[str, type[Rule]] = {}
    seen_slug: dict[str, type[Rule]] = {}
    for r in rules:
        if not ID_RE.match(r.id):
            raise ConfigError(f"rule {r.__name__}: id {r.id!r} must look like TL001")
        if not SLUG_RE.match(r.slug):
            raise ConfigError(f"rule {r.id}: slug {r.slug!r} must be kebab-case")
        if r.id in seen_id or r.slug in seen_slug:
            raise ConfigError(f"duplicate rule id or slug: {r.id} / {r.slug}")
        seen_id[r.id] = r
        seen_slug[r.slug] = r
    return sorted(rules, key=lambda r: r.id)


def matches(rule: type[Rule], selector: str) -> bool:
    """Selector: ALL, an id (TL003), an id prefix (TL00), a slug, or a group."""
    s = selector.strip()
    u = s.upper()
    is_prefix = bool(re.match(r"^[A-Z]+\d*$", u)) and rule.id.startswith(u)
    return u == "ALL" or is_prefix or rule.slug == s.lower() or s.lower() in rule.groups
