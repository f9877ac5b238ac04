"""`EchoTrainer`: data echoing inside Hugging Face ``transformers.Trainer``.

Importing this module imports transformers (its ``Trainer`` also needs ``accelerate``);
`echo.torch` itself does not.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from transformers import Trainer, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint
from transformers.utils import is_datasets_available

from echo.points import EchoPoint
from echo.torch.pipeline import EchoLoader, PipelineSettings, build_pipeline

__all__ = ["ECHO_STATE_NAME", "EchoTrainer"]

ECHO_STATE_NAME = "echo_state.json"
"""The file, in each checkpoint folder, that holds the echo loader's `state_dict`."""


class _Epochs:
    """What `EchoTrainer` hands Trainer as its train dataloader: `EchoLoader`'s epochs.

    ``len`` is the batches of the epoch the loader runs next (echoes included), which Trainer
    reads once to turn ``num_train_epochs`` into steps; it is a TypeError, as Trainer expects,
    when the dataset has no length. There is no ``set_epoch``: the loader counts its own
    epochs, also across a resume. A resumed epoch whose batches were all trained before the
    checkpoint (Trainer stops taking batches once an epoch's steps are done, so the loader
    never saw its end) goes straight on to the next epoch.
    """

    def __init__(self, loader: EchoLoader) -> None:
        self.loader = loader

    def __len__(self) -> int:
        return self.loader.batches_per_epoch()

    def __iter__(self) -> Iterator[Any]:
        resumed = self.loader.state_dict()["position"] > 0
        delivered = False
        for batch in self.loader:
            delivered = True
            yield batch
        if resumed and not delivered:
            yield from self.loader


class _SaveEchoState(TrainerCallback):
    """Writes the echo loader's state into each checkpoint Trainer saves."""

    def __init__(self, trainer: EchoTrainer) -> None:
        self.trainer = trainer

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        loader = self.trainer.echo_loader
        folder = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        if loader is not None and os.path.isdir(folder) and state.is_world_process_zero:
            with open(os.path.join(folder, ECHO_STATE_NAME), "w") as file:
                json.dump(loader.state_dict(), file)


class EchoTrainer(Trainer):
    """A ``transformers.Trainer`` that trains on echoed data, with the fresh examples logged.

    Its training batches come from `build_pipeline`: ``train_dataset`` is the read stage,
    ``augment`` runs per example, Trainer's ``data_collator`` collates, and the echo stage
    sits at ``echo_point``. Everything else is Trainer's own (evaluation, saving, logging,
    optimizers, callbacks)::

        trainer = EchoTrainer(
            model=model,
            args=args,
            train_dataset=tokenized,
            data_collator=collator,
            echo_point="after_augment",
            echo_factor=2.0,
            echo_shuffle_buffer=1024,
        )
        trainer.train()

    What Trainer's arguments mean with echoing:

    * ``num_train_epochs`` counts passes over ``train_dataset``, i.e. fresh examples: one
      epoch reads every example once and trains ``echo_factor`` times as many steps.
    * ``max_steps`` counts optimizer steps, echoed batches included; the learning-rate
      schedule runs over those steps (the ``num_train_epochs`` ones, when ``max_steps`` is
      not set).
    * Each log (``trainer.state.log_history``, and every reporting integration) carries
      ``fresh_examples``: the source examples read to produce the batches trained so far
      (`EchoLoader.fresh_examples`, exact; per rank under DDP).
    * ``resume_from_checkpoint`` continues the same stream exactly: the loader's state is
      saved in each checkpoint (``echo_state.json``) and restored, so Trainer's own
      fast-forward over the data is switched off for a run that resumes from it.

    The batch size, workers, ``dataloader_drop_last``, ``pin_memory``, ``prefetch_factor`` and
    multiprocessing context come from the ``TrainingArguments``, and the pipeline's seed from
    ``data_seed`` (else ``seed``). With a fractional factor an epoch's batches vary by a few;
    Trainer sizes every epoch by the first one's.

    Args:
        *args: Trainer's positional arguments.
        echo_point: Echo insertion point (an `EchoPoint` or its string). Default None: no
            echoing.
        echo_factor: Echo factor in ``[1, MAX_FACTOR]``. Default 1.0.
        echo_shuffle_buffer: Shuffle buffer after the echo stage, in items at that point.
            Default 0.
        augment: Per-example augmentation, ``augment(example, rng)`` or ``augment(example)``
            (see `build_pipeline`). Default None: none (random masking in a collator such as
            ``DataCollatorForLanguageModeling`` still draws anew for each copy at the example
            points).
        **kwargs: Trainer's keyword arguments.

    Attributes:
        echo_loader: The `EchoLoader` of the latest ``train()``, None before it.

    Raises:
        ValueError: A bad ``echo_point``, ``echo_factor`` or ``echo_shuffle_buffer``; the
            message names it and what is valid.
    """

    def __init__(
        self,
        *args: Any,
        echo_point: EchoPoint | str | None = None,
        echo_factor: float = 1.0,
        echo_shuffle_buffer: int = 0,
        augment: Callable[..., Any] | None = None,
        **kwargs: Any,
    ) -> None:
        checked = PipelineSettings(
            batch_size=1,
            point=echo_point,
            factor=echo_factor,
            shuffle_buffer=echo_shuffle_buffer,
            rank=0,
            world_size=1,
        )
        super().__init__(*args, **kwargs)
        self.echo_point, self.echo_factor = checked.point, checked.factor
        self.echo_shuffle_buffer, self.augment = checked.shuffle_buffer, augment
        self.echo_loader: EchoLoader | None = None
        self._echo_resume: dict[str, Any] | None = None
        self.add_callback(_SaveEchoState(self))

    def get_train_dataloader(self) -> Any:
        """The training batches: `build_pipeline` over ``train_dataset`` (unused columns of an
        HF dataset removed, as Trainer does), resumed from the checkpoint's echo state."""
        if self.train_dataset is None:
            raise ValueError("EchoTrainer: training requires a train_dataset")
        args = self.args
        read = self.train_dataset
        if is_datasets_available():
            import datasets

            if isinstance(read, datasets.Dataset):
                read = self._remove_unused_columns(read, description="Training")
        settings = PipelineSettings(
            batch_size=self._train_batch_size,
            point=self.echo_point,
            factor=self.echo_factor,
            shuffle_buffer=self.echo_shuffle_buffer,
            num_workers=args.dataloader_num_workers,
            seed=args.seed if args.data_seed is None else args.data_seed,
            drop_last=args.dataloader_drop_last,
        )
        options: dict[str, Any] = {"pin_memory": args.dataloader_pin_memory}
        if args.dataloader_num_workers > 0:
            options["prefetch_factor"] = args.dataloader_prefetch_factor
            options["multiprocessing_context"] = args.dataloader_multiprocessing_context
        loader = build_pipeline(
            read, self.augment, self.data_collator, settings=settings, **options
        )
        if self._echo_resume is not None:
            loader.load_state_dict(self._echo_resume)
        self.echo_loader = loader
        return _Epochs(loader)

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs: Any) -> Any:
        """Trainer's ``train``; a checkpoint's echo state (when it has one) is restored."""
        if resume_from_checkpoint is True:  # None found: Trainer raises, naming the folder
            resume_from_checkpoint = get_last_checkpoint(self.args.output_dir) or True
        saved = (
            os.path.join(resume_from_checkpoint, ECHO_STATE_NAME)
            if isinstance(resume_from_checkpoint, str)
            else None
        )
        self._echo_resume = None
        skip = self.args.ignore_data_skip
        if saved is not None and os.path.isfile(saved):
            with open(saved) as file:
                self._echo_resume = json.load(file)
            self.args.ignore_data_skip = True  # the loader resumes itself
        try:
            return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        finally:
            self.args.ignore_data_skip = skip
            self._echo_resume = None

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Trainer's ``log``, with ``fresh_examples`` added while training."""
        if self.echo_loader is not None and self.is_in_train:
            logs = {**logs, "fresh_examples": self.echo_loader.fresh_examples}
        super().log(logs, start_time)
