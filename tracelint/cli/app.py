"""The `tracelint` command: one small Typer app per command module, composed here.

Errors the user can fix (bad input, bad options) print one line and exit 2; never a traceback.
"""
from __future__ import annotations

import sys

import typer
from rich.console import Console

from .. import __version__
from ..errors import TracelintError

app = typer.Typer(
    name="tracelint", no_args_is_help=True, add_completion=False,
    pretty_exceptions_enable=False,
    help="Trace analysis and anti-pattern linter for GPU / AI workloads "
         "(Nsight Systems SQLite, torch.profiler / Kineto JSON).")

err_console = Console(stderr=True, highlight=False)


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
    """Import every command module of this package; each adds its commands to `app`."""
    import importlib
    import pkgutil
    from . import __path__ as here
    for info in sorted(pkgutil.iter_modules(here), key=lambda i: i.name):
        if info.name not in ("app", "common"):
            importlib.import_module(f"{__package__}.{info.name}")


def _line(message) -> str:
    """An error message as one safe line: scrubbed (a URL's password, a token in a name),
    control characters removed, bounded (tracelint.secrets.sink / reporters.escape)."""
    from ..secrets.sink import current_sink
    return current_sink().message(str(message))


def fail(message: str) -> "typer.Exit":
    """Print a one-line error and return the exit-2 exception to raise."""
    from rich.markup import escape
    err_console.print(f"[bold red]tracelint: error:[/] {escape(_line(message))}", markup=True,
                      highlight=False, soft_wrap=True)
    return typer.Exit(2)


def main(argv: list[str] | None = None) -> None:
    _register()
    try:
        app(args=argv, standalone_mode=True)
    except TracelintError as exc:
        err_console.print(f"tracelint: error: {_line(exc)}", markup=False, highlight=False,
                          soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("tracelint: interrupted", markup=False)
        sys.exit(130)
    except RecursionError:
        err_console.print("tracelint: error: the input nests too deeply to read", markup=False)
        sys.exit(2)
    except MemoryError:
        err_console.print("tracelint: error: out of memory while reading the trace", markup=False)
        sys.exit(2)
    except Exception as exc:  # a bug in tracelint: one line unless --debug asks for more
        if _debug:
            raise
        err_console.print(f"tracelint: internal error: {type(exc).__name__}: {_line(exc)} "
                          "(rerun with --debug for the traceback, and please report it)",
                          markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
