"""The code-review step of the GitHub Action (action.yml): lint the traces a CI job produced,
write SARIF for code scanning and the full HTML report, post or update ONE pull-request
comment (findings + gate result), and fail on --fail-on.

    python -m tracelint.cli.github_review TRACE [TRACE ...] [--fail-on warning] [--out DIR]

Why it is built this way:
- One comment per pull request, found again by a hidden marker, so every push updates it
  instead of adding another; the comment stays under GitHub's 65,536-character limit and
  links to the full HTML report (the workflow run's artifact).
- Several traces (or a folder) are one job: one SARIF run with each finding's rank.
- TRACELINT_REVIEW_DRY_RUN=DIR performs no network call: the code-scanning upload payload,
  the comment body and the comment request are written to DIR, for tests and for trying the
  Action on a fork. Without GITHUB_TOKEN the comment is only written, never posted.
- Only the standard library talks to GitHub (urllib): the Action installs nothing else.
"""
from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

MARKER = "<!-- tracelint-review -->"
COMMENT_LIMIT = 65536


def _event() -> dict[str, Any]:
    path = os.environ.get("GITHUB_EVENT_PATH")
    if not path or not Path(path).is_file():
        return {}
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


def report_url() -> str | None:
    """Where the full HTML report is: TRACELINT_REPORT_URL, else this workflow run's page
    (its artifacts list holds the report)."""
    if os.environ.get("TRACELINT_REPORT_URL"):
        return os.environ["TRACELINT_REPORT_URL"]
    server, repo, run = (os.environ.get(k) for k in
                         ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    return f"{server}/{repo}/actions/runs/{run}#artifacts" if server and repo and run else None


def lint_traces(traces: list[str], fail_on: str, source_roots: list[str]):
    """(markdown, sarif dict, html, exit code) for one trace or one job of several."""
    from ..ranks.report import JobReport, scrub_job_report
    from ..reporters import render
    from ..secrets import scrub_report
    from .lint import Format, _run, build_config
    cfg = build_config(None, None, None, None, fail_on, None, source_roots, None)
    report = _run(traces, cfg, Format.json, ncu=None, annotate=None, quiet=True, jobs=None, dask=None)
    (scrub_job_report if isinstance(report, JobReport) else scrub_report)(report)
    if isinstance(report, JobReport):
        markdown = render(report, "markdown")
    else:
        from ..reporters.markdown import render_markdown
        markdown = render_markdown(report, max_chars=COMMENT_LIMIT - 2000)
    return (markdown, json.loads(render(report, "sarif")), render(report, "html"),
            report.exit_code(cfg.fail_on))


def comment_body(markdown: str, code: int, fail_on: str, url: str | None) -> str:
    """The PR comment: marker, gate line, the findings, the link to the full report; cut to
    fit GitHub's limit with a note when a job's report runs long."""
    gate = ("✅ **gate passed**" if code == 0 else "❌ **gate failed**") + \
        f" (`--fail-on {fail_on}`)"
    link = f"\n\nFull report: [HTML]({url})\n" if url else "\n"
    body = f"{MARKER}\n{gate}\n\n{markdown.strip()}"
    room = COMMENT_LIMIT - len(link) - 200
    if len(body) > room:
        cut = body.rfind("\n", 0, room)
        body = body[:cut if cut > 0 else room] + "\n\n_Comment cut to GitHub's size limit; " \
            "the full report has everything._"
    return body + link


def sarif_upload_payload(sarif: dict, event: dict) -> dict[str, Any]:
    """The body of POST /repos/{repo}/code-scanning/sarifs (gzip + base64 SARIF)."""
    pr = event.get("pull_request") or {}
    sha = (pr.get("head") or {}).get("sha") or os.environ.get("GITHUB_SHA", "")
    ref = f"refs/pull/{pr['number']}/head" if pr.get("number") else os.environ.get("GITHUB_REF", "")
    raw = json.dumps(sarif, ensure_ascii=False).encode()
    return {"commit_sha": sha, "ref": ref, "tool_name": "tracelint",
            "sarif": base64.b64encode(gzip.compress(raw)).decode()}


def _api(method: str, url: str, token: str, body: dict | None = None) -> Any:
    req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": f"Bearer {token}",
                                          "Accept": "application/vnd.github+json",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def comment_request(event: dict, body: str, existing_id: int | None) -> dict[str, Any] | None:
    """The request that creates the comment, or updates the one carrying MARKER."""
    pr = (event.get("pull_request") or {}).get("number") or (event.get("issue") or {}).get("number")
    repo = os.environ.get("GITHUB_REPOSITORY") or (event.get("repository") or {}).get("full_name")
    if not pr or not repo:
        return None
    api = os.environ.get("GITHUB_API_URL", "https://api.github.com")
    if existing_id:
        return {"method": "PATCH", "url": f"{api}/repos/{repo}/issues/comments/{existing_id}",
                "body": {"body": body}}
    return {"method": "POST", "url": f"{api}/repos/{repo}/issues/{pr}/comments", "body": {"body": body}}


def _existing_comment(event: dict, token: str) -> int | None:
    req = comment_request(event, "", None)
    if req is None:
        return None
    for page in range(1, 11):
        items = _api("GET", f"{req['url']}?per_page=100&page={page}", token) or []
        for c in items:
            if MARKER in (c.get("body") or ""):
                return int(c["id"])
        if len(items) < 100:
            return None
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tracelint.cli.github_review",
                                 description="Lint CI traces for a pull request.")
    ap.add_argument("traces", nargs="+", help="trace files, a folder or a glob (several: one job)")
    ap.add_argument("--fail-on", default=os.environ.get("TRACELINT_FAIL_ON", "warning"),
                    choices=["error", "warning", "info", "never"])
    ap.add_argument("--out", default="tracelint-review", help="folder for SARIF, HTML, comment")
    ap.add_argument("--source-root", action="append", default=None,
                    help="the checked-out repository (default: $GITHUB_WORKSPACE)")
    args = ap.parse_args(argv)
    from ..errors import TracelintError
    roots = args.source_root or [os.environ.get("GITHUB_WORKSPACE") or os.getcwd()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        markdown, sarif, html, code = lint_traces(args.traces, args.fail_on, roots)
    except TracelintError as exc:
        print(f"tracelint: {exc}", file=sys.stderr)
        return 2
    (out / "tracelint.sarif").write_text(json.dumps(sarif, indent=1, ensure_ascii=False))
    (out / "tracelint.html").write_text(html)
    event = _event()
    body = comment_body(markdown, code, args.fail_on, report_url())
    (out / "comment.md").write_text(body)
    dry = os.environ.get("TRACELINT_REVIEW_DRY_RUN")
    token = os.environ.get("GITHUB_TOKEN", "")
    if dry:
        d = Path(dry)
        d.mkdir(parents=True, exist_ok=True)
        (d / "sarif-upload.json").write_text(json.dumps(sarif_upload_payload(sarif, event), indent=1))
        (d / "comment.md").write_text(body)
        (d / "comment-request.json").write_text(json.dumps(comment_request(event, body, None), indent=1))
    elif token and event:
        try:
            req = comment_request(event, body, _existing_comment(event, token))
            if req:
                _api(req["method"], req["url"], token, req["body"])
        except (urllib.error.URLError, OSError, ValueError) as exc:
            print(f"tracelint: could not post the pull-request comment ({exc})", file=sys.stderr)
    print(f"tracelint: {'gate passed' if code == 0 else 'gate failed'} (--fail-on {args.fail_on}); "
          f"SARIF {out / 'tracelint.sarif'}, report {out / 'tracelint.html'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
