"""`tracelint --help`: the root help drawn from the command table, in typer's panel layout.

typer's own rich help imports rich.markdown (and markdown-it) and needs every command object,
i.e. every command module; this draws the same panels from plain rich pieces and the one-line
helps of cli.app.COMMANDS, so the root help costs no more than `--version`.
"""
from __future__ import annotations

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text


def _panel(title: str, rows: list[tuple[str, str]]) -> Panel:
    table = Table(show_header=False, box=None, padding=(0, 1), expand=True, pad_edge=False)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column(ratio=1)
    for name, text in rows:
        table.add_row(name, Text(text))
    return Panel(table, title=title, title_align="left", border_style="dim", box=box.ROUNDED)


def print_root_help(group, ctx, commands: list[tuple[str, str]]) -> None:
    console = Console(highlight=False)
    console.print(Padding(Text(group.get_usage(ctx), style="bold"), 1))
    if group.help:
        console.print(Padding(Text(group.help), (0, 1, 1, 1)))
    options = []
    for param in group.get_params(ctx):
        if getattr(param, "hidden", False) or not getattr(param, "opts", None):
            continue
        options.append((", ".join(param.opts + list(param.secondary_opts)), param.help or ""))
    console.print(_panel("Options", options))
    console.print(_panel("Commands", commands))
