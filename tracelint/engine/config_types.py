"""Typed validation of configuration values: one line naming the file and the setting, and no
silent coercion (`include_step_end = "false"` must not become True, `min_gap_ns = 2.9` must not
become 2, `rules-dirs = "abc"` must not be read letter by letter)."""
from __future__ import annotations

import math
from typing import Any

from ..errors import ConfigError

VALUE_LIMIT = 60


def short(value: Any, limit: int = VALUE_LIMIT) -> str:
    """A value for an error message: repr, control characters removed, bounded."""
    from ..reporters.escape import clean
    text = clean(str(value) if isinstance(value, BaseException) else repr(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _strs(source: str, key: str, value: Any, one_ok: bool) -> list[str]:
    if one_ok and isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    want = "a string or a list of strings" if one_ok else "a list of strings"
    raise ConfigError(f"{source}: {key} must be {want}, not {short(value)}")


def check_setting(source: str, key: str, value: Any) -> Any:
    """The value of one [tool.tracelint] setting, checked for its type."""
    k = key.replace("_", "-")
    if k in ("select", "ignore"):
        return _strs(source, key, value, one_ok=True)
    if k in ("rules-dirs", "case-libraries"):
        return _strs(source, key, value, one_ok=False)
    if k in ("fail-on", "baseline"):
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{source}: {key} must be a non-empty string, not {short(value)}")
        return value
    if k == "severity":
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ConfigError(f"{source}: [severity] must map rule ids to "
                              f"\"error\" | \"warning\" | \"info\", not {short(value)}")
        return dict(value)
    if k == "rules":
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            raise ConfigError(f"{source}: [rules.<rule>] must be tables of options, "
                              f"not {short(value)}")
        return {r: dict(v) for r, v in value.items()}
    return value


def option_value(where: str, value: Any, default: Any) -> Any:
    """A rule option checked against the type of its default."""
    if default is None:
        return value
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where} must be true or false, not {short(value)}")
    if isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer() \
                and abs(value) < 2**63:
            return int(value)
        raise ConfigError(f"{where} must be a whole number, not {short(value)}")
    if isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool) \
                and math.isfinite(float(value)):
            return float(value)
        raise ConfigError(f"{where} must be a finite number, not {short(value)}")
    if isinstance(default, str):
        if isinstance(value, str):
            return value
        raise ConfigError(f"{where} must be a string, not {short(value)}")
    if isinstance(default, (tuple, list)):
        if isinstance(value, (list, tuple)):     # TOML gives lists; the Python API may pass tuples
            return type(default)(value)
        raise ConfigError(f"{where} must be a list, not {short(value)}")
    try:
        return type(default)(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{where} is not a {type(default).__name__}: {short(value)}") from None


def shown(path: Any) -> str:
    """A file name for an error message (control characters removed, bounded)."""
    from ..reporters.escape import terminal_text
    return terminal_text(str(path), 200)
