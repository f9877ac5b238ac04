"""Draw a benchmark CSV as a figure (PNG or PDF, by the output's suffix).

    python -m benchmarks.plot --in benchmarks/results/echo_speedup.csv --out echo_speedup.png
    python -m benchmarks.plot --in benchmarks/results/shared_loading.csv --out sharing.png

The kind of figure follows from the CSV's columns: ``echo_speedup`` (speedup over e=1 vs R,
one line per mode, with the ideal min(e, R) dashed) or ``shared_loading`` (per-consumer
throughput and CPU per batch vs number of consumers, one line per mode and workload).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

__all__ = ["FIGURES", "echo_speedup", "main", "shared_loading"]


def echo_speedup(table: pd.DataFrame, out: Path) -> None:
    """Draw `benchmarks.echo_speedup`'s table: steps/s relative to e = 1 against the measured
    R, one line per mode and factor, each with its ideal min(e, R) dashed.

    Args:
        table: The benchmark's CSV, read.
        out: The figure file; its suffix (``.png``, ``.pdf``) chooses the format.
    """
    figure, axis = plt.subplots(figsize=(6, 4))
    for (mode, factor), rows in table.groupby(["mode", "factor"]):
        rows = rows.sort_values("measured_R")
        label = f"EchoOnStall (max {factor:g})" if mode == "echo_on_stall" else f"e = {factor:g}"
        line = axis.plot(rows["measured_R"], rows["speedup_vs_e1"], marker="o", label=label)[0]
        axis.plot(
            rows["measured_R"], rows["ideal_speedup"], linestyle="--", color=line.get_color(),
            alpha=0.5,
        )  # fmt: skip
    axis.set(xlabel="R = upstream / downstream time per batch", ylabel="steps/s relative to e = 1")
    axis.set_xscale("log", base=2)
    axis.set_title("Batch echoing when input-bound (dashed: ideal min(e, R))")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out)


def shared_loading(table: pd.DataFrame, out: Path) -> None:
    """Draw `benchmarks.sharing`'s table: batches/s per consumer and CPU ms per batch received
    against the number of consumers N, one line per mode and workload, under the machine's
    own /dev/shm (rows with ``shm_mb`` 0; the table holds the rows of a smaller one too).

    Args:
        table: The benchmark's CSV, read.
        out: The figure file; its suffix (``.png``, ``.pdf``) chooses the format.
    """
    if "shm_mb" in table:
        table = table[table["shm_mb"] == 0]
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    modes = sorted(table["mode"].unique())
    styles = dict(zip(sorted(table["workload"].unique()), ["-", "--", ":", "-."], strict=False))
    for (workload, mode), rows in table.groupby(["workload", "mode"]):
        rows = rows.sort_values("consumers")
        style = {
            "color": f"C{modes.index(mode)}",
            "linestyle": styles[workload],
            "marker": "o",
            "label": f"{workload}: {mode}",
        }
        axes[0].plot(rows["consumers"], rows["per_consumer_batches_per_s"], **style)
        axes[1].plot(rows["consumers"], rows["cpu_ms_per_batch_received"], **style)
    ticks = sorted(table["consumers"].unique())
    axes[0].set(xlabel="consumers N", ylabel="batches/s per consumer", yscale="log", xticks=ticks)
    axes[1].set(
        xlabel="consumers N", ylabel="CPU ms per batch received", yscale="log", xticks=ticks
    )
    axes[0].set_title("Throughput per training process")
    axes[1].set_title("CPU cost per delivered batch")
    axes[1].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out)


FIGURES = {"echo_on_stall": echo_speedup, "per_consumer_batches_per_s": shared_loading}
"""A column, or a ``mode``, that only one benchmark's CSV holds -> the function drawing it."""


def main(argv: list[str] | None = None) -> None:
    """Command line: draw ``--in`` into ``--out`` with the function its columns call for
    (`FIGURES`).

    Args:
        argv: Command-line arguments (``--help`` lists them). Default None: ``sys.argv[1:]``.

    Raises:
        SystemExit: The CSV is none that `FIGURES` knows (exit status 2).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in", dest="source", required=True, help="benchmark CSV")
    parser.add_argument("--out", required=True, help="figure file (.png or .pdf)")
    args = parser.parse_args(argv)
    table = pd.read_csv(args.source)
    columns = set(table.columns) | set(table.get("mode", []))
    for marker, draw in FIGURES.items():
        if marker in columns:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            draw(table, Path(args.out))
            print(f"wrote {args.out}")
            return
    parser.error(f"{args.source} is not a CSV this script knows how to draw")


if __name__ == "__main__":
    main()
