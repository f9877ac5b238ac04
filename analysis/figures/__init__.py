"""The papers' figures drawn from the tidy tables: one function per figure, each returning a
matplotlib ``Figure`` (made without pyplot, so nothing global is touched).

``FIGURES`` maps a figure's name to its function and ``INPUTS`` to the tables it takes (by
argument name: ``runs``, ``curves``, ``sharing``, ``echo_speedup``); every function also
takes ``reference`` (``analysis.reference.load_reference``, or None). ``CAPTIONS`` holds one
caption per figure and ``save`` writes a PNG and a PDF.
"""

from __future__ import annotations

import os
from pathlib import Path

from matplotlib.figure import Figure

from analysis._io import atomic_write
from analysis.figures.captions import CAPTIONS
from analysis.figures.echo_factor import fresh_vs_echo_factor, wall_time_vs_echo_factor
from analysis.figures.insertion import fresh_by_echo_point
from analysis.figures.no_harm import no_harm
from analysis.figures.sharing import sharing_cpu, sharing_throughput
from analysis.figures.stall import echo_on_stall
from analysis.figures.sweeps import batch_size, shuffle_buffer

__all__ = [
    "CAPTIONS",
    "FIGURES",
    "INPUTS",
    "STUDIES",
    "batch_size",
    "echo_on_stall",
    "fresh_by_echo_point",
    "fresh_vs_echo_factor",
    "no_harm",
    "save",
    "sharing_cpu",
    "sharing_throughput",
    "shuffle_buffer",
    "wall_time_vs_echo_factor",
]

FIGURES = {
    "fresh_by_echo_point": fresh_by_echo_point,
    "fresh_vs_echo_factor": fresh_vs_echo_factor,
    "wall_time_vs_echo_factor": wall_time_vs_echo_factor,
    "batch_size": batch_size,
    "shuffle_buffer": shuffle_buffer,
    "no_harm": no_harm,
    "sharing_throughput": sharing_throughput,
    "sharing_cpu": sharing_cpu,
    "echo_on_stall": echo_on_stall,
}
"""Figure name -> the function drawing it, in the papers' order."""

INPUTS = {
    "fresh_by_echo_point": ("runs",),
    "fresh_vs_echo_factor": ("runs",),
    "wall_time_vs_echo_factor": ("runs",),
    "batch_size": ("runs",),
    "shuffle_buffer": ("runs",),
    "no_harm": ("runs", "curves"),
    "sharing_throughput": ("sharing",),
    "sharing_cpu": ("sharing",),
    "echo_on_stall": ("echo_speedup",),
}
"""Figure name -> the tables it is drawn from (the function's positional arguments)."""

STUDIES = {
    "fresh_by_echo_point": "insertion",
    "fresh_vs_echo_factor": "echo_factor",
    "wall_time_vs_echo_factor": "wall_time",
    "batch_size": "batch_size",
    "shuffle_buffer": "shuffle_buffer",
    "no_harm": "no_harm",
}
"""Figure name -> the study of run records it draws by default (run-record figures only)."""


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
