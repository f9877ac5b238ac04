"""The papers' figures drawn from the tidy tables, one module per figure named after it
(``fresh_by_echo_point.py`` draws ``fresh_by_echo_point``), each returning a matplotlib
``Figure`` (made without pyplot, so nothing global is touched).

A module registers its figure with ``@figure(name, inputs=..., caption=..., study=...)``
(`analysis.figures._registry`); `names` lists the registered figures (discovering the
modules of this package) and `get` gives one as a `FigureSpec`: ``get(name).draw(*tables,
reference=None, **options)``, its ``inputs`` (keys of ``TABLES``), ``study`` and
``caption``. ``save`` writes a PNG and a PDF. Adding a figure is one new module here; the
command line, the reference table, the workflow and the report read the registry.
"""

from __future__ import annotations

import os
from pathlib import Path

from matplotlib.figure import Figure

from analysis._io import atomic_write
from analysis.figures._registry import TABLES, FigureSpec, discover, figure, get, names
from analysis.figures._sheet import Sheet

__all__ = ["TABLES", "FigureSpec", "Sheet", "discover", "figure", "get", "names", "save"]


def save(figure: Figure, png_path: str | os.PathLike[str], *, dpi: int = 150) -> tuple[Path, Path]:
    """Write ``figure`` as a PNG and as a PDF with the same stem, each atomically.

    Args:
        figure: The figure.
        png_path: The PNG file; the PDF goes next to it (``x.png`` -> ``x.pdf``).
        dpi: Resolution of the PNG. Default 150.

    Returns:
        The PNG and PDF paths.

    Raises:
        ValueError: ``png_path`` does not end in ``.png``.
    """
    png = Path(png_path)
    if png.suffix.lower() != ".png":
        raise ValueError(f"png_path must end in .png, got {str(png_path)!r}")
    # No creation date in the PDF: the same tables redraw byte-identical files.
    outputs = ((png, "png", None), (png.with_suffix(".pdf"), "pdf", {"CreationDate": None}))
    for path, kind, metadata in outputs:
        atomic_write(
            path,
            lambda temporary, kind=kind, metadata=metadata: figure.savefig(
                temporary, format=kind, dpi=dpi, metadata=metadata
            ),
        )
    return png, png.with_suffix(".pdf")
