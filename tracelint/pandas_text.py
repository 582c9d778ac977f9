"""pandas keeps text in Python objects inside tracelint's own calls, whatever is installed.

Why: pandas 3 stores text in pyarrow when pyarrow is installed. tracelint's tables hold names
as categoricals, and the rules read their labels as text (`astype(str)`): with pyarrow each
such read copies every label into an arrow buffer and back out to Python objects. Measured on
the 287 MB reference trace, `tracelint.lint` from a program that has pyarrow: peak 364 MiB and
3.4 s of CPU, against 291 MiB and 2.9 s inside this context (258 MiB and 2.9 s without pyarrow
at all), the same findings. The option is set for the call only: a user's own frames keep
pandas' choice. The tracelint command goes further and keeps pyarrow out (cli.no_pyarrow).
"""
from __future__ import annotations

from contextlib import AbstractContextManager


def python_text() -> AbstractContextManager:
    """A context in which pandas stores new text columns as Python objects."""
    import pandas as pd
    return pd.option_context("mode.string_storage", "python")
