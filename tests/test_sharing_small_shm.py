"""`sharing` in a 64 MB /dev/shm, as in a container started without ``--shm-size``: each
trial of `small_shm` runs in a private mount namespace whose /dev/shm is a 64 MB tmpfs (as
root; skipped otherwise, with the reason)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sharing_checks import in_small_shm, small_shm_unavailable

import sharing

pytestmark = pytest.mark.timeout(180)
HERE = Path(__file__).parent
EPOCH = list(range(384))


def _trial(mode: str) -> dict:
    why = small_shm_unavailable()
    if why:
        pytest.skip(why)
    root = str(Path(sharing.__file__).parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, str(HERE)]))
    command = f"exec {sys.executable} {HERE / 'small_shm.py'} {mode}"
    done = subprocess.run(
        in_small_shm(command), capture_output=True, text=True, timeout=150, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_loader_alone_fits_the_64_mb_shm():
    """The trials' DataLoader runs alone in this /dev/shm: the producers below must too."""
    assert _trial("dataloader")["consumers"]["alone"]["ids"] == EPOCH


@pytest.mark.parametrize("mode", ["producer", "from_dataset", "tensorsocket"])
def test_both_producers_and_the_drop_in_serve_every_consumer_in_a_64_mb_shm(mode):
    report = _trial(mode)
    assert "producer_error" not in report, report["producer_error"]
    assert report["consumers"] == {name: {"mode": "start", "ids": EPOCH} for name in "ab"}


def test_a_late_joiner_replays_a_whole_epoch_held_outside_the_64_mb_shm():
    """The replay window holds the whole epoch (24 batches, 231 MB): none of it in /dev/shm."""
    report = _trial("replay")
    assert "producer_error" not in report, report["producer_error"]
    assert report["consumers"] == {
        "early": {"mode": "start", "ids": EPOCH},
        "late": {"mode": "replay", "ids": EPOCH},
    }


def test_a_wrapped_late_joiner_is_completed_by_batches_loaded_again_in_a_64_mb_shm():
    report = _trial("wrap")
    assert "producer_error" not in report, report["producer_error"]
    assert report["consumers"]["early"] == {"mode": "start", "ids": EPOCH}
    late = report["consumers"]["late"]
    joined_at = late["ids"][0]
    assert late["mode"] == "wrap" and joined_at >= 32  # past the window of one batch
    assert late["ids"] == EPOCH[joined_at:] + EPOCH[:joined_at]


def test_a_dataloader_batch_bigger_than_dev_shm_is_served():
    """A 77 MB batch: a DataLoader worker alone puts it in /dev/shm and fails (below); under
    a producer its workers collate into the producer's segments, which are not there."""
    report = _trial("big")
    assert "producer_error" not in report, report["producer_error"]
    assert report["consumers"] == {name: {"mode": "start", "ids": EPOCH} for name in "ab"}


def test_a_batch_that_cannot_fit_names_dev_shm_its_size_and_the_fix():
    """A 77 MB batch cannot be made in a 64 MB /dev/shm by a DataLoader that the producer
    gets through an iterable of one's own (as it gets any loader but a DataLoader)."""
    report = _trial("too_big")
    error = report["producer_error"]
    assert error.startswith("RuntimeError: the loader ran out of shared memory")
    assert "/dev/shm holds 64 MiB" in error
    assert "--shm-size" in error and "Producer.from_dataset" in error
    for outcome in report["consumers"].values():
        assert outcome["error"].startswith("SharingError")
        assert "/dev/shm holds 64 MiB" in outcome["error"] and "--shm-size" in outcome["error"]
