"""Training workloads, their registry and the harness that records fresh examples, steps and
wall time to a declared target quality.

* `Workload`, `Target`, `Budget`, `SearchSpace` (of `Dimension` s, `MOMENTUM`): the contract a
  workload implements (`experiments.workload`).
* `register`, `names`, `get`: the registry; workloads live one per file in
  ``experiments/workloads/`` and are discovered automatically.
* `run_contract.identity.RunSpec`: a run's identity, declared once.
* ``python -m experiments.run``: run one configuration and write one JSON record.

The names above are imported on first use, so ``import experiments.study`` (the Snakefile's)
or ``run_contract.identity`` imports no torch.

Importing the package sets the numerics mode's environment (`run_contract.numerics.apply`:
``ECHO_NUMERICS``, default ``portable``) before torch does any work, in this process and the
processes it starts: training runs, Snakemake's jobs and SLURM's alike.
"""

from __future__ import annotations

import importlib
from typing import Any

from run_contract import numerics

numerics.apply()

__all__ = [
    "MOMENTUM",
    "Budget",
    "Dimension",
    "SearchSpace",
    "Target",
    "Workload",
    "get",
    "names",
    "register",
]

_HOME = {
    "Budget": "experiments.workload",
    "Dimension": "experiments.workload",
    "MOMENTUM": "experiments.workload",
    "SearchSpace": "experiments.workload",
    "Target": "experiments.workload",
    "Workload": "experiments.workload",
    "get": "experiments.registry",
    "names": "experiments.registry",
    "register": "experiments.registry",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'experiments' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)
