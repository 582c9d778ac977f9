"""Case pages: one Markdown page per case (`<id>.md`) and an index (`index.md`)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from ..io import write_atomic
from ..reporters.escape import md_code, md_safe
from .excerpt import SIZE_LIMIT_BYTES
from .model import Case


def _cell(text: str) -> str:
    return md_safe(" ".join(str(text).split()).replace("|", "\\|"))


def _para(text: str) -> str:
    """Each line of the YAML text its own paragraph (Markdown would join single newlines)."""
    return md_safe("\n\n".join(ln.strip() for ln in str(text).strip().splitlines() if ln.strip()))


def _num(v: float | None) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and not v.is_integer():
        return f"{v:.4g}"
    return f"{int(v):,}" if abs(v) >= 10_000 else f"{v:g}"


def _rule_titles() -> dict[str, str]:
    try:
        from ..api import available_rules
        return {r.id: f"{r.id} {r.slug}" for r in available_rules()}
    except Exception:  # a broken rule module must not stop the docs from rendering
        return {}


def render_case(case: Case, rule_names: dict[str, str] | None = None, excerpt_bytes: int | None = None,
                excerpt_link: str | None = None) -> str:
    names = rule_names if rule_names is not None else _rule_titles()
    rules = ", ".join(f"`{names.get(r, r)}`" for r in case.rules)
    tags = " · ".join(f"{k}: {_cell(v)}" for k, v in case.tags.items())
    out = [f"# {_cell(case.title)}", "",
           f"`{case.id}` · judged by {rules} · **{case.label}**", "", f"*{tags}*", "",
           "## Symptom", "", _para(case.symptom), "",
           "## Key metrics", "",
           "| metric | value | before | unit | source | note |",
           "|---|---:|---:|---|---|---|"]
    for m in case.key_metrics:
        out.append(f"| {md_code(m.name)} | {_num(m.value)} | {_num(m.baseline)} | {_cell(m.unit)} | "
                   f"{_cell(m.source)} | {_cell(m.note)} |")
    rb = case.rollback
    out += ["", "## Trace observation", "", _para(case.observation), "",
            "## Judgement", "", f"Rules: {rules}.", "", _para(case.judgement), "",
            "## Fix", "", _para(case.fix), "",
            "## Counter-example", "", _para(case.counter_example), "",
            "## Rollback trigger", "", f"Roll back when **`{rb.describe()}`**"
            + (f" ({_cell(rb.note)})." if rb.note else "."), "",
            "## Excerpt", ""]
    ex = case.excerpt
    link = excerpt_link or ex.file
    size = f", {excerpt_bytes / 1024:.0f} KiB stored (limit {SIZE_LIMIT_BYTES // 1024} KiB)" \
        if excerpt_bytes is not None else ""
    win = f"; cut around {ex.window_ns[0]}:{ex.window_ns[1]} ns" if ex.window_ns else ""
    ctx = f" ± {ex.context_ns} ns" if ex.context_ns else ""
    out += [f"[`{ex.file}`]({link}) ({ex.format}{size}{win}{ctx}). Replay: "
            f"`tracelint lint {ex.file}`; the library check `tracelint case check` requires:", ""]
    for e in case.expected:
        rng = ", ".join(
            f"{k} in [{'' if lo is None else _num(lo)}, {'' if hi is None else _num(hi)}]"
            for k, (lo, hi) in e.metrics.items())
        out.append(f"- `{names.get(e.rule, e.rule)}`" + (f" with {rng}" if rng else ""))
    pre = case.applies_when.to_dict()
    if pre != {"device": "any"}:
        out += ["", "## Applies when", "",
                "; ".join(f"{k}: {v}" for k, v in pre.items() if k != "metrics")
                + "".join(f"; {k} in [{r.get('min', '')}, {r.get('max', '')}]"
                          for k, r in pre.get("metrics", {}).items())]
    out += ["", "## Provenance", "", _cell(case.provenance_line()), ""]
    return "\n".join(out)


def render_index(cases: list[Case], rule_names: dict[str, str] | None = None) -> str:
    names = rule_names if rule_names is not None else _rule_titles()
    out = ["# Case library", "",
           "Performance failures written down with their evidence, fix, counter-example and "
           "rollback trigger; each replays from a small trace excerpt (`tracelint case check`). "
           "The format: [docs/cases.md](../cases.md).", "",
           "| case | rules | title | hardware | workload | evidence |", "|---|---|---|---|---|---|"]
    for c in sorted(cases, key=lambda c: (c.rules[0], c.id)):
        out.append(f"| [{c.id}]({c.id}.md) | {', '.join(names.get(r, r) for r in c.rules)} | "
                   f"{_cell(c.title)} | {_cell(c.tags.get('hardware', ''))} | "
                   f"{_cell(c.tags.get('workload', ''))} | {c.label} |")
    return "\n".join(out) + "\n"


def render_library(cases: Iterable[Case], out_dir: str | Path) -> list[Path]:
    """Write `<id>.md` per case and `index.md` into out_dir; returns the paths written."""
    from .excerpt import stored_size
    out = Path(out_dir)
    names = _rule_titles()
    written = []
    cases = list(cases)
    for c in cases:
        size = stored_size(c.excerpt_path) if c.path and c.excerpt_path.is_file() else None
        page = out / f"{c.id}.md"
        try:
            link = os.path.relpath(c.excerpt_path, out) if c.path else c.excerpt.file
        except ValueError:
            link = str(c.excerpt_path)
        write_atomic(page, render_case(c, names, size, link))
        written.append(page)
    index = out / "index.md"
    write_atomic(index, render_index(cases, names))
    written.append(index)
    return written
