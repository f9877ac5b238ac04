"""Skips for tests whose data source is not installed. Each reason starts with `DATA_MISSING`,
so the test summary (tests/conftest.py) and scripts/test.sh can say how many were skipped."""

from __future__ import annotations

import pytest

from experiments.data.fashion_mnist import DEBIAN_DIR, INSTALL

DATA_MISSING = "data missing:"
"""The start of every data-missing skip reason."""

needs_fashion_mnist = pytest.mark.skipif(
    not (DEBIAN_DIR / "t10k-labels-idx1-ubyte.gz").is_file(),
    reason=f"{DATA_MISSING} Fashion-MNIST is not installed ({INSTALL}, or scripts/setup.sh)",
)


def skip_data_missing(what: str) -> None:
    """Skip the running test because ``what`` (a data source) could not be had."""
    pytest.skip(f"{DATA_MISSING} {what}")
