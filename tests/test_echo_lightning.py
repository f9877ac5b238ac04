"""`Echo` in a real Lightning `Trainer`: epochs advance without user code."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils.data import DataLoader

from echo.torch import Echo

L = pytest.importorskip("lightning.pytorch", reason="lightning is not installed (the `dev` extra)")


class _Data(L.LightningDataModule):
    """The README's example: an echo stage built in ``setup``, read by DataLoader workers."""

    def setup(self, stage: str) -> None:
        self.echo = Echo(torch.arange(96).float().unsqueeze(1), 2, shuffle_buffer=16, seed=0)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.echo, batch_size=16, num_workers=2)


class _Model(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.first_batches: list[list[float]] = []

    def training_step(self, batch, batch_idx):
        if batch_idx == 0:
            self.first_batches.append(batch.flatten().tolist())
        return self.layer(batch).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=1e-3)


def test_three_epochs_under_a_real_trainer_each_draw_anew():
    """Issue 14, item 4: Lightning calls set_epoch only on samplers, so with non-persistent
    workers all three epochs began with the identical batch."""
    data, model = _Data(), _Model()
    trainer = L.Trainer(
        max_epochs=3,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice on worker counts and logging
        trainer.fit(model, data)
    assert trainer.current_epoch == 3
    assert len(model.first_batches) == 3
    assert len({str(b) for b in model.first_batches}) == 3
    assert (data.echo.fresh, data.echo.emitted) == (3 * 96, 3 * 192)
    assert data.echo.epoch == 3
