"""Secrets and personal data in traces: detection (TL100 / TL101), redaction of trace files
(`tracelint redact`), and scrubbing of everything tracelint writes.

    from tracelint.secrets import scan_file, redact_file, scrub_text, scrub_report

    scan_file("trace.sqlite").secrets      # [Hit(location, kind, preview=masked), ...]
    redact_file("trace.sqlite", "trace.redacted.sqlite", paths=True)
    scrub_report(report)                   # before rendering a report that may be shared

The heuristics are documented in `tracelint.secrets.patterns`.
"""
from __future__ import annotations

from .patterns import KIND_LABELS, REDACTED, mask
from .redact import RedactResult, check_file, redact_file
from .report_scrub import scrub_report, scrub_text
from .scan import Hit, ScanResult, scan_file

__all__ = ["Hit", "KIND_LABELS", "REDACTED", "RedactResult", "ScanResult", "check_file",
           "mask", "redact_file", "scan_file", "scrub_report", "scrub_text"]
