"""The typer side of the `tracelint` command: the root group, built on first use.

cli.app holds the command table and `main`; this module (typer, click) is imported only when a
command actually runs, or for `--help` of a command: `--version`, `--help` and the rule list
are printed by cli.light without it. Commands are registered lazily from cli.app.COMMANDS: a
command's module (and with it pandas, numpy and the rule engine) is imported only when that
command runs.
"""
from __future__ import annotations

import importlib

import typer
from typer.core import TyperGroup

from .. import __version__
from .coercion import coerce_cheaply
from .light import print_root_help


class LazyGroup(TyperGroup):
    """The root group: lists commands from the table (cli.app.COMMANDS) and imports a command's
    module on first use."""

    table: dict = {}  # name -> CommandEntry, set by make_app
    options: dict = {}  # root option -> help line

    def list_commands(self, ctx) -> list[str]:
        return list(self.table) + [n for n in self.commands if n not in self.table]

    def get_command(self, ctx, cmd_name: str):
        if cmd_name not in self.commands and cmd_name in self.table:
            from . import help_types  # noqa: F401  (--help in words, not Python type names)
            importlib.import_module(f"{__package__}.{self.table[cmd_name].module}")
            built = typer.main.get_command(app)  # rebuilt with what the import registered
            if cmd_name in built.commands:
                command = built.commands[cmd_name]
                coerce_cheaply([*command.params, command.get_help_option(ctx)])
                self.commands[cmd_name] = command
        return self.commands.get(cmd_name)

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        coerce_cheaply([*self.params, option])
        return option

    def format_help(self, ctx, formatter) -> None:
        """The root help from the table alone (typer's rich help would import every command);
        the same text cli.light prints for `tracelint --help` without typer."""
        print_root_help(self.get_usage(ctx), self.help, self.options,
                        [(name, entry.help) for name, entry in self.table.items()])


app = None  # the typer app, built once by make_app
debug = False


def make_app(table: dict, root_help: str, options: dict):
    """The root typer app over the command table (cli.app.COMMANDS), built on the first call."""
    global app
    if app is not None:
        return app
    LazyGroup.table, LazyGroup.options = table, options
    app = typer.Typer(name="tracelint", no_args_is_help=True, add_completion=False,
                      pretty_exceptions_enable=False, cls=LazyGroup, help=root_help)

    @app.callback()
    def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                           help=options["--version"]),
              debug_: bool = typer.Option(False, "--debug", help=options["--debug"])):
        """tracelint: lint GPU/AI traces for performance anti-patterns."""
        global debug
        debug = debug_

    return app


def _version(value: bool):
    if value:
        print(f"tracelint {__version__}")
        raise typer.Exit(0)
