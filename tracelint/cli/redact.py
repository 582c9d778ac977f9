"""`tracelint redact TRACE -o OUT`: a copy of a trace with secrets (and, with --paths, home
directories, user and host names) replaced, for sharing. `--check`: exit 1 when anything would
be scrubbed (CI), 0 when the trace is clean; nothing is written. Bad input: one line, exit 2.

The input is never modified (it is opened read-only, and OUT may not be the input).
"""
from __future__ import annotations

from collections import Counter
from typing import Annotated, Optional

import typer

from ..errors import TracelintError
from .app import app, fail

#: how many lines of detail to print before "... and N more"
_DETAIL = 20


def _describe(hits, counts, quiet: bool) -> list[str]:
    if quiet:
        return []
    lines = []
    for h in hits[:_DETAIL]:
        lines.append(f"  {h.severity:<5} {h.describe()}")
    total = sum(counts.values())
    if total > len(lines):
        by_kind = Counter()
        for (kind, _), n in counts.items():
            by_kind[kind] += n
        rest = ", ".join(f"{n} {k}" for k, n in by_kind.most_common())
        lines.append(f"  … {total - len(lines)} more (all: {rest})")
    return lines


def _counts_line(counts, paths: bool) -> str:
    from ..secrets.patterns import PERSONAL_MARKS
    secrets = sum(n for (k, _), n in counts.items() if k not in PERSONAL_MARKS)
    personal = sum(n for (k, _), n in counts.items() if k in PERSONAL_MARKS)
    parts = [f"{secrets} secret{'s' if secrets != 1 else ''}"]
    if paths:
        parts.append(f"{personal} personal value{'s' if personal != 1 else ''}")
    return " and ".join(parts)


@app.command()
def redact(
    trace: Annotated[str, typer.Argument(help="Trace to scrub: nsys .sqlite, rocpd .db, Kineto, jax.profiler or rocprofv3 .json / .json.gz (never modified).")],
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write the scrubbed copy here (must not be TRACE).")] = None,
    paths: Annotated[bool, typer.Option("--paths", help="Also anonymise home directories (/home/<user>), user names, host names and e-mail addresses.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 if anything would be scrubbed, 0 if not (for CI).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the summary line.")] = False,
):
    """Write a copy of a trace with secrets replaced by <redacted>, for sharing.

    Timings, ids and kernel / API names are kept, so the copy lints like the original (minus the security findings). SQLite copies are VACUUMed (no old values in free pages) and pass PRAGMA integrity_check; JSON keeps its compression. Values are never printed, only masked previews (hf_a…(37 chars)) and where they are.
    """
    from ..secrets.redact import check_file, redact_file, same_file
    if check and output:
        raise fail("--check writes nothing: give either --check or -o OUT")
    if not check and not output:
        raise fail("give -o OUT for the scrubbed copy (or --check to only test the trace)")
    if check:
        try:
            res = check_file(trace, paths=paths)
        except TracelintError as exc:
            raise fail(str(exc)) from None
        if not res.counts:
            scope = ("secrets, home directories, user and host names" if paths
                     else "secrets; add --paths for personal data")
            typer.echo(f"{trace}: clean, nothing to scrub ({scope})")
            raise typer.Exit(0)
        typer.echo(f"{trace}: {_counts_line(res.counts, paths)} would be scrubbed")
        for line in _describe(res.hits, res.counts, quiet):
            typer.echo(line)
        raise typer.Exit(1)
    if same_file(trace, output):
        raise fail(f"{output}: the output must not be the input (redact never edits a trace in place)")
    try:
        result = redact_file(trace, output, paths=paths)
    except TracelintError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"{exc.filename or output}: {exc.strerror or exc}") from None
    if result.total:
        typer.echo(f"{output}: scrubbed {_counts_line(result.counts, paths)} "
                   f"({result.changed_cells} string{'s' if result.changed_cells != 1 else ''} changed) from {trace}",
                   err=True)
        for line in _describe(result.hits, result.counts, quiet):
            typer.echo(line, err=True)
    else:
        typer.echo(f"{output}: nothing to scrub in {trace}; wrote a clean copy", err=True)
