"""Exact incumbent censoring: a tuned search's trial stops once it can no longer be the best.

The trials of one search (a condition's repetition) run in order. Trial ``t``'s incumbent is
the fewest fresh examples to target among trials ``0 .. t-1`` of the same search
(`incumbent`). Trial ``t`` stops at its first evaluation at or past the incumbent that does not
reach the target (`stops`): its record is ``censored`` there, at that many fresh examples,
against that incumbent.

This leaves every search's best unchanged. A run's crossing is located only within the
evaluation interval in which it first reaches the target (the kept models since the previous
evaluation, `budget.resolution`), so a trial that misses at an evaluation of ``F >=
incumbent`` fresh examples crosses, if ever, after ``F``: strictly later than the incumbent,
which an earlier trial already holds. `replay` applies the rule to uncensored records, as
the harness applies it while training.

This module imports nothing heavy: the analysis package and the workflow read it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from run_contract.identity import RunSpec

__all__ = [
    "Incumbent",
    "censoring_mismatch",
    "crossing",
    "incumbent",
    "replay",
    "search_incumbent",
    "stop_row",
    "stops",
]


@dataclass(frozen=True)
class Incumbent:
    """The best of a search's earlier trials.

    Attributes:
        fresh_examples: Its fresh examples to target.
        trial: Which trial holds it (the first, on a tie).
    """

    fresh_examples: int
    trial: int

    def as_dict(self) -> dict[str, int]:
        """``{"incumbent": fresh examples, "incumbent_trial": trial}``, as a record has it."""
        return {"incumbent": self.fresh_examples, "incumbent_trial": self.trial}


def crossing(record: Mapping[str, Any]) -> int | None:
    """A record's fresh examples to target: the refined crossing where it has one (what the
    analysis compares), else the evaluation grid's; None when it did not reach the target."""
    if not record["reached"]:
        return None
    refined = record.get("refined")
    located = refined["fresh_examples_to_target"] if refined else None
    return record["fresh_examples_to_target"] if located is None else located


def incumbent(earlier: Sequence[Mapping[str, Any]]) -> Incumbent | None:
    """The incumbent a trial is censored against.

    Args:
        earlier: The records of the earlier trials of its search (any order; each carries
            ``search.trial``).

    Returns:
        The fewest fresh examples to target among them and the trial that holds it; None
        when none reached the target (nothing to censor against).
    """
    best: Incumbent | None = None
    for record in sorted(earlier, key=lambda r: r["search"]["trial"]):
        fresh = crossing(record)
        if fresh is not None and (best is None or fresh < best.fresh_examples):
            best = Incumbent(fresh, record["search"]["trial"])
    return best


def search_incumbent(spec: RunSpec, out_dir: str) -> Incumbent | None:
    """The incumbent of a search's trial: the best of its search's earlier trials' records.

    Args:
        spec: The trial (`RunSpec` with ``repetition`` and ``trial``).
        out_dir: The study's ``out_dir``, where those records are (`RunSpec.path`).

    Returns:
        As `incumbent`; None for a search's first trial or a run that is not a trial.

    Raises:
        FileNotFoundError: An earlier trial has no record yet (the message names it): a
            search's trials train in order.
    """
    records = []
    for earlier in spec.earlier_trials():
        path = Path(earlier.path(out_dir))
        if not path.is_file():
            raise FileNotFoundError(
                f"censor: {path} (trial {earlier.trial} of this trial's search) has no record "
                "yet; a search's trials train in order"
            )
        records.append(json.loads(path.read_text()))
    return incumbent(records)


def censoring_mismatch(
    record: Mapping[str, Any], earlier: Sequence[Mapping[str, Any]]
) -> str | None:
    """Why a censored record no longer leaves its search's best unchanged, or None (it does,
    or it is not censored): it stopped short of the best of its search's earlier trials as
    they are now (one was retrained since), so it might have crossed before it.

    Args:
        record: A run record.
        earlier: The current records of its search's earlier trials.
    """
    censored = record.get("censored")
    if censored is None:
        return None
    best = incumbent(earlier)
    if best is not None and censored["at_fresh"] >= best.fresh_examples:
        return None
    now = "none reached the target" if best is None else f"the best is {best.fresh_examples}"
    return (
        f"censored: stopped at {censored['at_fresh']} fresh examples against an incumbent of "
        f"{censored['incumbent']}, but of its search's earlier trials {now} now: retrain it"
    )


def stops(fresh_examples: int, reached: bool, best: Incumbent | None) -> bool:
    """Whether a trial stops (censored) at an evaluation of ``fresh_examples`` that did or did
    not reach the target, given its ``best`` incumbent (None: never)."""
    return best is not None and not reached and fresh_examples >= best.fresh_examples


def _reached(record: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    target = record["target"]
    if target["direction"] == "max":
        return row["metric"] >= target["value"]
    return row["metric"] <= target["value"]


def stop_row(record: Mapping[str, Any], best: Incumbent | None) -> int | None:
    """Where an uncensored record would have stopped against ``best``: the index of its
    evaluation (``eval_curve``) at which it is censored, or None (it reached the target, or
    its budget, first)."""
    budget = record["budget"]["max_fresh"]
    for index, row in enumerate(record["eval_curve"][1:], start=1):
        reached = _reached(record, row)
        if reached:
            return None
        if row["fresh_examples"] < budget and stops(row["fresh_examples"], reached, best):
            return index
    return None


def replay(search: Sequence[Mapping[str, Any]]) -> list[dict[str, Any] | None]:
    """Censor a search's uncensored records as training in order would have.

    Args:
        search: The records of one search's trials (uncensored: each trained to its target
            or budget), in any order.

    Returns:
        Per record, in trial order: None where the trial is left as it is (it reached the
        target, or its budget, before passing its incumbent), else ``{"at_fresh":
        ..., "incumbent": ..., "incumbent_trial": ...}``, the censoring its record would carry.
    """
    ordered = sorted(search, key=lambda r: r["search"]["trial"])
    result: list[dict[str, Any] | None] = []
    for index, record in enumerate(ordered):
        best = incumbent(ordered[:index])
        row = stop_row(record, best)
        if row is None:
            result.append(None)
            continue
        at_fresh = record["eval_curve"][row]["fresh_examples"]
        result.append({"at_fresh": at_fresh, **best.as_dict()})
    return result
