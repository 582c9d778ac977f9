"""The `tracelint` command: one small Typer app per command module, composed here.

Commands are registered lazily from COMMANDS (name -> module, one-line help): a command's module
(and with it pandas, numpy and the rule engine) is imported only when that command runs, so
`tracelint --version` and `tracelint --help` start in a blink. A new command module is added to
the table; its line there is the help shown by `tracelint --help` (tests/test_cli_startup.py
checks that the two agree).

Errors the user can fix (bad input, bad options) print one line and exit 2; never a traceback.
"""
from __future__ import annotations

import importlib
import sys
from typing import NamedTuple

import typer
from typer.core import TyperGroup

from .. import __version__
from ..errors import TracelintError


class CommandEntry(NamedTuple):
    module: str  # tracelint.cli.<module>
    help: str    # one line for `tracelint --help`


#: Every command, in the order `tracelint --help` lists them.
COMMANDS: dict[str, CommandEntry] = {
    "lint": CommandEntry("lint", "Lint a trace for performance anti-patterns."),
    "info": CommandEntry("info", "What is in a trace: format, span, devices, streams, counts, "
                                 "GPU busy %, top kernels."),
    "rules": CommandEntry("rules", "List the rules, or print one rule's documentation."),
    "capture": CommandEntry("capture", "Profile a program (`-- python script.py ARGS`), write its "
                                       "trace, then lint it."),
    "whatif": CommandEntry("whatif", "What if: replay the run with edits; span before and after, "
                                     "per iteration, critical path."),
    "diff": CommandEntry("diff", "Compare runs A and B: buckets, kernels, kernel classes, syncs "
                                 "and findings."),
    "baseline": CommandEntry("baseline_cmd", "Performance baselines for `tracelint gate`."),
    "gate": CommandEntry("gate", "Check one or more runs against a performance baseline: exit 1 "
                                 "on a regression (or a missing baseline metric), 2 when not "
                                 "comparable or nothing could be gated."),
    "case": CommandEntry("case", "The case library: performance failures with evidence, fix, "
                                 "counter-example and rollback trigger, replayed from trace excerpts."),
    "redact": CommandEntry("redact", "Write a copy of a trace with secrets replaced by "
                                     "<redacted>, for sharing."),
}


class LazyGroup(TyperGroup):
    """The root group: lists commands from COMMANDS and imports a command's module on first use."""

    def list_commands(self, ctx) -> list[str]:
        return list(COMMANDS) + [n for n in self.commands if n not in COMMANDS]

    def get_command(self, ctx, cmd_name: str):
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            from . import help_types  # noqa: F401  (--help in words, not Python type names)
            importlib.import_module(f"{__package__}.{COMMANDS[cmd_name].module}")
            built = typer.main.get_command(app)  # rebuilt with what the import registered
            if cmd_name in built.commands:
                command = built.commands[cmd_name]
                _coerce_missing_cheaply([*command.params, command.get_help_option(ctx)])
                self.commands[cmd_name] = command
        return self.commands.get(cmd_name)

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        _coerce_missing_cheaply([*self.params, option])
        return option

    def format_help(self, ctx, formatter) -> None:
        """The root help from the table alone (typer's rich help would import every command)."""
        from .help_root import print_root_help
        print_root_help(self, ctx, [(n, e.help) for n, e in COMMANDS.items()])


class _MissingFirst:
    """typer coerces every parameter through a pydantic TypeAdapter, built on first use even for
    an option left out (pydantic's import is ~0.16 s of CPU). This returns what typer returns
    for a missing value (None, or () for multi-value) and builds typer's coercion only for a
    value that was given."""

    def __init__(self, param):
        self._param, self._real = param, None

    def coerce(self, value, param, ctx):
        if value is None:
            return () if (param.multiple or param.nargs == -1) else None
        if self._real is None:
            from typer._coercion import build_runtime_param
            self._real = build_runtime_param(self._param.type_descriptor)
        return self._real.coerce(value, param=param, ctx=ctx)


def _coerce_missing_cheaply(params) -> None:
    """Install _MissingFirst on a command's parameters (its --help option included) where
    typer's internals are as expected (typer 0.2x); with another typer they stay as they are."""
    for param in params:
        if getattr(param, "_runtime_param", 0) is None and hasattr(param, "type_descriptor"):
            param._runtime_param = _MissingFirst(param)


app = typer.Typer(
    name="tracelint", no_args_is_help=True, add_completion=False,
    pretty_exceptions_enable=False, cls=LazyGroup,
    help="Trace analysis and anti-pattern linter for GPU / AI workloads "
         "(Nsight Systems SQLite, torch.profiler / Kineto JSON).")


def _err_console():
    from rich.console import Console
    return Console(stderr=True, highlight=False)


def _version(value: bool):
    if value:
        print(f"tracelint {__version__}")
        raise typer.Exit(0)


_debug = False


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit."),
          debug: bool = typer.Option(False, "--debug", help="Show full tracebacks of internal errors.")):
    """tracelint: lint GPU/AI traces for performance anti-patterns."""
    global _debug
    _debug = debug


def _register() -> None:
    """Import every command module in the table (tests, and tools that walk all commands)."""
    from . import help_types  # noqa: F401
    for entry in COMMANDS.values():
        importlib.import_module(f"{__package__}.{entry.module}")


def _line(message) -> str:
    """An error message as one safe line: scrubbed (a URL's password, a token in a name),
    control characters removed, bounded (tracelint.secrets.sink / reporters.escape)."""
    from ..secrets.sink import current_sink
    return current_sink().message(str(message))


def fail(message: str) -> "typer.Exit":
    """Print a one-line error and return the exit-2 exception to raise."""
    from rich.markup import escape
    _err_console().print(f"[bold red]tracelint: error:[/] {escape(_line(message))}", markup=True,
                      highlight=False, soft_wrap=True)
    return typer.Exit(2)


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, standalone_mode=True)
    except TracelintError as exc:
        _err_console().print(f"tracelint: error: {_line(exc)}", markup=False, highlight=False,
                          soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        _err_console().print("tracelint: interrupted", markup=False)
        sys.exit(130)
    except RecursionError:
        _err_console().print("tracelint: error: the input nests too deeply to read", markup=False)
        sys.exit(2)
    except MemoryError:
        _err_console().print("tracelint: error: out of memory while reading the trace", markup=False)
        sys.exit(2)
    except Exception as exc:  # a bug in tracelint: one line unless --debug asks for more
        if _debug:
            raise
        _err_console().print(f"tracelint: internal error: {type(exc).__name__}: {_line(exc)} "
                          "(rerun with --debug for the traceback, and please report it)",
                          markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
