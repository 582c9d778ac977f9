"""`tracelint rules [ID]`: the catalogue, and each rule's full documentation."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..reporters.fmt import doc_markdown
from .app import app, fail


@app.command("rules")
def rules_cmd(
    rule: Annotated[Optional[str], typer.Argument(help="A rule id or slug to show in full.")] = None,
    rules_dir: Annotated[Optional[list[str]], typer.Option("--rules-dir", help="Extra folder of rule files.")] = None,
):
    """List the rules, or print one rule's documentation."""
    if rule is None:  # the list comes from the catalogue cache: no rule module is imported
        from .catalogue import rule_catalogue
        from .light import print_rule_list
        print_rule_list(rule_catalogue(rules_dir or []))
        return
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.table import Table

    from ..api import available_rules
    from ..engine.config import Config
    from ..engine.registry import matches
    available = available_rules(Config(rules_dirs=list(rules_dir or [])))
    chosen = [r for r in available if r.id == rule.upper() or r.slug == rule.lower()]
    if not chosen:
        chosen = [r for r in available if matches(r, rule)]
    if not chosen:
        raise fail(f"unknown rule {rule!r} (see `tracelint rules`)")
    console = Console()
    for r in chosen:
        console.rule(f"[bold]{r.id} {r.slug}[/] — {r.title}")
        console.print(f"severity: {r.severity.value}   layers: {', '.join(sorted(x.value for x in r.layers))}   "
                      f"needs: {', '.join(sorted(r.needs)) or '-'}")
        console.print(Markdown(doc_markdown(r.doc())))
        for line in example_lines(r.id):
            console.print(line, highlight=False)
        opts = r.option_docs()
        if opts:
            t = Table(title="Options", title_justify="left")
            for col in ("name", "default", "meaning"):
                t.add_column(col)
            for name, default, help_ in opts:
                t.add_row(name, repr(default), help_)
            console.print(t)


#: The examples index: a table whose rows name the anti-pattern file, the rules it shows and
#: its fixed twin (first backticked file of the last column).
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_FILE = re.compile(r"`([\w.]+\.py)`")


def example_lines(rule_id: str) -> list[str]:
    """'worked example: examples/item_in_loop.py, fixed twin: examples/item_fixed.py' for every
    example whose README row names the rule; nothing outside a source checkout."""
    index = EXAMPLES / "README.md"
    if not index.is_file():
        return []
    out = []
    for row in index.read_text().splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 5 or rule_id not in " ".join(cells[1:-1]):
            continue
        bad, good = _FILE.search(cells[0]), _FILE.search(cells[-1])
        if bad and good:
            out.append(f"worked example: {EXAMPLES / bad.group(1)} — fixed twin: {EXAMPLES / good.group(1)}"
                       f"\n  try: tracelint capture -- python {EXAMPLES / bad.group(1)}")
    return out
