"""The `tracelint` command: the command table and `main`.

Commands are registered lazily from COMMANDS (name -> module, one-line help): a command's module
(and with it pandas, numpy and the rule engine) is imported only when that command runs. A new
command module is added to the table; its line there is the help shown by `tracelint --help`
(tests/test_cli_startup.py checks that the two agree). This module imports neither typer nor
rich: `tracelint --version`, `--help` and `rules` (the list) are printed by cli.light before
typer is imported (about half of their CPU time was typer and rich); everything else runs
through the typer app in cli.root (`app` here is that app, built on first use).

Errors the user can fix (bad input, bad options) print one line and exit 2; never a traceback.
"""
from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, NamedTuple

from ..errors import TracelintError

if TYPE_CHECKING:                  # typer is imported where a command runs (start-up cost)
    import typer


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


#: The root options, as `tracelint --help` shows them (cli.root declares them with these texts).
ROOT_OPTIONS = {"--version": "Print the version and exit.",
                "--debug": "Show full tracebacks of internal errors.",
                "--help": "Show this message and exit."}
ROOT_HELP = ("Trace analysis and anti-pattern linter for GPU / AI workloads "
             "(Nsight Systems SQLite, torch.profiler / Kineto JSON).")


def __getattr__(name: str):
    if name == "app":  # the typer app (imports typer): for command modules and tests
        from .root import make_app
        return make_app(COMMANDS, ROOT_HELP, ROOT_OPTIONS)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _err_console():
    from rich.console import Console
    return Console(stderr=True, highlight=False)


def _register() -> None:
    """Import every command module in the table (tests, and tools that walk all commands)."""
    from . import help_types  # noqa: F401
    __getattr__("app")
    for entry in COMMANDS.values():
        importlib.import_module(f"{__package__}.{entry.module}")


def _line(message) -> str:
    """An error message as one safe line: scrubbed (a URL's password, a token in a name),
    control characters removed, bounded (tracelint.secrets.sink / reporters.escape)."""
    from ..secrets.sink import current_sink
    return current_sink().message(str(message))


def fail(message: str) -> typer.Exit:
    """Print a one-line error and return the exit-2 exception to raise."""
    import typer
    from rich.markup import escape
    _err_console().print(f"[bold red]tracelint: error:[/] {escape(_line(message))}", markup=True,
                      highlight=False, soft_wrap=True)
    return typer.Exit(2)


def _debug() -> bool:
    root = sys.modules.get(f"{__package__}.root")
    return bool(root and root.debug)


def run() -> None:
    """The `tracelint` command (its entry point): main(), then the process ends without the
    interpreter's teardown where that is safe (cli.quick_exit). numpy's BLAS gets one thread
    (cli.blas_threads), pandas runs without pyarrow (cli.no_pyarrow), and the garbage
    collector waits for the first trace (tracelint.collector)."""
    from ..collector import pause_for_startup
    from .blas_threads import limit_to_one
    from .no_pyarrow import keep_out as keep_pyarrow_out
    from .quick_exit import run as run_then_exit
    limit_to_one()      # before anything imports numpy (cli.blas_threads)
    keep_pyarrow_out()  # before anything imports pandas (cli.no_pyarrow)
    pause_for_startup()     # no collections until the first trace (tracelint.collector)
    run_then_exit(main)


def main(argv: list[str] | None = None) -> None:
    try:
        from .light import run_light
        if run_light(sys.argv[1:] if argv is None else list(argv), ROOT_HELP, ROOT_OPTIONS,
                     [(name, entry.help) for name, entry in COMMANDS.items()]):
            sys.exit(0)  # as typer's standalone mode ends every command
        from ..heap import keep_freed_pages
        keep_freed_pages()  # this process owns its heap: reuse freed arrays' pages (tracelint.heap)
        from .root import make_app
        make_app(COMMANDS, ROOT_HELP, ROOT_OPTIONS)(args=argv, standalone_mode=True)
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
        if _debug():
            raise
        _err_console().print(f"tracelint: internal error: {type(exc).__name__}: {_line(exc)} "
                          "(rerun with --debug for the traceback, and please report it)",
                          markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
