"""The rule table (rules/__init__.py) is the one list of built-in rules: every rule file is in
it, every line names a Rule whose id matches its file, scopes and ids agree, and the order is
the catalogue's (by id)."""
from __future__ import annotations

import importlib
import inspect
import re

from conftest import REPO

import tracelint.rules as rules_pkg
from tracelint.api import available_rules
from tracelint.engine.rule import DOC_SECTIONS, Rule


def rule_files() -> set[str]:
    return {p.stem for p in (REPO / "rules").glob("tl*.py")}


def test_every_rule_file_is_in_the_table_once():
    modules = [m for m, _ in rules_pkg.TABLE]
    assert len(modules) == len(set(modules)), "a module is listed twice"
    assert set(modules) == rule_files(), (
        f"not in TABLE: {sorted(rule_files() - set(modules))}; "
        f"no such file: {sorted(set(modules) - rule_files())}")


def test_each_line_names_the_rule_its_file_defines():
    for module, cls in rules_pkg.TABLE:
        mod = importlib.import_module(f"tracelint.rules.{module}")
        defined = [c for _, c in inspect.getmembers(mod, inspect.isclass)
                   if issubclass(c, Rule) and c is not Rule and c.__module__ == mod.__name__]
        assert [c.__name__ for c in defined] == [cls], f"{module} defines {defined}, TABLE says {cls}"
        rule = getattr(mod, cls)
        number = re.match(r"tl(\d{3})_", module).group(1)
        assert rule.id == f"TL{number}", f"{module}: id {rule.id} does not match the file name"
        assert rule.scope in ("trace", "job")
        assert (rule.scope == "job") == rule.id.startswith("TL2"), f"{rule.id}: TL2xx are job scope"


def test_table_is_in_catalogue_order_and_documented():
    ids = [r.id for r in rules_pkg.builtin_rules()]
    assert ids == sorted(ids)
    assert [r.id for r in available_rules()] == ids
    for r in rules_pkg.builtin_rules():
        for section in DOC_SECTIONS:
            assert r.section(section), f"{r.id} lacks docstring section {section!r}"
