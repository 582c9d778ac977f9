"""pandas without pyarrow for the tracelint command.

Why: pandas 3 imports pyarrow, when it is installed, the moment pandas itself is imported, and
then stores text columns in it. tracelint uses neither: its tables hold names as integer codes.
The import alone added 40 MiB to every lint's peak (the 287 MB reference trace: 253 against
213 MiB, over the 0.8x-the-file target) and 0.05 s of CPU to every start, and a machine with
pyarrow (many ML environments have it) would run a text path the test suite never takes. So
the command's entry point marks pyarrow as absent before anything imports pandas, unless
something imported it already. pandas then keeps text in Python objects, as it does without
pyarrow. Reports were compared both ways on every shared trace before this was done
(bench/golden_reports.py --base-path): identical. Only the command's own process is changed:
`import tracelint` in a user's program leaves pyarrow alone, and so does `capture` for the
program it profiles (a process of its own).
"""
from __future__ import annotations

import sys

MODULE = "pyarrow"


def keep_out() -> None:
    """Make `import pyarrow` fail (ImportError, which pandas expects) in this process."""
    sys.modules.setdefault(MODULE, None)
