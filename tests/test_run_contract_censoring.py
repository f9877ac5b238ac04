"""Incumbent censoring replayed on the protocol study's landed searches: every search's best
is the same with and without it, and it stops trials that could not win."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from run_contract.censoring import (
    Incumbent,
    censoring_mismatch,
    crossing,
    incumbent,
    replay,
    stops,
)

ROOT = Path(__file__).parents[1]
RECORDS = ROOT / "results" / "protocol" / "records"


def searches() -> dict[str, list[dict]]:
    """The landed records of each search (a condition's repetition), by run id less trial
    and seed."""
    grouped = defaultdict(list)
    for path in sorted(RECORDS.glob("*/*.json")):
        record = json.loads(path.read_text())
        if "search" in record:
            search = path.name.rsplit("-t", 1)[0]
            grouped[f"{path.parent.name}/{search}"].append(record)
    return grouped


@pytest.fixture(scope="module")
def landed() -> dict[str, list[dict]]:
    grouped = searches()
    if not grouped:
        pytest.skip("no protocol records in this checkout")
    return grouped


def test_every_landed_search_keeps_its_best_under_censoring(landed):
    censored_trials = 0
    for name, records in landed.items():
        ordered = sorted(records, key=lambda r: r["search"]["trial"])
        cuts = replay(ordered)
        found = [crossing(r) for r in ordered]
        kept = [f for f, cut in zip(found, cuts, strict=True) if cut is None and f is not None]
        reached = [f for f in found if f is not None]
        assert min(kept, default=None) == min(reached, default=None), name
        for index, (fresh, cut) in enumerate(zip(found, cuts, strict=True)):
            if cut is None:
                continue
            censored_trials += 1
            # it stopped past the best of the trials before it, and crossed (if ever) later
            assert cut["incumbent"] == min(f for f in found[:index] if f is not None), name
            assert cut["at_fresh"] >= cut["incumbent"], name
            assert fresh is None or fresh > cut["incumbent"], name
    assert len(landed) >= 200 and censored_trials > 100  # it does stop trials


def test_a_trial_stops_only_past_its_incumbent_and_short_of_the_target():
    best = Incumbent(fresh_examples=600, trial=2)
    assert not stops(599, False, best)
    assert stops(600, False, best) and stops(1200, False, best)
    assert not stops(1200, True, best)
    assert not stops(10**9, False, None)


def test_the_incumbent_is_the_fewest_fresh_examples_of_the_earlier_trials():
    def record(trial, fresh, refined=None):
        located = None if refined is None else {"fresh_examples_to_target": refined}
        return {
            "search": {"trial": trial}, "reached": fresh is not None,
            "fresh_examples_to_target": fresh, **({"refined": located} if located else {}),
        }  # fmt: skip

    earlier = [record(0, 1200, refined=900), record(1, None), record(2, 800), record(3, 800)]
    assert incumbent(earlier) == Incumbent(800, 2)
    assert incumbent([record(0, None)]) is None
    assert incumbent([]) is None


def test_a_censored_record_is_stale_once_its_search_best_moved_past_where_it_stopped():
    def earlier(fresh):
        return {"search": {"trial": 0}, "reached": fresh is not None,
                "fresh_examples_to_target": fresh}  # fmt: skip

    record = {"censored": {"at_fresh": 6400, "incumbent": 6000, "incumbent_trial": 0}}
    assert censoring_mismatch(record, [earlier(6000)]) is None
    assert censoring_mismatch(record, [earlier(5400)]) is None  # retrained lower: still exact
    line = censoring_mismatch(record, [earlier(7000)])
    assert line.startswith("censored: stopped at 6400 fresh examples against an incumbent of 6000")
    assert "the best is 7000" in line
    assert "none reached" in censoring_mismatch(record, [earlier(None)])
    assert censoring_mismatch({"reached": True}, [earlier(7000)]) is None
