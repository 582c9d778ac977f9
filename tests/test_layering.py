"""The house's layering, checked on every run: imports only run down the layers, and no two
modules import each other (directly or through others).

    timeline <- importers <- engine <- rules <- api <- reporters/analysis/cases/ranks <- cli

A new import that runs up (the engine reaching for a reporter, a rule for the CLI) fails here
with the offending file and line, before it becomes a circle that makes the code hard to move.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: (module prefix, layer). The longest matching prefix wins; a higher layer may import a lower
#: one or its own, never a higher one.
LAYERS: list[tuple[str, int]] = [
    ("tracelint._version", 0), ("tracelint.errors", 0), ("tracelint.io", 0), ("tracelint.forking", 0),
    ("tracelint.heap", 0), ("tracelint.jit", 0),
    ("tracelint.reporters.escape", 0),   # the one escaping path: a leaf every layer may use
    ("tracelint.timeline", 1),
    ("tracelint.importers", 2), ("tracelint.synth", 2),
    ("tracelint.engine", 3),
    ("tracelint.secrets", 4),          # scan builds Findings; TL100/TL101 call it
    ("tracelint.efficiency", 4),
    ("tracelint.whatif", 2),           # reads only the timeline; engine/savings.py replays fixes with it
    ("tracelint.rules", 5), ("tracelint.synth.scenarios", 5),   # scenarios name rules and configs
    ("tracelint.cases.model", 6), ("tracelint.cases.excerpt", 6), ("tracelint.cases.kineto_excerpt", 6),
    ("tracelint.cases.rocprof_excerpt", 6),
    ("tracelint.cases.match", 6),
    ("tracelint.cases.library", 6), ("tracelint.cases.preconditions", 6), ("tracelint.cases.yaml_style", 6),
    ("tracelint.api", 7),
    ("tracelint.reporters", 8), ("tracelint.analysis", 8), ("tracelint.cases", 8),
    ("tracelint.reporters.fmt", 3),    # the ONE number/duration style: rules and cases use it
    ("tracelint.ranks", 8), ("tracelint.capture", 8),
    ("tracelint.cli", 9), ("tracelint.__main__", 10),
    ("tracelint", 0),                  # the root package: version and a lazy facade (below)
]


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[0] == "rules":
        parts = ["tracelint", "rules", *parts[1:]]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> int | None:
    best = None
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, layer)
    return best[1] if best else None


def source_files() -> list[Path]:
    files = sorted((REPO / "tracelint").rglob("*.py")) + sorted((REPO / "rules").glob("*.py"))
    return [f for f in files if "__pycache__" not in f.parts]


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imports_of(path: Path) -> list[tuple[str, int]]:
    """(imported tracelint module, line) for every import in the file, lazy ones included.
    The root package's lazy facade (`__getattr__` in tracelint/__init__.py) is the one place
    allowed to reach up: it is what `import tracelint` exposes."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if me == "tracelint" and isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            skip |= {id(n) for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("tracelint")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("tracelint"):
                continue
            if node.module is None or target in _packages():
                # `from . import x` / `from ..timeline import model`: the submodules named
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    out.append((sub if sub in _modules() else target, node.lineno))
            else:
                out.append((target, node.lineno))
    return out


_CACHE: dict[str, set[str]] = {}


def _modules() -> set[str]:
    if "m" not in _CACHE:
        _CACHE["m"] = {module_name(f) for f in source_files()}
    return _CACHE["m"]


def _packages() -> set[str]:
    if "p" not in _CACHE:
        _CACHE["p"] = {module_name(f) for f in source_files() if f.name == "__init__.py"}
    return _CACHE["p"]


def graph() -> dict[str, set[str]]:
    mods = _modules()
    g: dict[str, set[str]] = {}
    for f in source_files():
        me = module_name(f)
        edges = set()
        for target, _ in imports_of(f):
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != me:
                edges.add(target)
        g[me] = edges
    return g


def test_every_module_has_a_layer():
    missing = sorted(m for m in _modules() if layer_of(m) is None)
    assert not missing, f"modules without a layer in tests/test_layering.py: {missing}"


def test_no_import_runs_up_the_layers():
    bad = []
    for f in source_files():
        me = module_name(f)
        mine = layer_of(me)
        for target, line in imports_of(f):
            theirs = layer_of(target)
            if theirs is not None and mine is not None and theirs > mine:
                bad.append(f"{f.relative_to(REPO)}:{line} ({me}, layer {mine}) imports "
                           f"{target} (layer {theirs})")
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_no_import_circles():
    g = graph()
    # Tarjan's strongly connected components: any component of two or more is a circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


@pytest.mark.parametrize("limit", [500])
def test_no_module_over_limit(limit):
    big = [f"{f.relative_to(REPO)}: {n} lines" for f in source_files()
           if (n := len(f.read_text().splitlines())) > limit]
    assert not big, f"modules over {limit} lines (split them by concept):\n" + "\n".join(big)
