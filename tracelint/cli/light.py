"""The light paths of `tracelint`: `--version`, `--help` and the rule list (`rules`), printed
before typer, rich, pandas or any rule module is imported.

These are what a user (or a CI step) runs most often and expects back at once. typer and rich
are together about as much CPU as everything else these commands do (0.1 s each of imports on
the shared 2-core machine, and rich laid out the 24-row rule table for another 0.1 s), so the
output here is plain text: panels and tables drawn with box characters, wrapped to the
terminal (COLUMNS, else the terminal's width, else 80), bold and colour only on a terminal
without NO_COLOR. Any other argument list (an option of `rules`, a command's `--help`, a
command) goes to the typer app, whose root help is this same text (cli.root.LazyGroup).
"""
from __future__ import annotations

import os
import sys
import textwrap


def run_light(args: list[str], root_help: str, options: dict, commands: list) -> bool:
    """Print the answer for a light argument list and return True; False for anything else.
    root_help, options and commands: the root help (cli.app's table, as print_root_help)."""
    if args not in (["--version"], ["--help"], ["rules"]):
        return False
    try:
        if args == ["--version"]:
            from .. import __version__
            print(f"tracelint {__version__}")
        elif args == ["--help"]:
            print_root_help(f"Usage: {_prog_name()} [OPTIONS] COMMAND [ARGS]...", root_help,
                            options, commands)
        else:
            from .catalogue import rule_catalogue
            print_rule_list(rule_catalogue([]))
        sys.stdout.flush()
    except BrokenPipeError:  # `tracelint rules | head`: stop quietly, as a pager user expects
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return True


def _prog_name() -> str:
    """The program name as click shows it in the usage line (`python -m tracelint` under -m)."""
    main = sys.modules.get("__main__")
    path = sys.argv[0] if sys.argv and sys.argv[0] else "tracelint"
    package = getattr(main, "__package__", None)
    if not package:
        return os.path.basename(path)
    name = os.path.splitext(os.path.basename(path))[0]
    module = package if name == "__main__" else f"{package}.{name}"
    return f"python -m {module.lstrip('.')}"


def _width() -> int:
    import shutil
    return max(40, shutil.get_terminal_size((80, 24)).columns)


def _style(code: str):
    """A function that wraps text in an ANSI style on a colour terminal, else leaves it."""
    out = sys.stdout
    color = (hasattr(out, "isatty") and out.isatty() and not os.environ.get("NO_COLOR")
             and os.environ.get("TERM") != "dumb")
    return (lambda s: f"\x1b[{code}m{s}\x1b[0m") if color else (lambda s: s)


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, max(8, width), break_on_hyphens=False) or [""]


def _panel(title: str, rows: list[tuple[str, str]], width: int) -> list[str]:
    """A rounded box titled `title`: one row per (name, text), names aligned, text wrapped."""
    dim, name_style = _style("2"), _style("1;36")
    inner = width - 4  # "│ " + content + " │"
    name_w = max((len(n) for n, _ in rows), default=0)
    head = f"╭─ {title} "
    lines = [dim(head + "─" * max(0, width - len(head) - 1) + "╮")]
    for name, text in rows:
        for i, part in enumerate(_wrap(text, inner - name_w - 2)):
            cell = (name if i == 0 else "").ljust(name_w)
            pad = " " * max(0, inner - name_w - 2 - len(part))
            lines.append(f"{dim('│')} {name_style(cell)}  {part}{pad} {dim('│')}")
    lines.append(dim("╰" + "─" * (width - 2) + "╯"))
    return lines


def print_root_help(usage: str, root_help: str, options: dict, commands: list) -> None:
    """`tracelint --help`: usage, the app's help, the root options (option -> help line) and
    the commands ((name, one-line help) in order)."""
    width, bold = _width(), _style("1")
    out = ["", " " + bold(usage), ""]
    out += [" " + line for line in _wrap(root_help, width - 2)] + [""]
    out += _panel("Options", list(options.items()), width)
    out += _panel("Commands", commands, width)
    print("\n".join(out))


_COLUMNS = ("id", "slug", "severity", "scope", "layers")


def print_rule_list(rows: list[dict]) -> None:
    """The rule catalogue: a table with the summary wrapped in the last column where the
    terminal is wide enough, else two lines per rule (id, slug and facts; then the summary)."""
    width, bold = _width(), _style("1")
    cells = [[r["id"], r["slug"], r["severity"], r["scope"], ",".join(r["layers"])] for r in rows]
    widths = [max([len(c)] + [len(x[i]) for x in cells]) for i, c in enumerate(_COLUMNS)]
    fixed = sum(widths) + 2 * len(widths)
    out = [bold(f"tracelint rules ({len(rows)})"), ""]
    if width - fixed >= 30:  # one table, the summary wrapped in its own column
        header = "  ".join(c.ljust(w) for c, w in zip(_COLUMNS, widths)) + "  summary"
        out.append(bold(header.rstrip()))
        for r, row in zip(rows, cells):
            lead = "  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  "
            for i, part in enumerate(_wrap(r["summary"], width - fixed - 1)):
                out.append(((lead if i == 0 else " " * fixed) + part).rstrip())
    else:  # narrow terminal: the facts on one line, the summary indented below
        indent = " " * (widths[0] + 2)
        for r, row in zip(rows, cells):
            facts = f"{r['severity']} · {r['scope']} · layers {', '.join(r['layers'])}"
            first = textwrap.wrap(f"{row[1]}  ({facts})", max(8, width - len(indent) - 1),
                                  subsequent_indent=indent, break_on_hyphens=False)
            out.append(f"{bold(row[0].ljust(widths[0]))}  " + "\n".join(first))
            out += [indent + part for part in _wrap(r["summary"], width - len(indent) - 1)]
    out += ["", "`tracelint rules ID` prints a rule in full."]
    print("\n".join(out))
