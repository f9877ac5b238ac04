"""Where the echo-factor curve turns, and what at this scale bears on where it turns.

The paper finds echoing's gains peak at a moderate factor (4 or 8). Per workload and echo
point of the echo-factor study, `factor_table` gives, per echo factor ``e`` (the baseline as
``e = 1``):

* ``n``, ``reached``: the complete searches (each reduced to its best trial), or the seeds of
  a study that does not tune, and how many reached the target;
* ``fresh_median``: the median of the searches' fewest fresh examples to target (a search that
  missed counting as worst); ``fresh_rel``: over the baseline's;
* ``steps_rel``: the same median of steps to target, over the baseline's (1: each repeat of
  an example is worth as much as a fresh one; e: repeats are worth nothing);
* ``repeat_worth``: ``(1 / fresh_rel - 1) / (e - 1)``, the fresh examples one repeat is worth
  if every repeat is worth the same: 1 is the ideal, 0 worthless.

`turns` states, per workload and point, where the medians turn. Rule: the factor ``e*`` of
the lowest median (the smaller on a tie); "still falling" when ``e*`` is the largest factor
tried; "flat" when the largest factor's median is within the crossing's resolution of
``e*``'s; else "turns after e*", with how many more fresh examples the next larger factor and
the largest need.

`distinct_views` measures what repeats before augmentation give a model: among ``e``
augmentations of one training example, how many distinct ones it sees, with the workload's own
``augment``; and `views_table` puts that beside how much of the training set the baseline
reads before it reaches the target.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from analysis._io import markdown_table
from analysis.claims.study import Plan, StudyRuns
from analysis.protocol import crossing_step

__all__ = [
    "FACTOR_COLUMNS",
    "TURN_COLUMNS",
    "distinct_views",
    "factor_table",
    "report",
    "turns",
    "views_table",
]

STUDY = "echo_factor"

FACTOR_COLUMNS = [
    "workload", "echo_point", "echo_factor", "n", "reached", "fresh_median", "fresh_rel",
    "steps_rel", "repeat_worth",
]  # fmt: skip
"""Columns of `factor_table`."""

TURN_COLUMNS = ["workload", "echo_point", "lowest_at", "largest", "step", "turn"]
"""Columns of `turns`."""


def _medians(study: StudyRuns, rows: pd.DataFrame) -> tuple[float, float]:
    fresh = float(study.values(rows).median())
    steps = float(study.values(rows, "steps_to_target").median())
    return fresh, steps


def factor_table(runs: pd.DataFrame, plan: Plan | None = None) -> pd.DataFrame:
    """One row per workload, echo point and echo factor of the echo-factor study, the
    baseline first as ``e = 1`` of every point: `FACTOR_COLUMNS` (module doc).

    Args:
        runs: The runs table (`analysis.records`).
        plan: What the config plans (`analysis.claims.study.Plan`): a search still short of
            its planned trials is left out. Default None: the records' own searches.

    Returns:
        The table; empty when no workload of the study has a baseline.
    """
    study = StudyRuns(runs, STUDY, plan)
    out = []
    for workload in study.workloads():
        base = study.baseline(workload)
        if not len(base):
            continue
        base_fresh, base_steps = _medians(study, base)
        points = sorted(set(study.select(workload)["echo_point"]) - {"none"})
        for point in points:
            rows = study.select(workload, echo_point=point)
            groups = [(1.0, base)] + [
                (float(e), rows[rows["echo_factor"] == e])
                for e in sorted(rows["echo_factor"].unique())
            ]
            for factor, chosen in groups:
                fresh, steps = _medians(study, chosen)
                with np.errstate(divide="ignore", invalid="ignore"):
                    rel = fresh / base_fresh
                    worth = (1 / rel - 1) / (factor - 1) if factor > 1 else math.nan
                out.append({
                    "workload": workload, "echo_point": point, "echo_factor": factor,
                    "n": len(chosen), "reached": int(chosen["reached"].astype(bool).sum()),
                    "fresh_median": fresh, "fresh_rel": rel, "steps_rel": steps / base_steps,
                    "repeat_worth": worth,
                })  # fmt: skip
    table = pd.DataFrame(out, columns=FACTOR_COLUMNS)
    return table.replace([math.inf, -math.inf], math.nan) if len(table) else table


def turns(table: pd.DataFrame, steps: dict[str, float]) -> pd.DataFrame:
    """Where each curve of `factor_table` turns, by the module's rule: `TURN_COLUMNS`.

    Args:
        table: `factor_table`'s rows.
        steps: Workload -> fresh examples between two located crossings (the resolution).
    """
    out = []
    for (workload, point), rows in table.groupby(["workload", "echo_point"], sort=True):
        rows = rows.sort_values("echo_factor")
        fresh = rows.set_index("echo_factor")["fresh_median"].fillna(math.inf)
        lowest, largest, step = float(fresh.idxmin()), float(fresh.index.max()), steps[workload]
        if math.isinf(fresh[lowest]):
            turn = "no factor's median reached the target"
        elif lowest == largest:
            turn = f"still falling at e = {largest:g}, the largest tried"
        elif fresh[largest] - fresh[lowest] <= step:
            turn = f"flat from e = {lowest:g}: e = {largest:g} within one step of it"
        else:
            after = float(fresh.index[fresh.index > lowest].min())
            more = ", ".join(
                f"e = {e:g} {_more(fresh[e], fresh[lowest])}" for e in sorted({after, largest})
            )
            turn = f"turns after e = {lowest:g}: {more}"
        out.append({
            "workload": workload, "echo_point": point, "lowest_at": lowest, "largest": largest,
            "step": step, "turn": turn,
        })  # fmt: skip
    return pd.DataFrame(out, columns=TURN_COLUMNS)


def _more(value: float, lowest: float) -> str:
    if math.isinf(value):
        return "misses the target (median)"
    return f"needs {value / lowest - 1:+.0%} fresh examples"


def _fingerprint(value: Any, digest: Any) -> None:
    """Feed ``value``'s content (arrays, tensors, images, nested sequences and mappings,
    scalars) into ``digest``."""
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        digest.update(repr((value.shape, value.dtype.str)).encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    elif hasattr(value, "tobytes") and hasattr(value, "mode"):  # a PIL image
        digest.update(repr((value.mode, value.size)).encode())
        digest.update(value.tobytes())
    elif isinstance(value, dict):
        for key in sorted(value, key=repr):
            digest.update(repr(key).encode())
            _fingerprint(value[key], digest)
    elif isinstance(value, (list, tuple)):
        digest.update(f"{type(value).__name__}{len(value)}".encode())
        for item in value:
            _fingerprint(item, digest)
    elif hasattr(value, "__dict__"):  # a dataclass or plain object (a detection scene)
        _fingerprint(vars(value), digest)
    else:
        digest.update(repr(value).encode())


def _view(example: Any) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    _fingerprint(example, digest)
    return digest.digest()


def distinct_views(
    workload: Any, factors: Iterable[int], examples: int = 200, seed: int = 0
) -> dict[int, float]:
    """Per factor ``e``: the mean number of distinct augmented copies among ``e``
    augmentations of one training example (what echoing before augmentation shows a model for
    one fresh example), measured with the workload's own ``augment``.

    Args:
        workload: A `experiments.workload.Workload` instance (its ``read("train")`` and
            ``augment``).
        factors: The echo factors.
        examples: Training examples drawn (without replacement). Default 200.
        seed: Seed of the draw and of the augmentations. Default 0.

    Returns:
        Factor -> mean distinct views (1 for a workload without augmentation).
    """
    train = workload.read("train")
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(train), size=min(examples, len(train)), replace=False)
    chosen = [train[int(i)] for i in picks]
    means = {}
    for e in factors:
        counts = [len({_view(workload.augment(x, rng)) for _ in range(int(e))}) for x in chosen]
        means[int(e)] = float(np.mean(counts))
    return means


def views_table(
    table: pd.DataFrame,
    scale: str = "cpu",
    examples: int = 200,
    seed: int = 0,
    data_dirs: Mapping[str, str | None] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """Per workload with an echo point before augmentation in ``table``: its training examples,
    the baseline's median fresh examples to target as passes over them, and per factor the
    distinct views among its repeats (`distinct_views`), as ``views e=K`` columns
    (``distinct / e``: 1 when every repeat is a new view).

    Args:
        table: `factor_table`'s rows.
        scale: The workloads' scale. Default "cpu".
        examples: Passed to `distinct_views`. Default 200.
        seed: Passed to `distinct_views`. Default 0.
        data_dirs: Workload -> its data folder (a config's ``workloads.NAME.data_dir``).
            Default None: each workload's default (the cache, at cpu scale).

    Returns:
        The table, and one line per workload left out because its data is not here.
    """
    from experiments.data import MissingDataError
    from experiments.registry import discover, get

    discover()
    before = table[table["echo_point"] == "before_augment"]
    out, missing = [], []
    for workload, rows in before.groupby("workload", sort=True):
        data_dir = (data_dirs or {}).get(workload)
        if scale == "paper" and not data_dir:  # as experiments.run refuses it
            missing.append(f"{workload}: no views, no data_dir is given at paper scale")
            continue
        instance = get(workload)(scale=scale, data_dir=data_dir)
        factors = sorted(int(e) for e in rows["echo_factor"] if e > 1)
        try:
            views = distinct_views(instance, factors, examples, seed)
        except MissingDataError as error:
            missing.append(f"{workload}: no views, its data is not here ({error})")
            continue
        base = float(rows.loc[rows["echo_factor"] == 1.0, "fresh_median"].iloc[0])
        size = len(instance.read("train"))
        row = {"workload": workload, "train_examples": float(size), "baseline_passes": base / size}
        row.update({f"views e={e}": f"{views[e]:.1f} ({views[e] / e:.0%})" for e in factors})
        out.append(row)
    return pd.DataFrame(out), missing


def report(
    runs: pd.DataFrame,
    plan: Plan | None = None,
    views_examples: int = 200,
    data_dirs: Mapping[str, str | None] | None = None,
) -> str:
    """`factor_table`, `turns` and (``views_examples`` > 0) `views_table` of ``runs`` as
    markdown, each with what its columns mean (``python -m analysis peak``).

    Args:
        runs: The runs table (`analysis.records`).
        plan: What the config plans (`analysis.claims.study.Plan`). Default None.
        views_examples: Training examples `views_table` draws; 0: no views table (it reads
            the workloads' data). Default 200.
        data_dirs: Passed to `views_table`. Default None.
    """
    table = factor_table(runs, plan)
    if not len(table):
        return "No echo-factor study with a baseline in these runs.\n"
    rows = runs[runs["study"] == STUDY]
    steps = {w: crossing_step(r) for w, r in rows.groupby("workload")}
    parts = [
        markdown_table(table),
        "\nPer factor e (the baseline as e = 1): n, the complete searches, each at its best "
        "trial (or the seeds of a study that does not tune), and how many reached the "
        "target; fresh_median: their median fewest fresh examples to target (one that missed "
        "counts as worst); fresh_rel, steps_rel: the medians of "
        "fresh examples and of steps to target over the baseline's; repeat_worth = (1 / "
        "fresh_rel - 1) / (e - 1): the fresh examples one repeat is worth (1: ideal, 0: none).",
        "",
        markdown_table(turns(table, steps)),
        "\nRule: lowest_at is the factor of the lowest median (the smaller on a tie); the "
        "curve is still falling when that is the largest factor tried, flat when the largest "
        "factor's median is within one step (fresh examples between located crossings) of "
        "it, and else turns after it.",
    ]
    if views_examples > 0:
        scale = str(rows["scale"].iloc[0]) if "scale" in rows and len(rows) else "cpu"
        views, missing = views_table(table, scale, views_examples, data_dirs=data_dirs)
        parts += ["", *missing] if missing else []
        if len(views):
            parts += [
                "",
                markdown_table(views),
                f"\nPer workload echoed before augmentation: its training examples; "
                f"baseline_passes: the baseline's median fresh examples to target over them; "
                f"views e=K: among K augmentations of one training example, the mean number of "
                f"distinct ones ({views_examples} examples drawn, the workload's own augment), "
                f"and that over K: how many of an example's repeats are new views.",
            ]
    return "\n".join(parts) + "\n"
