"""`tracelint rules [ID]`: the catalogue, and each rule's full documentation."""
from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from .app import app, fail


@app.command("rules")
def rules_cmd(
    rule: Annotated[Optional[str], typer.Argument(help="A rule id or slug to show in full.")] = None,
    rules_dir: Annotated[Optional[list[str]], typer.Option("--rules-dir", help="Extra folder of rule files.")] = None,
):
    """List the rules, or print one rule's documentation."""
    console = Console()
    if rule is None:  # the list comes from the catalogue cache: no rule module is imported
        from .catalogue import rule_catalogue
        t = Table(title="tracelint rules", title_justify="left")
        columns = ("id", "slug", "severity", "scope", "layers", "summary")
        for col in columns:
            t.add_column(col, overflow="fold")
        for r in rule_catalogue(rules_dir or []):
            t.add_row(*(",".join(r[c]) if c == "layers" else r[c] for c in columns))
        console.print(t)
        return
    from rich.markdown import Markdown

    from ..api import available_rules
    from ..engine.config import Config
    from ..engine.registry import matches
    available = available_rules(Config(rules_dirs=list(rules_dir or [])))
    chosen = [r for r in available if r.id == rule.upper() or r.slug == rule.lower()]
    if not chosen:
        chosen = [r for r in available if matches(r, rule)]
    if not chosen:
        raise fail(f"unknown rule {rule!r} (see `tracelint rules`)")
    for r in chosen:
        console.rule(f"[bold]{r.id} {r.slug}[/] — {r.title}")
        console.print(f"severity: {r.severity.value}   layers: {', '.join(sorted(x.value for x in r.layers))}   "
                      f"needs: {', '.join(sorted(r.needs)) or '-'}")
        console.print(Markdown(_doc_markdown(r)))
        opts = r.option_docs()
        if opts:
            t = Table(title="Options", title_justify="left")
            for col in ("name", "default", "meaning"):
                t.add_column(col)
            for name, default, help_ in opts:
                t.add_row(name, repr(default), help_)
            console.print(t)


def _doc_markdown(r) -> str:
    lines = r.doc().splitlines()
    out = [f"**{lines[0]}**" if lines else ""]
    for ln in lines[1:]:
        head = ln.split(":", 1)[0]
        if head in ("What it detects", "Why it hurts", "Evidence", "Fix",
                    "Counter-example (when it does not apply)", "Options", "References"):
            out.append(f"\n**{head}:**{ln.split(':', 1)[1]}")
        else:
            out.append(ln)
    return "\n".join(out)
