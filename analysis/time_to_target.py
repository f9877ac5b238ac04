"""Time to target relative to the no-echo baseline, and its summary over seeds.

The baseline of a configuration is the set of runs in the same study with
``echo_point == "none"`` that share its ``BASELINE_KEY``: the identity fields whose role is
``baseline`` in `run_contract.identity` (workload, scale, batch size, upstream cost, workers,
stop-at-target, consume endpoint) and the target. The echo settings, budget and
hyper-parameters are not in the key: baselines have no echo stage, and an echo configuration
(tuned or not) is compared with the baseline it replaces. A configuration (``CONFIG_KEY``) is
every identity field but the seed and the budget.

Tuned searches (the protocol study): each search is first reduced to its best trial
(`analysis.protocol.best_of_searches`), and the searches then take the place of seeds: a
configuration's median and min-max are over its searches, relative to the median of its
baseline's searches (the data-echoing paper's estimator).

Unreached runs: a run that did not reach the target has no time to target, so its relative
values are NaN. ``summarize`` counts it in ``n_runs`` but not ``n_reached`` and leaves it out
of the medians, minima and maxima; a configuration with ``n_reached == 0``, or whose baseline
never reached the target, has NaN there. Figures show ``n_reached/n_runs`` where they differ;
``unreached_baselines`` says in words which baselines never reached the target (``python -m
analysis summary`` prints it, figures note it).
"""

from __future__ import annotations

import pandas as pd

from analysis._io import require_columns
from analysis.protocol import best_of_searches
from run_contract.identity import identity_columns

__all__ = [
    "BASELINE_KEY",
    "CONFIG_KEY",
    "RELATIVE",
    "baseline_reached",
    "relative_to_baseline",
    "summarize",
    "unreached_baselines",
]

_TARGET = ["target_metric", "target_value", "target_direction"]

BASELINE_KEY = ["study", *identity_columns("baseline"), *_TARGET]
"""Columns a configuration shares with its baseline runs."""

CONFIG_KEY = [
    "study",
    *identity_columns("baseline"),
    *identity_columns("echo"),
    "hparams",
    *_TARGET,
]
"""Columns that identify one configuration (all its seeds) in ``summarize``."""

RELATIVE = {
    "fresh_rel": "fresh_examples_to_target",
    "steps_rel": "steps_to_target",
    "wall_rel": "wall_s_to_target",
}
"""Relative column -> the absolute column it divides by the baseline's median."""

_SUMMARIZED_REACHED = [*RELATIVE, "fresh_examples_to_target", "wall_s_to_target"]
_SUMMARIZED_ALL = ["R", "best_metric"]
_HINT = " (see analysis.records)"


def relative_to_baseline(runs: pd.DataFrame) -> pd.DataFrame:
    """Divide each run's time to target by its baseline's median.

    Args:
        runs: The runs table from ``analysis.records.aggregate``.

    Returns:
        ``runs`` (each tuned search reduced to its best trial) with the columns
        ``fresh_rel``, ``steps_rel`` and ``wall_rel`` (the run's fresh examples, steps and
        wall seconds to target over the median of its baseline's reached runs; NaN if the
        run or every baseline run missed the target), ``baseline_runs`` and
        ``baseline_reached`` (how many baseline runs there are and how many reached the
        target) and ``baseline_R`` (their median measured R).

    Raises:
        ValueError: ``runs`` lacks a needed column.
    """
    needed = [*BASELINE_KEY, *RELATIVE.values(), "echo_point", "reached", "R"]
    require_columns(runs, needed, "runs", hint=_HINT)
    runs = best_of_searches(runs)
    baseline = runs[runs["echo_point"] == "none"]
    grouped = baseline.groupby(BASELINE_KEY, dropna=False)
    stats = grouped.agg(
        baseline_runs=("reached", "size"),
        baseline_reached=("reached", "sum"),
        baseline_R=("R", "median"),
    )
    medians = baseline[baseline["reached"].astype(bool)].groupby(BASELINE_KEY, dropna=False)
    medians = medians[list(RELATIVE.values())].median().add_prefix("median_")
    stats = stats.join(medians).reset_index()
    table = runs.merge(stats, on=BASELINE_KEY, how="left", validate="many_to_one")
    for relative, absolute in RELATIVE.items():
        value = table[absolute].where(table["reached"].astype(bool))
        table[relative] = value / table.pop(f"median_{absolute}")
    for count in ("baseline_runs", "baseline_reached"):
        table[count] = table[count].fillna(0).astype(int)
    return table


def summarize(relative: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration: seeds counted, and median, min and max over them.

    Args:
        relative: The table from ``relative_to_baseline``.

    Returns:
        One row per ``CONFIG_KEY`` with ``n_runs``, ``n_reached``, ``max_fresh``,
        ``baseline_R`` and ``<q>_median``, ``<q>_min``, ``<q>_max`` for ``fresh_rel``,
        ``steps_rel``, ``wall_rel``, ``fresh_examples_to_target`` and ``wall_s_to_target``
        (over reached runs only) and for ``R`` and ``best_metric`` (over all runs).

    Raises:
        ValueError: ``relative`` lacks a needed column.
    """
    needed = [*CONFIG_KEY, *_SUMMARIZED_REACHED, *_SUMMARIZED_ALL, "max_fresh", "baseline_R"]
    require_columns(relative, needed, "relative", hint=_HINT)
    aggregations = {
        "n_runs": ("reached", "size"),
        "n_reached": ("reached", "sum"),
        "max_fresh": ("max_fresh", "max"),
        "baseline_R": ("baseline_R", "first"),
    }
    for quantity in [*_SUMMARIZED_REACHED, *_SUMMARIZED_ALL]:
        for statistic in ("median", "min", "max"):
            aggregations[f"{quantity}_{statistic}"] = (quantity, statistic)
    summary = relative.groupby(CONFIG_KEY, dropna=False).agg(**aggregations).reset_index()
    summary["n_reached"] = summary["n_reached"].astype(int)
    return summary


def baseline_reached(summary: pd.DataFrame) -> pd.Series:
    """How many runs of each configuration's baseline reached the target.

    Args:
        summary: The table from ``summarize`` (baseline rows included).

    Returns:
        A float Series indexed like ``summary``: the ``n_reached`` of the baseline row with
        the same ``BASELINE_KEY`` (a baseline row's own), NaN where ``summary`` has no
        baseline row for it.
    """
    baselines = summary[summary["echo_point"] == "none"]
    reached = baselines.groupby(BASELINE_KEY, dropna=False)["n_reached"].sum()
    keys = pd.MultiIndex.from_frame(summary[BASELINE_KEY])
    return pd.Series(reached.reindex(keys).to_numpy(float), index=summary.index)


def _setting(row: pd.Series) -> str:
    parts = [row["workload"], f"batch size {row['batch_size']}"]
    if row["upstream_latency_ms"] or row["upstream_cpu_ms"]:
        parts.append(
            f"upstream {row['upstream_latency_ms']:g} ms/{row['upstream_latency_per']} + "
            f"{row['upstream_cpu_ms']:g} ms CPU"
        )
    if row["consume"]:
        parts.append(f"consume {row['consume']}")
    return f"{', '.join(parts)} in study {row['study']}"


def unreached_baselines(summary: pd.DataFrame) -> list[str]:
    """One sentence per baseline configuration none of whose runs reached the target.

    Such a baseline has no time to target, so no configuration compared with it has a
    relative value (NaN in ``summarize``): the sentence names the configuration, its target
    and how many echo configurations it leaves without relative values.

    Args:
        summary: The table from ``summarize``.

    Returns:
        ``"baseline never reached the target: cifar10_resnet, batch size 32 in study
        insertion (accuracy >= 0.8 in 0 of 3 runs, up to 4,000 fresh examples); its 3 echo
        configurations have no relative values"``, one per such baseline, in table order.
    """
    reached = baseline_reached(summary)
    sentences = []
    for index, row in summary[(summary["echo_point"] == "none") & (reached == 0)].iterrows():
        same = (summary[BASELINE_KEY] == row[BASELINE_KEY]).all(axis=1)
        echoes = int((same & (summary.index != index)).sum())
        direction = ">=" if row["target_direction"] == "max" else "<="
        sentences.append(
            f"baseline never reached the target: {_setting(row)} ({row['target_metric']} "
            f"{direction} {row['target_value']:g} in 0 of {row['n_runs']} runs, up to "
            f"{row['max_fresh']:,.0f} fresh examples); its {echoes} echo "
            f"configuration{'' if echoes == 1 else 's'} {'has' if echoes == 1 else 'have'} "
            "no relative values"
        )
    return sentences
