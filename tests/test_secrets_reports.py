"""No report format leaks a planted secret once scrub_report has run.

The planted traces come from test_secrets: a Kineto trace whose user annotation (it encloses
the kernel launches, so other rules quote it in their NVTX paths) holds a Hugging Face token,
plus environment secrets; and an nsys SQLite copy of a real export with planted rows. Every
available format is rendered (JSON, HTML, SARIF, Markdown, terminal, annotated trace) and
grepped for every secret, with the raw and with the escaped forms JSON / HTML would use.
"""
from __future__ import annotations

import gzip
import html as html_lib
import importlib
import json
from pathlib import Path

import pytest
from rich.console import Console

from test_secrets import K, NSYS_BASE, S, nsys_planted, write_kineto
from tracelint.secrets import scrub_report
from tracelint.secrets.scan import clear_cache


def _have(module: str) -> bool:
    try:
        importlib.import_module(module)
        return True
    except ImportError:
        return False


def render_all(report, tmp_path: Path) -> dict[str, str]:
    """Every format whose reporter is present, as text."""
    out: dict[str, str] = {}
    if _have("tracelint.reporters.json_report"):
        from tracelint.reporters.json_report import render_json
        out["json"] = render_json(report)
    if _have("tracelint.reporters.html"):
        from tracelint.reporters.html import render_html
        out["html"] = render_html(report)
    if _have("tracelint.reporters.sarif"):
        from tracelint.reporters.sarif import render_sarif
        out["sarif"] = json.dumps(render_sarif(report), indent=1)
    if _have("tracelint.reporters.markdown"):
        from tracelint.reporters.markdown import render_markdown
        out["markdown"] = render_markdown(report)
    if _have("tracelint.reporters.terminal"):
        from tracelint.reporters.terminal import render_terminal
        for verbose in (False, True):
            con = Console(record=True, width=200, color_system=None, file=open("/dev/null", "w"))
            render_terminal(report, con, verbose=verbose)
            out[f"terminal{'-verbose' if verbose else ''}"] = con.export_text()
    if _have("tracelint.reporters.annotate"):
        from tracelint.reporters.annotate import write_annotated_trace
        p = write_annotated_trace(report, tmp_path / "annotated.json.gz")
        out["annotate"] = gzip.decompress(p.read_bytes()).decode("utf-8", "replace")
    return out


def forms(secret: str) -> set[str]:
    """The secret as each format may spell it."""
    return {secret, json.dumps(secret)[1:-1], html_lib.escape(secret),
            html_lib.escape(secret, quote=False), secret.replace("\n", "\\n")}


def leaks(rendered: dict[str, str], secrets: dict[str, str]) -> list[tuple[str, str]]:
    bad = []
    for fmt, text in rendered.items():
        for key, secret in secrets.items():
            if any(f in text for f in forms(secret)):
                bad.append((fmt, key))
    return bad


def test_reporters_available():
    """The formats the CLI offers exist (this file greps each of them)."""
    missing = [m for m in ("json_report", "html", "sarif", "markdown", "terminal")
               if not _have(f"tracelint.reporters.{m}")]
    assert not missing, missing


def test_no_format_leaks_a_planted_kineto_secret(tmp_path):
    from tracelint.api import lint
    clear_cache()
    trace = write_kineto(tmp_path / "planted.json.gz")
    report = lint(trace)
    assert any(f.rule == "TL100" for f in report.findings)
    # control: unscrubbed, some format does quote the annotation that holds a token
    raw = render_all(lint(trace), tmp_path)
    assert ("json", "hf_annotation") in leaks(raw, K)
    scrub_report(report)
    rendered = render_all(report, tmp_path)
    assert rendered
    assert leaks(rendered, K) == []
    # the redacted annotation name is still there, so reports stay useful
    assert any("load_weights <redacted>" in t for t in rendered.values())


def test_no_format_leaks_personal_data_with_paths(tmp_path):
    from tracelint.api import lint
    clear_cache()
    trace = write_kineto(tmp_path / "planted.json.gz")
    report = lint(trace)
    scrub_report(report, paths=True)
    rendered = render_all(report, tmp_path)
    assert leaks(rendered, K) == []
    for fmt, text in rendered.items():
        assert "/home/alice" not in text, fmt
        assert "gpu-box-17" not in text, fmt


@pytest.mark.skipif(not NSYS_BASE.exists(), reason="real trace not present")
def test_no_format_leaks_a_planted_nsys_secret(tmp_path):
    from tracelint.api import lint
    path, _ = nsys_planted(tmp_path)
    report = lint(path)
    assert any(f.rule == "TL100" for f in report.findings)
    scrub_report(report)
    rendered = render_all(report, tmp_path)
    assert leaks(rendered, S) == []


def test_diff_outputs_are_scrubbed(tmp_path):
    """`tracelint diff` renders names it did not scrub first: its outputs are scrubbed on write."""
    from conftest import run_cli
    from tracelint.synth.builder import TraceBuilder
    token = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2"
    paths = []
    for i, dur in enumerate((100_000, 130_000)):
        b = TraceBuilder()
        for s in range(4):
            with b.step(s), b.range(f"request token={token}"):
                b.launch("gemm_kernel", dur)
        p = tmp_path / f"r{i}.json"
        b.write_kineto(p)
        paths.append(p)
    for fmt in ("json", "markdown", "html"):
        out = tmp_path / f"diff.{fmt}"
        res = run_cli("diff", *paths, "-f", fmt, "-o", out, "--bucket", "request")
        assert res.returncode in (0, 1), res.stderr
        text = out.read_text()
        assert token not in text and "redacted" in text, fmt


def test_the_sink_learns_its_traces_on_first_use(tmp_path, monkeypatch):
    """The output sink scans the command's traces when it first scrubs a string (or when a
    parallel load's decode readies it, cli/lint.py), not when it is made: that scan no longer
    delays the load. Once, and what the scan found is still removed: a password that looked
    secret only in the trace's environment block, where it reappears in a message."""
    from tracelint.secrets import sink as sink_mod
    clear_cache()
    trace = str(write_kineto(tmp_path / "planted.json.gz"))
    scanned = []
    real = sink_mod.found_in
    monkeypatch.setattr(sink_mod, "found_in", lambda src: scanned.append(src) or real(src))
    line = f"could not open checkpoint {K['password']}.pt"
    assert K["password"] in sink_mod.Sink().text(line)      # control: no trace, no exact value
    sk = sink_mod.Sink([trace])
    assert scanned == []
    assert K["password"] not in sk.text(line) and scanned == [trace]
    sk.ready()
    sk.text("another line")
    sk.learn([trace])
    assert scanned == [trace, trace]                         # learn() itself scans again
    assert K["password"] not in sk.message(line)


def test_every_text_field_of_a_finding_is_scrubbed_but_its_identity():
    """The scrubbing walk covers a finding's text fields by type, not by a list: a field
    added later (the saving note once leaked a GPU name) is scrubbed too."""
    from tracelint.engine.finding import Finding, Severity, Where
    from tracelint.secrets.report_scrub import _finding_texts
    f = Finding("TL004", "unoverlapped-copy", "t", Severity.WARNING, "m", 1, 1, Where(), {})
    names = set(_finding_texts(f))
    assert {"title", "message", "fix", "counter_example", "saving_note"} <= names
    assert not names & {"rule", "slug", "key", "severity"}
