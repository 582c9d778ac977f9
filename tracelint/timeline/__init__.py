"""The unified timeline model: schema, tables, interval algebra, nesting and graph view."""
from .model import Device, Meta, Timeline  # noqa: F401
from .schema import TABLES, empty_table, make_table  # noqa: F401
