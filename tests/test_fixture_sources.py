"""Every real trace bundled in fixtures/real has its source and licence recorded beside it
(fixtures/real/<folder>/SOURCES.md), under a licence that allows redistribution."""
from __future__ import annotations

import re

import pytest

from conftest import REPO

REAL = REPO / "fixtures" / "real"
REDISTRIBUTABLE = ("MIT", "BSD-3-Clause", "project's own")


@pytest.mark.parametrize("folder", ["nsys", "torch"])
def test_every_bundled_file_has_its_source_and_licence_beside_it(folder):
    here = REAL / folder
    rows = {}
    for line in (here / "SOURCES.md").read_text().splitlines():
        m = re.match(r"\| `([^`]+)` \| (.+?) \| (.+?) \|$", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    files = {p.name for p in here.iterdir() if p.name not in ("SOURCES.md", "PROVENANCE.md")}
    assert files and files == set(rows), files ^ set(rows)
    for name, (source, licence) in rows.items():
        assert len(source) > 20, name
        assert licence.startswith(REDISTRIBUTABLE), (name, licence)
