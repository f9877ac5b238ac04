"""A simulated multi-host Ray cluster on one machine (`simulated_cluster`), for tests and
benchmarks of the Ray backend."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from typing import Any

import ray

__all__ = ["simulated_cluster"]


@contextlib.contextmanager
def simulated_cluster(head: dict[str, Any], nodes: Iterable[dict[str, Any]] = ()) -> Iterator[Any]:
    """Several Ray "hosts" on this machine, this process connected to them: a
    `ray.cluster_utils.Cluster` whose every node has its own raylet and object store, sharing
    the machine's cores and talking over loopback (how the tests and benchmarks reach
    across hosts without a second machine).

    Everything Ray writes (sessions, sockets, logs, spilled objects, its address file) goes
    into one fresh directory under ``/tmp`` (short: Ray's socket paths are limited), named by
    ``RAY_TMPDIR`` while the cluster runs, and removed afterwards with the cluster, so nothing
    is left behind; usage statistics are off.

    Args:
        head: ``Cluster.add_node`` arguments of the head node (``num_cpus``,
            ``object_store_memory``, ...); the dashboard is off unless it says otherwise.
        nodes: The same, one mapping per further node (``resources`` to place actors there).
            Default: none.

    Yields:
        The running ``ray.cluster_utils.Cluster``; ``ray`` is initialized against it.
    """
    import shutil
    import tempfile

    from ray.cluster_utils import Cluster

    saved = {key: os.environ.get(key) for key in ("RAY_TMPDIR", "RAY_USAGE_STATS_ENABLED")}
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    os.environ["RAY_TMPDIR"] = temp
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.makedirs(os.path.join(temp, "ray"), exist_ok=True)  # where Ray keeps its address file
    cluster = None
    try:
        cluster = Cluster(
            initialize_head=True,
            head_node_args={"include_dashboard": False, "temp_dir": temp, **head},
        )
        for node in nodes:
            cluster.add_node(**node)
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ---------------------------------------------------------------------- batches on the wire
