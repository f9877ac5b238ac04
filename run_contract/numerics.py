"""How a run's floating point is computed: the numerics mode, set before torch does any work.

The same seed gives the same bits on one CPU type, but not across types: torch's CPU kernels
pick their code path from the CPU, and each path sums in its own order. Four libraries choose:

==============  ===========================  ===========================================
library         what it chooses              pinned by (``portable``)
==============  ===========================  ===========================================
ATen            vectorised kernels           ``ATEN_CPU_CAPABILITY=avx2``
oneDNN          convolutions                 ``ONEDNN_MAX_CPU_ISA=AVX2``
MKL             matrix products              ``MKL_CBWR=COMPATIBLE,STRICT``
numpy/OpenBLAS  numpy's SIMD loops, BLAS     ``NPY_DISABLE_CPU_FEATURES``, ``OPENBLAS_CORETYPE``
==============  ===========================  ===========================================

MKL honours a code branch such as ``AVX2`` on Intel CPUs only (elsewhere it falls back to its
automatic choice), so ``COMPATIBLE``, the branch MKL runs alike on every x86-64 CPU, is the
portable one; ``STRICT`` drops its requirement that arrays be aligned.

Modes (`MODES`), chosen by the environment variable ``ECHO_NUMERICS``:

* ``portable`` (the default): every path above pinned to one that any x86-64 CPU with AVX2
  has, so a run is meant to give the same bits on any such CPU (Intel with AVX-512 included).
* ``native``: nothing pinned; each library takes the fastest path of the CPU. The same bits on
  the same CPU type only. Records written before the mode existed carry no stamp and are
  reported as ``unpinned``; they behave as ``native``.

The pins are environment variables because each library reads its own once, on first use, in
this process and in every process it starts (DataLoader workers included). `apply` sets them
and runs when the ``experiments`` package is imported, which every training process does
before any tensor work. `check` then asks the libraries what they actually chose (ATen's
capability; MKL's and oneDNN's verbose output) and refuses a run whose libraries chose
otherwise, e.g. because torch computed something before ``experiments`` was imported.
`stamp` is what a run record says about its numerics.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Mapping
from functools import cache
from typing import Any

__all__ = [
    "ENV",
    "MODES",
    "UNPINNED",
    "NumericsError",
    "apply",
    "check",
    "mode",
    "observed",
    "record_mode",
    "record_numerics",
    "stamp",
]

ENV = "ECHO_NUMERICS"
"""The environment variable naming the mode; unset means ``portable``."""

_NUMPY_WIDE = (
    "X86_V4 AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL "
    "AVX512_ICL AVX512_SPR"
)
"""numpy's dispatch targets above AVX2, by the names of numpy 1.x and 2.x (unknown names are
ignored, and so are targets the CPU lacks)."""

MODES: dict[str, dict[str, str]] = {
    "portable": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "MKL_CBWR": "COMPATIBLE,STRICT",
        "NPY_DISABLE_CPU_FEATURES": _NUMPY_WIDE,
        "OPENBLAS_CORETYPE": "Haswell",
    },
    "native": {},
}
"""Mode -> the environment it pins. The first is the default."""

UNPINNED = "unpinned"
"""What `record_mode` calls a record without a numerics stamp."""

_EXPECTED = {"portable": {"aten": "AVX2", "mkl": "COMPATIBLE,STRICT", "onednn": "Intel AVX2"}}
"""What `observed` must report in a mode (absent: anything)."""


class NumericsError(RuntimeError):
    """The numerics mode asked for is not the one in effect, or is not a mode."""


def mode() -> str:
    """The mode this process asks for: ``ECHO_NUMERICS``, or ``portable`` when unset.

    Raises:
        NumericsError: ``ECHO_NUMERICS`` names no mode; the message lists the valid ones.
    """
    name = os.environ.get(ENV) or next(iter(MODES))
    if name not in MODES:
        raise NumericsError(f"{ENV}={name!r} is not a numerics mode; use one of {', '.join(MODES)}")
    return name


def apply() -> str:
    """Set the environment of this process's mode (`mode`), overriding any value there.

    Call it before torch does any tensor work; importing ``experiments`` calls it.

    Returns:
        The mode applied.
    """
    name = mode()
    os.environ.update(MODES[name])
    return name


def _level(*names: str) -> int:
    """The verbose level the environment asks a library for (0: none)."""
    for name in names:
        with contextlib.suppress(KeyError, ValueError):
            return int(os.environ[name])
    return 0


@cache
def _verbose_output() -> str:
    """What MKL and oneDNN print (on file descriptor 1) for one matrix product and one
    convolution of the sizes torch hands them."""
    import torch

    with tempfile.TemporaryFile() as capture:
        saved = os.dup(1)
        try:
            os.dup2(capture.fileno(), 1)
            with torch.backends.mkl.verbose(1), torch.backends.mkldnn.verbose(1):
                torch.ones(64, 64) @ torch.ones(64, 64)
                torch.nn.functional.conv2d(torch.ones(32, 8, 8, 8), torch.ones(8, 8, 3, 3))
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            # leaving the contexts turned verbose output off: back to what the user asked for
            torch._C._verbose.mkl_set_verbose(_level("MKL_VERBOSE"))
            torch._C._verbose.mkldnn_set_verbose(_level("ONEDNN_VERBOSE", "DNNL_VERBOSE"))
        capture.seek(0)
        return capture.read().decode(errors="replace")


@cache
def observed() -> dict[str, str | None]:
    """The code paths this process's libraries chose, as they report them.

    Returns:
        ``aten``: torch's CPU capability (e.g. ``"AVX2"``, ``"AVX512"``); ``mkl``: MKL's
        conditional-reproducibility branch (e.g. ``"OFF"``, ``"COMPATIBLE,STRICT"``);
        ``onednn``: the instruction set oneDNN runs (e.g. ``"Intel AVX2"``). None where a
        library said nothing (e.g. a torch built without it).
    """
    import torch

    text = _verbose_output()
    mkl = re.search(r"CNR:(\S+)", text)
    isa = re.search(r"isa:([^,\n]+)", text)
    return {
        "aten": torch.backends.cpu.get_cpu_capability(),
        "mkl": mkl and mkl.group(1),
        "onednn": isa and isa.group(1).strip(),
    }


def check() -> None:
    """Refuse to go on when the libraries chose other code paths than this mode pins.

    Raises:
        NumericsError: Names each library, what it chose and what the mode needs, and why
            that happens (tensor work before ``experiments`` was imported).
    """
    name = mode()
    seen = observed()
    wrong = [
        f"{library} runs {seen[library]!r}, the mode needs {wanted!r}"
        for library, wanted in _EXPECTED.get(name, {}).items()
        if seen[library] != wanted
    ]
    if wrong:
        raise NumericsError(
            f"numerics mode {name!r} is not in effect: {'; '.join(wrong)}. Each library fixes "
            "its code path on first use, so import experiments (or set "
            f"{', '.join(f'{k}={v}' for k, v in MODES[name].items())} in the environment) "
            "before torch does any work"
        )


def _versions() -> dict[str, str | None]:
    import numpy
    import torch

    text = _verbose_output()
    mkl = re.search(r"MKL_VERBOSE (?:oneMKL|Intel\(R\) MKL) (\d[\w.]*(?: Update \d+)?)", text)
    onednn = re.search(r"oneDNN v(\S+)", text)
    return {
        "torch": torch.__version__,
        "mkl": mkl and mkl.group(1),
        "onednn": onednn and onednn.group(1),
        "numpy": numpy.__version__,
    }


def stamp() -> dict[str, Any]:
    """What a run record says about its numerics (its ``numerics`` field).

    Returns:
        ``mode``; ``pins``: the environment the mode pins; ``observed``: what the libraries
        chose (`observed`); ``versions``: torch, MKL, oneDNN and numpy; ``threads``: torch's
        intra-op threads at the time of the call.
    """
    import torch

    return {
        "mode": mode(),
        "pins": dict(MODES[mode()]),
        "observed": observed(),
        "versions": _versions(),
        "threads": torch.get_num_threads(),
    }


def record_mode(record: Mapping[str, Any]) -> str:
    """A record's numerics mode: its stamp's ``mode``, or `UNPINNED` for a record without one."""
    numerics = record.get("numerics")
    return numerics["mode"] if numerics else UNPINNED


def record_numerics(record: Mapping[str, Any]) -> str:
    """What a record's numerics were, as one comparable string: `UNPINNED`, or the mode with
    the library versions its bits depend on, e.g. ``"portable (torch 2.14.1, MKL 2024.0
    Update 2, oneDNN 3.12.0)"``. Records with different strings are not to be pooled."""
    numerics = record.get("numerics")
    if not numerics:
        return UNPINNED
    versions = numerics["versions"]
    return (
        f"{numerics['mode']} (torch {versions['torch']}, MKL {versions['mkl']}, "
        f"oneDNN {versions['onednn']})"
    )
