"""`echo.torch.trainer.EchoTrainer`: echoing inside a real ``transformers.Trainer`` on CPU, with
a tiny GPT-2 built from a config (nothing downloaded)."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest
import torch

pytest.importorskip("accelerate", reason="Trainer needs accelerate (the `dev` extra)")
datasets = pytest.importorskip("datasets")
transformers = pytest.importorskip("transformers")

from echo.torch.trainer import ECHO_STATE_NAME, EchoTrainer  # noqa: E402

EXAMPLES, BATCH, LENGTH, VOCAB = 20, 4, 8, 64


def _dataset():
    rng = np.random.default_rng(0)
    ids = rng.integers(1, VOCAB, size=(EXAMPLES, LENGTH))
    ids[:, 0] = np.arange(EXAMPLES)  # the first token names the example
    rows = [list(map(int, row)) for row in ids]
    return datasets.Dataset.from_dict(
        {"input_ids": rows, "labels": rows, "text": [str(r) for r in rows]}
    )


def _shift(example, rng):
    """A random 'augmentation' of every token but the first."""
    ids = list(example["input_ids"])
    ids[1:] = [(t + int(rng.integers(1, 8))) % VOCAB for t in ids[1:]]
    return {"input_ids": ids, "labels": ids}


def _model():
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=LENGTH, n_embd=16, n_layer=1, n_head=2
    )
    return transformers.GPT2LMHeadModel(config)


def _run(tmp_path, point, factor, *, resume=None, augment=None, buffer=3, **arguments):
    arguments = {"save_steps": 3, **arguments}
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=BATCH, learning_rate=1e-3,
        logging_steps=1, report_to=[], use_cpu=True, seed=0, disable_tqdm=True, **arguments,
    )  # fmt: skip
    trainer = EchoTrainer(
        model=_model(), args=args, train_dataset=_dataset(),
        data_collator=transformers.default_data_collator, augment=augment,
        echo_point=point, echo_factor=factor, echo_shuffle_buffer=buffer,
    )  # fmt: skip
    seen: list[list[int]] = []
    trainer.model.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs["input_ids"].tolist()), with_kwargs=True
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer, seen


@pytest.mark.parametrize("point", ["before_augment", "after_augment", "after_batch"])
def test_epochs_count_fresh_passes_and_the_logs_carry_fresh_examples(tmp_path, point):
    trainer, seen = _run(tmp_path, point, 2, augment=_shift, num_train_epochs=2, save_steps=100)
    steps = 2 * 2 * EXAMPLES // BATCH  # two passes over the data, each echoed twice
    assert trainer.state.max_steps == steps and len(seen) == steps
    firsts = collections.Counter(row[0] for batch in seen for row in batch)
    assert firsts == {i: 4 for i in range(EXAMPLES)}
    logged = [log["fresh_examples"] for log in trainer.state.log_history if "loss" in log]
    assert len(logged) == steps and logged == sorted(logged) and logged[-1] == 2 * EXAMPLES
    assert logged[steps // 2 - 1] == EXAMPLES  # one epoch: every example read once


@pytest.mark.slow  # worker processes under Trainer: tens of seconds on 2 cores
def test_dataloader_workers_read_each_example_once_per_epoch(tmp_path):
    trainer, seen = _run(tmp_path, "after_augment", 1.5, num_train_epochs=1, save_steps=100,
                         dataloader_num_workers=2)  # fmt: skip
    assert len(seen) == trainer.state.max_steps == trainer.echo_loader.steps
    assert {row[0] for batch in seen for row in batch} == set(range(EXAMPLES))
    assert trainer.state.log_history[-2]["fresh_examples"] == EXAMPLES


def test_max_steps_counts_optimizer_steps_echoes_included(tmp_path):
    trainer, seen = _run(tmp_path, "after_batch", 3, buffer=0, max_steps=7, save_steps=100)
    assert len(seen) == 7 and trainer.state.global_step == 7
    assert trainer.state.log_history[-2]["fresh_examples"] == 3 * BATCH  # 7 steps: 3 fresh batches


@pytest.mark.parametrize("point", ["before_augment", "after_batch"])
def test_resume_from_checkpoint_continues_the_same_stream_exactly(tmp_path, point):
    factor = 1.5 if point == "before_augment" else 3
    whole, seen = _run(tmp_path, point, factor, augment=_shift, num_train_epochs=2)
    if point == "after_batch":
        assert whole.state.max_steps == 30  # checkpoint 15 is the end of the first epoch
    for checkpoint in (3, 15):
        folder = tmp_path / f"checkpoint-{checkpoint}"
        state = json.loads((folder / ECHO_STATE_NAME).read_text())
        logged = [log for log in whole.state.log_history if log.get("step") == checkpoint]
        assert state["fresh"] == logged[0]["fresh_examples"]
        resumed, rest = _run(
            tmp_path, point, factor, augment=_shift, num_train_epochs=2, resume=str(folder)
        )
        assert rest == seen[checkpoint:]
        assert resumed.state.global_step == whole.state.global_step
        assert resumed.echo_loader.fresh_examples == whole.echo_loader.fresh_examples
        for a, b in zip(resumed.model.parameters(), whole.model.parameters(), strict=True):
            assert torch.equal(a, b)


def test_bad_echo_settings_are_refused_when_the_trainer_is_built(tmp_path):
    args = transformers.TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    with pytest.raises(ValueError, match="factor"):
        EchoTrainer(model=_model(), args=args, train_dataset=_dataset(), echo_point="after_batch",
                    echo_factor=0.5)  # fmt: skip
    with pytest.raises(ValueError, match="point='before_batch'"):
        EchoTrainer(model=_model(), args=args, train_dataset=_dataset(), echo_point="before_batch")
