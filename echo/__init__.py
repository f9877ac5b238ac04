"""Data echoing (Choi et al., "Faster Neural Network Training with Data Echoing", 2019).

The package root is framework-free. Front ends:

* `echo.torch`: `Echo` (example and batch echoing as an iterable stage), `build_pipeline`
  (read -> [echo] -> augment -> [echo] -> collate -> [echo] with exact fresh-example
  accounting across DataLoader workers) and `EchoOnStall` (opportunistic batch echoing);
  `echo.torch.nodes.EchoNode` for ``torchdata.nodes`` (imports torchdata).
* `echo.tfdata`: ``dataset.apply(echo(factor, shuffle_buffer=...))`` (imports TensorFlow).

`echo.state` is the one resume contract every stateful stage speaks. `advise` (and ``python -m
echo advise``) measures a job's loader and step and advises an echo setting from the protocol
study's evidence (`echo.advisor`).
"""

from echo.advisor import advise
from echo.core import EchoCounts, check_factor, check_shuffle_buffer, echo_items
from echo.points import ECHO_POINTS, EchoPoint

__all__ = [
    "ECHO_POINTS",
    "EchoCounts",
    "EchoPoint",
    "advise",
    "check_factor",
    "check_shuffle_buffer",
    "echo_items",
]
