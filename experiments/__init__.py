"""Training workloads, their registry and the harness that records fresh examples, steps and
wall time to a declared target quality.

* `Workload`, `Target`, `Budget`: the contract a workload implements (`experiments.workload`).
* `register`, `names`, `get`: the registry; workloads live one per file in
  ``experiments/workloads/`` and are discovered automatically.
* ``python -m experiments.run``: run one configuration and write one JSON record.
"""

from experiments.registry import get, names, register
from experiments.workload import Budget, Target, Workload

__all__ = ["Budget", "Target", "Workload", "get", "names", "register"]
