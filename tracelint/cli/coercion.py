"""Option values coerced without pydantic where the type is plain.

typer coerces every given value through a pydantic TypeAdapter: importing pydantic and building
the adapters costs about 0.17 s of CPU, 13 % of a lint of a small export, for values that are
already a str, a bool or a tuple of str. CheapCoercion returns those as typer would, and hands
anything else (a malformed number, a ranged int, a Path, an unknown type) to typer's own
coercion, so every error message stays typer's.
"""
from __future__ import annotations

import re
from enum import Enum
from types import NoneType
from typing import Union, get_args, get_origin

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_TYPERS = object()  # "not plain": typer's coercion decides


def plain_value(annotation, value):
    """value as typer's pydantic adapter would return it, or _TYPERS when it is not plain."""
    if get_origin(annotation) is Union:
        args = get_args(annotation)
        if len(args) != 2 or NoneType not in args:
            return _TYPERS
        annotation = args[0] if args[1] is NoneType else args[1]
    if get_origin(annotation) is list:
        if get_args(annotation) != (str,) or not isinstance(value, (list, tuple)) \
                or not all(type(v) is str for v in value):
            return _TYPERS
        return list(value)
    if annotation is str or annotation is bool:
        return value if type(value) is annotation else _TYPERS
    if annotation is int:
        if type(value) is int:
            return value
        return int(value) if type(value) is str and _INT.fullmatch(value) else _TYPERS
    if annotation is float:
        if type(value) in (int, float):
            return float(value)
        return float(value) if type(value) is str and _FLOAT.fullmatch(value) else _TYPERS
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        if isinstance(value, annotation):
            return value
        match = [m for m in annotation if m.value == value]
        return match[0] if match else _TYPERS
    return _TYPERS


class CheapCoercion:
    """A parameter's coercion: None for a value left out (what typer returns: None, or () for
    a multi-value option), plain values directly, and typer's pydantic coercion, built on
    first need, for the rest."""

    def __init__(self, param):
        self._param, self._typers = param, None
        descriptor = param.type_descriptor
        self._annotation = None if descriptor.is_ranged or descriptor.is_file \
            else descriptor.annotation

    def coerce(self, value, param, ctx):
        if value is None:
            return () if (param.multiple or param.nargs == -1) else None
        if self._annotation is not None:
            plain = plain_value(self._annotation, value)
            if plain is not _TYPERS:
                return plain
        if self._typers is None:
            from typer._coercion import build_runtime_param
            self._typers = build_runtime_param(self._param.type_descriptor)
        return self._typers.coerce(value, param=param, ctx=ctx)


def coerce_cheaply(params) -> None:
    """Install CheapCoercion on a command's parameters (its --help option included) where
    typer's internals are as expected (typer 0.2x); with another typer they stay as they are."""
    for param in params:
        if getattr(param, "_runtime_param", 0) is None and hasattr(param, "type_descriptor"):
            param._runtime_param = CheapCoercion(param)
