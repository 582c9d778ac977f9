#!/usr/bin/env bash
# Set up a fresh machine and run the test suite. Used by the README and by .ci/run.
# - a virtual environment in .venv with tracelint and its test extras (torch pinned to the
#   CPU build 2.13.0; an unpinned torch would pull a multi-GB CUDA build)
# - Debian's chromium for the HTML report's real-browser test (skipped if it cannot be installed)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: could not install chromium; browser tests will be skipped" >&2
fi
# Debian's non-free nsight-systems (2022.4) for the .nsys-rep end-to-end test: `nsys export`
# runs without a GPU. Needs the contrib and non-free components (libcuda1 <- nvidia-support).
if ! command -v nsys >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
    && [ -f /etc/apt/sources.list.d/debian.sources ]; then
  nonfree=/etc/apt/sources.list.d/tracelint-nonfree.sources
  [ -f "$nonfree" ] || sed 's/^Components:.*/Components: contrib non-free/' \
    /etc/apt/sources.list.d/debian.sources > "$nonfree"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
     --no-install-recommends nsight-systems >/dev/null) \
    || echo "WARNING: could not install nsight-systems; the .nsys-rep end-to-end test will NOT run" >&2
fi
command -v nsys >/dev/null 2>&1 \
  || echo "WARNING: nsys not on PATH: tests/test_nsys_rep.py is skipped (.nsys-rep not checked end to end)" >&2
exec .venv/bin/python -m pytest -q "$@"
