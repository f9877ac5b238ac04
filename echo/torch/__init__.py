"""Data echoing for PyTorch.

* `Echo`: an iterable stage (a torch `IterableDataset`) for example echoing inside
  DataLoader workers (also under torchdata's ``StatefulDataLoader``) or batch echoing after
  the DataLoader.
* `build_pipeline` / `EchoLoader`: read -> [echo] -> augment -> [echo] -> collate -> [echo]
  with exact counts of the fresh examples behind each delivered batch; its settings are one
  frozen `PipelineSettings`.
* `EchoOnStall`: opportunistic batch echoing that repeats a batch only while the next fresh
  one is not ready.
* `sum_over_ranks`: adds a count up over DDP ranks; `delivered_counts` reads the exact counts
  out of a ``StatefulDataLoader`` state.
* ``echo.torch.nodes.EchoNode`` (imports torchdata): the stage as a ``torchdata.nodes`` node.
* ``echo.torch.trainer.EchoTrainer`` (imports transformers): echoing inside Hugging Face's
  ``Trainer``.

Every stateful stage saves the shape described in `echo.state`.
"""

from echo.state import delivered_counts
from echo.torch.distributed import sum_over_ranks
from echo.torch.on_stall import EchoOnStall
from echo.torch.pipeline import EchoLoader, PipelineSettings, build_pipeline
from echo.torch.stage import Echo

__all__ = [
    "Echo",
    "EchoLoader",
    "EchoOnStall",
    "PipelineSettings",
    "build_pipeline",
    "delivered_counts",
    "sum_over_ranks",
]
