"""Data echoing for PyTorch.

* `Echo`: an iterable stage (a torch `IterableDataset`) for example echoing inside
  DataLoader workers or batch echoing after the DataLoader.
* `build_pipeline` / `EchoLoader`: read -> [echo] -> augment -> [echo] -> collate -> [echo]
  with exact counts of the fresh examples behind each delivered batch.
* `EchoOnStall`: opportunistic batch echoing that repeats a batch only while the next fresh
  one is not ready.
"""

from echo.torch.on_stall import EchoOnStall
from echo.torch.pipeline import EchoLoader, build_pipeline
from echo.torch.stage import Echo

__all__ = ["Echo", "EchoLoader", "EchoOnStall", "build_pipeline"]
