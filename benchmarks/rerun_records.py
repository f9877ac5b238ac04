"""Train committed run records again and say what changed: same-seed reproducibility.

    python -m benchmarks.rerun_records \\
        results/records/cifar10_resnet/cpu-none-e1-sb0-bsdefault-seed0.json ... \\
        --out benchmarks/results/rerun_records.csv

Each record's run is rebuilt from its path (the config's plan, `experiments.study`), trained
again in this process's machine (one thread, CPU) and compared with the committed record:
fresh examples and steps to target, the eval curve (the first evaluation whose metric
differs, the largest difference) and the loss before training, which shows whether the
difference starts at initialisation. The records name the CPU they were trained on
(``machine``; older records lack it); floating point differs between CPU types, so the same
seed gives identical records on one machine type, not across types.

With ``--trained-in DIR`` nothing is trained: each record is compared with its namesake that
a whole workflow run trained into another out_dir (``DIR/<workload>/<file>``), e.g. after
``snakemake --cores 2 --config out_dir=results/again``, ``--trained-in
results/again/records``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.common import print_table, write_csv
from experiments.harness import RunConfig, run
from experiments.identity import RunOptions
from experiments.record import machine
from experiments.study import load_config, plan

__all__ = ["compare", "main"]


def _first_loss(record: dict[str, Any]) -> float | None:
    metrics = record["eval_curve"][0]["metrics"]
    return metrics.get("loss", metrics.get("cross_entropy"))


def compare(old: dict[str, Any], new: dict[str, Any], name: str) -> dict[str, Any]:
    """What differs between a committed record (file ``name``) and its rerun, timing aside."""
    curve_old, curve_new = old["eval_curve"], new["eval_curve"]
    pairs = list(zip(curve_old, curve_new, strict=False))
    differing = [i for i, (a, b) in enumerate(pairs) if a["metric"] != b["metric"]]
    was = (old.get("machine") or {}).get("cpu_model") or "not recorded"
    return {
        "record": f"{old['workload']}/{name}",
        "trained_on": was,
        "rerun_on": (new.get("machine") or machine())["cpu_model"],
        "identical": not differing and len(curve_old) == len(curve_new),
        "fresh_to_target_was": old["fresh_examples_to_target"],
        "fresh_to_target_now": new["fresh_examples_to_target"],
        "first_differing_eval": differing[0] if differing else "",
        "largest_metric_difference": max(
            (abs(a["metric"] - b["metric"]) for a, b in pairs), default=0.0
        ),
        "initial_loss_difference": abs((_first_loss(old) or 0.0) - (_first_loss(new) or 0.0)),
    }


def main(argv: list[str] | None = None) -> None:
    """Rerun the given records and write the comparison CSV."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rerun_records", description=__doc__)
    parser.add_argument("records", nargs="+", help="committed record files of the config's study")
    parser.add_argument("--configfile", nargs="+", default=["config/config.yaml"])
    parser.add_argument("--out", required=True, help="CSV to write")
    parser.add_argument(
        "--trained-in",
        metavar="DIR",
        help="a records folder the workflow trained again (out_dir/records): compare with "
        "its records instead of training",
    )
    args = parser.parse_args(argv)
    runs = plan(load_config(*args.configfile)).runs
    rows = []
    for path in args.records:
        if path not in runs:
            parser.error(f"{path} is not a record of {' '.join(args.configfile)}")
        planned = runs[path]
        if args.trained_in:
            again = Path(args.trained_in) / planned.spec.workload / Path(path).name
            if not again.is_file():
                parser.error(f"{again} does not exist (--trained-in {args.trained_in})")
            new = json.loads(again.read_text())
        else:
            options = RunOptions(device="cpu", threads=1, data_dir=planned.options.data_dir)
            new = run(RunConfig(planned.spec, options), progress=False)
        rows.append(compare(json.loads(Path(path).read_text()), new, Path(path).name))
    write_csv(rows, args.out)
    print_table(rows, ["record", "identical", "fresh_to_target_was", "fresh_to_target_now",
                       "first_differing_eval", "initial_loss_difference"])  # fmt: skip


if __name__ == "__main__":
    main()
