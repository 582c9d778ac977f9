"""The HTML report in a real headless Chromium: no errors, no network, text stays text.

Needs the Debian `chromium` package (/usr/bin/chromium) and the `playwright` Python package;
never `playwright install` (no browser downloads). Skips, saying which is missing, otherwise.
The screenshot lands in test-artifacts/report.png for a human to look at.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from test_reporters import EVIL, make_report

CHROMIUM = os.environ.get("TRACELINT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.browser


def _browser_or_skip():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright not installed (pip install playwright; no browser download needed)")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not found at {CHROMIUM} (apt-get install -y chromium)")
    return sync_playwright


def test_html_report_in_chromium(tmp_path):
    sync_playwright = _browser_or_skip()
    report = make_report(n_findings=230)           # > 200: cards plus the compact table
    html_path = tmp_path / "report.html"
    from tracelint.reporters.html import render_html
    html_path.write_text(render_html(report), encoding="utf-8")
    ARTIFACTS.mkdir(exist_ok=True)

    requests, errors, dialogs = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

            def record(route):
                requests.append(route.request.url)
                if route.request.url.startswith("file://") and route.request.url.endswith(
                        "report.html"):
                    return route.continue_()
                return route.abort()

            page.route("**/*", record)
            page.goto(html_path.as_uri())
            page.wait_for_load_state("load")

            cards = page.locator("article.card")
            assert cards.count() == 200
            assert cards.first.is_visible()
            assert page.locator("#finding-1").is_visible()
            assert page.locator("tr#finding-230").count() == 1
            # The evil kernel name is on the page as text, not as an element.
            assert EVIL in page.locator("#finding-1").inner_text()
            assert page.locator("main script").count() == 0
            assert page.locator("svg.strip").count() == 2
            assert page.locator("svg.plot").count() == 4
            page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=False)
            page.locator("#finding-1").screenshot(path=str(ARTIFACTS / "report-card.png"))
            page.locator(".plots").screenshot(path=str(ARTIFACTS / "report-plots.png"))
        finally:
            browser.close()

    assert not dialogs, f"a script ran: {dialogs}"
    assert not errors, errors
    others = [u for u in requests if not u.startswith("file://")]
    assert others == [], f"network requests: {others}"
    assert len(requests) == 1, requests         # the page itself, nothing else
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000
