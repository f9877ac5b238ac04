"""A copy of the checkout for tests that run the workflow on it (snakemake writes beside its
Snakefile), so that the tests leave the checkout itself untouched."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def project_copy(root: Path) -> Path:
    """The project's files (tracked and untracked, not ignored) copied under ``root``, their
    modification times kept."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, root / name)
    return root
