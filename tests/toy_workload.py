"""Source of a throwaway workload, written as its own file by the `toy_workload` fixture to
exercise the "one new file" recipe: two Gaussian blobs ``separation`` apart along one axis, a
linear classifier initialised at zero (so it starts at chance). ``separation=0`` makes the
target unreachable."""

from __future__ import annotations

import numpy as np
import torch

from experiments import MOMENTUM, Budget, Dimension, SearchSpace, Target, Workload, register


@register("toy_blobs")
class ToyBlobs(Workload):
    description = "two Gaussian blobs in 4-D, a linear classifier"
    targets = {"cpu": Target("accuracy", 0.9, "max")}
    search_spaces = {"cpu": SearchSpace({"lr": Dimension(0.02, 0.5), "momentum": MOMENTUM})}
    default_hparams = {
        "cpu": {"batch_size": 16, "lr": 0.1, "momentum": 0.9, "noise": 0.1, "separation": 4.0}
    }
    budgets = {"cpu": Budget(max_fresh=2048, eval_every_fresh=64, reference_fresh=256)}

    def _blobs(self, n: int, seed: int) -> list[tuple[torch.Tensor, int]]:
        rng = np.random.default_rng(seed)
        labels = rng.integers(0, 2, n)
        points = rng.normal(0, 1, (n, 4))
        points[:, 0] += self.hp["separation"] * (labels - 0.5)
        return [
            (torch.tensor(p, dtype=torch.float32), int(y))
            for p, y in zip(points, labels, strict=True)
        ]

    def read(self, split):
        return self._blobs(512, 1) if split == "train" else self._blobs(256, 2)

    def augment(self, example, rng):
        point, label = example
        noise = torch.from_numpy(rng.normal(0, self.hp["noise"], 4).astype(np.float32))
        return point + noise, label

    def build_model(self):
        model = torch.nn.Linear(4, 2)
        torch.nn.init.zeros_(model.weight)
        torch.nn.init.zeros_(model.bias)
        return model

    def loss(self, model, batch):
        points, labels = batch
        return torch.nn.functional.cross_entropy(model(points), labels)

    def evaluate(self, model, device):
        points, labels = self.collate(self.read("eval"))
        logits = model(points.to(device))
        accuracy = (logits.argmax(1).cpu() == labels).float().mean().item()
        return {
            "accuracy": accuracy,
            "loss": torch.nn.functional.cross_entropy(logits.cpu(), labels).item(),
        }
