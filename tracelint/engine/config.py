"""Configuration like the linters users know: `[tool.tracelint]` in pyproject.toml or a
`tracelint.toml`, overridden by CLI flags. Precedence: defaults < file < CLI.

    [tool.tracelint]
    select = ["ALL"]            # ids, id prefixes, slugs or groups
    ignore = ["TL008"]
    fail-on = "warning"         # error | warning | info | never
    rules-dirs = ["my_rules"]
    case-libraries = ["perf_cases"]   # matched beside the built-in case library
    baseline = "tracelint-baseline.json"
    [tool.tracelint.severity]
    TL002 = "info"
    [tool.tracelint.rules.launch-gap]   # by slug or id; keys are the rule's Options fields
    min_gap_ns = 20000
"""
from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .finding import Severity
from .config_types import check_setting, option_value, short, shown
from .registry import matches
from .rule import Rule

FAIL_ON = ("error", "warning", "info", "never")


@dataclass
class Config:
    select: list[str] = field(default_factory=lambda: ["ALL"])
    ignore: list[str] = field(default_factory=list)
    severity: dict[str, str] = field(default_factory=dict)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    rules_dirs: list[str] = field(default_factory=list)
    fail_on: str = "warning"
    baseline: str | None = None
    case_libraries: list[str] = field(default_factory=list)   # team case libraries
    source: str | None = None        # the file the settings came from
    source_roots: list[str] = field(default_factory=list)   # where the profiled code lives
    path_map: list[str] = field(default_factory=list)       # "TRACE_PREFIX=LOCAL_PREFIX"

    def is_selected(self, rule: type[Rule]) -> bool:
        return any(matches(rule, s) for s in self.select) and not any(matches(rule, s) for s in self.ignore)

    def severity_for(self, rule: Rule | type[Rule]) -> Severity:
        for key in (rule.id, rule.slug):
            if key in self.severity:
                return Severity(self.severity[key])
        return rule.severity

    def options_for(self, rule: type[Rule]):
        """The rule's Options with configured overrides; unknown keys and values of the wrong
        type are errors (no silent coercion: "false" is not False, 2.9 is not 2)."""
        raw = {**self.options.get(rule.slug, {}), **self.options.get(rule.id, {})}
        names = {f.name: f for f in dataclasses.fields(rule.Options)}
        bad = set(raw) - set(names)
        if bad:
            raise ConfigError(f"{self._where()}{rule.id} ({rule.slug}): unknown option(s) "
                              f"{sorted(map(str, bad))[:10]}; known: {sorted(names)}")
        typed = {k: option_value(f"{self._where()}{rule.id} option {k}", v, names[k].default)
                 for k, v in raw.items()}
        return rule.Options(**typed)

    def _where(self) -> str:
        return f"{self.source}: " if self.source else ""

    def validate(self, rules: list[type[Rule]]) -> None:
        w = self._where()
        if self.fail_on not in FAIL_ON:
            raise ConfigError(f"{w}fail-on must be one of {', '.join(FAIL_ON)}, not {short(self.fail_on)}")
        for sel in (*self.select, *self.ignore):
            if not isinstance(sel, str) or not any(matches(r, sel) for r in rules):
                raise ConfigError(f"{w}unknown rule selector {short(sel)} (see `tracelint rules`)")
        for key, sev in self.severity.items():
            if sev not in {s.value for s in Severity}:
                raise ConfigError(f"{w}severity for {short(key)} must be error, warning or info, "
                                  f"not {short(sev)}")
        known = {r.id for r in rules} | {r.slug for r in rules}
        for key in self.options:
            if key not in known:
                raise ConfigError(f"{w}options given for unknown rule {short(key)}")
        for r in rules:
            self.options_for(r)


def _from_table(table: Any, source: str) -> Config:
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [tool.tracelint] must be a table")
    cfg = Config(source=source)
    mapping = {"select": "select", "ignore": "ignore", "fail-on": "fail_on", "fail_on": "fail_on",
               "rules-dirs": "rules_dirs", "rules_dirs": "rules_dirs", "baseline": "baseline",
               "severity": "severity", "rules": "options",
               "case-libraries": "case_libraries", "case_libraries": "case_libraries",
               "source-roots": "source_roots", "path-map": "path_map"}
    for key, value in table.items():
        if key not in mapping:
            raise ConfigError(f"{source}: unknown setting {short(key)} in tracelint config")
        setattr(cfg, mapping[key], check_setting(source, key, value))
    base = Path(source).parent
    cfg.rules_dirs = [str((base / d)) for d in cfg.rules_dirs]
    cfg.case_libraries = [str(base / d) for d in cfg.case_libraries]
    cfg.source_roots = [str(base / d) for d in cfg.source_roots]
    if cfg.baseline:
        cfg.baseline = str(base / cfg.baseline)
    return cfg


def load_config(path: str | None = None, start: Path | None = None) -> Config:
    """Read an explicit config file, or the nearest tracelint.toml / pyproject.toml upward
    (see tracelint.engine.trust: the search stops at the repository root or the home folder,
    and rule code is only taken from a config inside the current project)."""
    if path:
        return _read(Path(path), explicit=True)
    from .trust import search_folders, untrusted_rules_note
    folders, bounded = search_folders((start or Path.cwd()).resolve())
    for i, folder in enumerate(folders):
        for name in ("tracelint.toml", "pyproject.toml"):
            candidate = folder / name
            if candidate.is_file():
                cfg = _read(candidate, explicit=False)
                if cfg is not None:
                    if cfg.rules_dirs and not bounded and i > 0:
                        untrusted_rules_note(candidate)
                        cfg.rules_dirs = []
                    return cfg
    return Config()


def _read(path: Path, explicit: bool) -> Config | None:
    if path.is_dir():
        raise ConfigError(f"{shown(path)}: is a directory; --config names a tracelint.toml "
                          "or pyproject.toml")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {shown(path)}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{shown(path)}: invalid TOML: {short(exc, 160)}") from None
    except OSError as exc:
        raise ConfigError(f"{shown(path)}: cannot read: {exc.strerror or exc}") from None
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("tracelint")
        if table is None:
            return Config() if explicit else None
    else:
        table = data.get("tool", {}).get("tracelint", data)
    return _from_table(table, str(path))
