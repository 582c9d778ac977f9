"""Start-up paths stay light: `--version`, `--help` and `rules` import neither pandas nor numpy
(nor pydantic), the lazy command table agrees with the command modules, and the rule catalogue
cache lists what the registry lists and notices a changed rule file. Not timed: the figures
are in docs/performance.md (bench/bench_startup.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tracelint.cli import app as app_mod

HEAVY = ("pandas", "numpy", "pydantic", "tracelint.timeline.model", "tracelint.engine.registry")

PROBE = """
import sys
from tracelint.cli.app import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print("\\nMODULES " + " ".join(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def _run(args, tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "200"}
    res = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                         env=env, timeout=300)
    modules = set(res.stderr.rsplit("MODULES ", 1)[1].split())
    return res, modules


@pytest.mark.parametrize("args", [["--version"], ["--help"], [], ["rules"], ["rules", "--help"],
                                  ["lint", "--help"]])
def test_light_paths_do_not_import_heavy_modules(args, tmp_path):
    if args == ["rules"]:  # the first listing fills the cache; the second must be light
        _run(args, tmp_path)
    res, modules = _run(args, tmp_path)
    assert res.returncode == (2 if args == [] else 0), res.stderr
    loaded = [m for m in HEAVY if m in modules]
    if args[:1] == ["lint"]:  # its module imports the config and the engine, not pandas
        loaded = [m for m in loaded if m in ("pandas", "numpy")]
    assert not loaded, f"{args} imported {loaded}"
    if args in (["--version"], ["--help"], ["rules"]):  # printed by cli.light, before typer
        assert not {"typer", "rich", "click"} & {m.split(".")[0] for m in modules}, args


def _plain(args, tmp_path, columns="200"):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": columns}
    env.pop("NO_COLOR", None)
    return subprocess.run([sys.executable, "-m", "tracelint", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def test_light_help_is_the_typer_root_help(tmp_path):
    """`tracelint --help` (printed without typer) and the help typer prints for a bare
    `tracelint` (exit 2) are the same text."""
    light, typer_side = _plain(["--help"], tmp_path), _plain([], tmp_path)
    assert light.returncode == 0 and typer_side.returncode == 2
    assert light.stdout == typer_side.stdout
    assert "Usage: python -m tracelint [OPTIONS] COMMAND [ARGS]..." in light.stdout
    for option in ("--version", "--debug", "--help"):
        assert option in light.stdout


def test_light_rule_list_is_the_registry_and_fits_the_terminal(tmp_path):
    """The light list names every rule the registry has, with its slug and severity; an option
    (`--rules-dir` of an empty folder) goes through typer and prints the same list; no line is
    wider than the terminal, wide or narrow."""
    from tracelint.api import available_rules
    rules = available_rules()
    empty = tmp_path / "none"
    empty.mkdir(mode=0o755)
    for columns in ("200", "80", "50"):
        light = _plain(["rules"], tmp_path, columns)
        assert light.returncode == 0, light.stderr
        via_typer = _plain(["rules", "--rules-dir", str(empty)], tmp_path, columns)
        assert via_typer.stdout == light.stdout
        lines = light.stdout.splitlines()
        assert max(len(line) for line in lines) <= int(columns)
        starts = [line.split()[0] for line in lines if line[:2] == "TL"]
        assert starts == [r.id for r in rules]
        text = " ".join(light.stdout.split())
        for r in rules:
            assert r.slug in text and r.severity.value in text


def test_help_lists_every_command_with_its_own_one_line_help(tmp_path):
    """The table's help lines are the commands' docstrings (or group help), so `--help` shows
    the same text the modules declare."""
    import typer.main
    app_mod._register()
    built = typer.main.get_command(app_mod.app)
    assert set(built.commands) == set(app_mod.COMMANDS)
    for name, entry in app_mod.COMMANDS.items():
        cmd = built.commands[name]
        declared = " ".join((cmd.help or "").split("\n\n")[0].split())
        assert declared == entry.help, name
    res, _ = _run(["--help"], tmp_path)
    for name, entry in app_mod.COMMANDS.items():
        assert name in res.stdout
    assert " ".join(res.stdout.split()).count("Lint a trace for performance anti-patterns.") == 1


def test_rules_listing_from_cache_equals_registry_and_follows_edits(tmp_path, monkeypatch):
    from tracelint.api import available_rules
    from tracelint.cli.catalogue import cache_dir, rule_catalogue
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    expected = [r.id for r in available_rules()]
    first = rule_catalogue()
    assert [r["id"] for r in first] == expected
    assert len(list(cache_dir().glob("rules-*.json"))) == 1
    assert rule_catalogue() == first
    # a corrupt cache file is ignored and rewritten
    (cached,) = cache_dir().glob("rules-*.json")
    cached.write_text("{not json")
    assert rule_catalogue() == first
    assert json.loads(cached.read_text()) == first
    # a user rule folder is part of the key: adding a rule file gives a new, longer listing
    user = tmp_path / "myrules"
    user.mkdir()
    (user / "tl900_x.py").write_text(
        "from tracelint.engine.rule import Rule\n"
        "class X(Rule):\n    '''Planted user rule.'''\n    id = 'TL900'\n    slug = 'planted-x'\n"
        "    def check(self, ctx):\n        return iter(())\n")
    with_user = rule_catalogue([str(user)])
    assert [r["id"] for r in with_user if r["id"] == "TL900"] == ["TL900"]
    assert next(r for r in with_user if r["id"] == "TL900")["summary"] == "Planted user rule."
    # editing the file changes its size and mtime, so the cache is rebuilt from the new text
    (user / "tl900_x.py").write_text((user / "tl900_x.py").read_text().replace(
        "Planted user rule.", "Edited planted rule, longer."))
    os.utime(user / "tl900_x.py", ns=(1, 10**18))
    edited = rule_catalogue([str(user)])
    assert next(r for r in edited if r["id"] == "TL900")["summary"] == "Edited planted rule, longer."


def test_a_lint_into_a_file_does_not_import_rich(tmp_path):
    """Nothing is written to stderr, so rich's Console is never made (cli.common.stderr)."""
    from conftest import BUNDLED
    out = tmp_path / "r.json"
    res, modules = _run(["lint", str(BUNDLED / "nsys" / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite"),
                         "-f", "json", "-o", str(out), "--fail-on", "never"], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(out.read_text())["findings"]
    assert "rich" not in modules and "rich.console" not in modules
    res, modules = _run(["lint", str(tmp_path / "missing.json")], tmp_path)
    assert res.returncode == 2 and "no such file" in res.stderr     # a note: rich made then


def test_a_job_lint_into_a_file_imports_neither_rich_nor_jinja2(tmp_path):
    """The coordinator's serial part of `lint DIR --jobs N`: no progress bar's rich modules
    without a terminal, and no HTML templating for a JSON report."""
    from conftest import BUNDLED
    from tracelint.ranks.synth import make_job
    job = tmp_path / "job"
    make_job(BUNDLED / "torch" / "hta_nccl_a100_rank0of2.json.gz", job, ranks=2)
    out = tmp_path / "r.json"
    res, modules = _run(["lint", str(job), "--jobs", "1", "-f", "json", "-o", str(out),
                         "--fail-on", "never"], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert len(json.loads(out.read_text())["ranks"]) == 2
    assert not {"rich", "rich.console", "rich.progress", "jinja2"} & modules


@pytest.mark.parametrize("env", [{}, {"TTY_COMPATIBLE": "1"}, {"TTY_COMPATIBLE": "0"},
                                 {"FORCE_COLOR": "1"}, {"FORCE_COLOR": ""},
                                 {"FORCE_COLOR": "1", "TTY_COMPATIBLE": "0"}])
def test_the_terminal_pre_check_never_hides_a_terminal_rich_sees(env, monkeypatch):
    """stderr_may_be_terminal() is False only where rich's Console says no terminal too."""
    from rich.console import Console
    from tracelint.cli import common
    for k in ("TTY_COMPATIBLE", "FORCE_COLOR"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if not common.stderr_may_be_terminal():
        assert not Console(stderr=True).is_terminal


def test_the_progress_bar_draws_on_a_terminal(tmp_path):
    """Where stderr is a terminal (TTY_COMPATIBLE=1 says so to rich), the load's progress bar
    is drawn on the Console that cli.common makes on first use."""
    from conftest import REPO
    env = {**os.environ, "TTY_COMPATIBLE": "1", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    res = subprocess.run([sys.executable, "-m", "tracelint", "lint",
                          str(REPO / "fixtures/examples/training_step_antipatterns.json.gz"),
                          "-f", "json", "-o", str(tmp_path / "r.json"), "--fail-on", "never"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "loading training_step_antipatterns.json.gz" in res.stderr
    assert json.loads((tmp_path / "r.json").read_text())["findings"]
