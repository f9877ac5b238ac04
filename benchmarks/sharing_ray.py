"""Sharing across simulated hosts through Ray, beside each consumer's own loader and tf.data
service.

A `ray.cluster_utils.Cluster` runs a head node (the producer's) and up to four consumer nodes,
each with its own raylet and object store: "hosts" that share this machine's cores and talk
over loopback. For each workload and layout (consumer nodes x consumers per node: (1, 4),
(2, 2), (4, 1)), modes run one after another on the same cluster:

* ``own``: every consumer (a Ray actor on its node) runs its own DataLoader (``--workers``
  worker processes each);
* ``ray``: one `sharing.Producer` on the head node (``endpoint="ray:NAME"``, one DataLoader
  of ``--workers`` workers) serves every consumer through Ray's object store;
* ``tfdata_service``: a tf.data service dispatcher and worker on the head node, consumers
  reading one shared job through its cross-trainer cache (``images`` only: a tf.data service
  worker cannot run the Python preprocessing of ``cpu``).

Each consumer reads ``--batches`` batches and one value per 4 KiB page of each, and does no
training, so the rates are loader throughput. Per trial it reports:

* per-consumer batches per second (median over consumers) and the slowest consumer's;
* CPU ms per batch received, of every process of the cluster (sampled from /proc: consumers,
  their loaders, the producer and its loader, the hub, the raylets and GCS that move the
  objects), and split by role;
* for ``ray``: bytes created in each consumer node's object store per batch, over the batch's
  bytes (Ray's own counter, ``cumulative_created_bytes``): the copies of each batch that
  crossed to that node. One copy per node, however many consumers it runs, is the goal. For
  ``tfdata_service`` every trainer's read is its own transfer (its design: there is no
  per-host cache), so the copies per node are the consumers per node.

    python -m benchmarks.sharing_ray --out benchmarks/reference/sharing_ray.csv
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from benchmarks.common import (
    add_schema_options,
    check_schema_options,
    machine_note,
    print_table,
    write_csv,
)
from benchmarks.sharing import (
    BATCH,
    calibrate_work,
    make_dataset,
    make_loader,
    tfds_batches,
    tfds_start,
    touch_pages,
)
from experiments.procstat import TreeCpu

__all__ = ["LAYOUTS", "MODES", "cluster_nodes", "main", "run", "serving_actor", "trial"]

LAYOUTS: tuple[tuple[int, int], ...] = ((1, 4), (2, 2), (4, 1))
"""(consumer nodes, consumers per node) of each trial."""

MODES: tuple[str, ...] = ("own", "ray", "tfdata_service")
"""The loading modes compared."""

_ROLES = ("consumers", "producer", "ray_system")


def cluster_nodes(nodes: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`sharing.ray_backend.simulated_cluster`'s arguments: a head node (4 CPUs, a 512 MiB
    object store) and ``nodes`` consumer nodes (256 MiB stores, resources ``node0``,
    ``node1``, ...)."""
    head = {"num_cpus": 4, "object_store_memory": 512 << 20}
    return head, [
        {"num_cpus": 8, "resources": {f"node{index}": 100}, "object_store_memory": 256 << 20}
        for index in range(nodes)
    ]


def serving_actor() -> Any:
    """The producer's side, an actor class for the head node: ``ray(...)`` starts a
    `sharing.Producer` on a ``ray:`` endpoint over `make_loader`'s loader, ``tfds()`` a tf.data
    service (its target), ``stop()`` stops either."""
    import ray

    @ray.remote(num_cpus=0)
    class Serving:
        """The producer's side, on the head node: a ray producer or a tf.data service."""

        def pid(self) -> int:
            return os.getpid()

        def ray(
            self, endpoint: str, workload: str, count: int, work: int, workers: int, n: int
        ) -> None:
            from sharing import Producer

            loader = make_loader(make_dataset(workload, count, work), workers)
            self.producer = Producer(loader, endpoint=endpoint, epochs=1, consumers=n)
            self.thread = threading.Thread(target=self.producer.serve, daemon=True)
            self.thread.start()

        def stop(self) -> None:
            if hasattr(self, "producer"):
                self.producer.stop()
                self.thread.join(timeout=30)
                self.producer.close()

        def tfds(self) -> str:
            self.dispatcher, self.worker, target = tfds_start()
            return target

    return Serving


def _actors() -> tuple[Any, Any]:
    import ray

    @ray.remote(num_cpus=0)
    class Consumer:
        """A training process on its node."""

        def pid(self) -> int:
            return os.getpid()

        def node(self) -> str:
            return ray.get_runtime_context().get_node_id()

        def read(self, batches: Iterator[Any], count: int) -> tuple[int, float]:
            first = last = None
            received = 0
            for batch in batches:
                touch_pages(batch)
                last = time.perf_counter()
                first = first or last
                received += 1
                if received == count:
                    break
            return received, (last - first) if received > 1 else float("nan")

        def own(self, workload: str, count: int, work: int, workers: int) -> tuple[int, float]:
            loader = make_loader(make_dataset(workload, count, work), workers)
            return self.read(iter(loader), count)

        def shared(self, endpoint: str, count: int) -> tuple[int, float]:
            from sharing import Consumer as SharedConsumer

            consumer = SharedConsumer(endpoint)
            try:
                return self.read(iter(consumer), count)
            finally:
                consumer.leave()

        def tfds(self, target: str, count: int, name: int) -> tuple[int, float]:
            return self.read(tfds_batches(target, name), count)

    return Consumer, serving_actor()


def _created(node: Any) -> int:
    from ray._private.internal_api import node_stats

    stats = node_stats(node.node_ip_address, node.node_manager_port, include_memory_info=False)
    return stats.store_stats.cumulative_created_bytes


def _descends(tree: TreeCpu, pid: int, roots: set[int]) -> bool:
    while pid in tree.parents:
        if pid in roots:
            return True
        pid = tree.parents[pid]
    return pid in roots


def trial(
    cluster: Any, mode: str, workload: str, layout: tuple[int, int], args: argparse.Namespace,
    work: int,
) -> dict[str, Any]:  # fmt: skip
    """One (mode, workload, layout) trial on ``cluster``; its CSV row."""
    import ray

    nodes, per_node = layout
    count = args.batches
    consumer_class, serving_class = _actors()
    serving = serving_class.remote()
    consumers = [
        consumer_class.options(resources={f"node{n}": 1}).remote()
        for n in range(nodes)
        for _ in range(per_node)
    ]
    pids = set(ray.get([c.pid.remote() for c in consumers]))
    producer_pid = ray.get(serving.pid.remote())
    endpoint = f"ray:bench-{os.getpid()}-{time.monotonic_ns()}"
    target = ray.get(serving.tfds.remote()) if mode == "tfdata_service" else None
    # The nodes the consumers run on, by id (the cluster's list has no set order).
    by_id = {node.node_id: node for node in cluster.list_all_nodes()}
    placed = dict.fromkeys(ray.get([c.node.remote() for c in consumers]))
    consumer_nodes = [by_id[node_id] for node_id in placed]
    assert len(consumer_nodes) == nodes, "consumers were not placed one node group each"
    created_before = [_created(node) for node in consumer_nodes]
    baseline = TreeCpu(os.getpid())
    baseline.sample()
    started = time.perf_counter()
    with TreeCpu(os.getpid()) as tree:
        if mode == "own":
            calls = [c.own.remote(workload, count, work, args.workers) for c in consumers]
        elif mode == "ray":
            ray.get(serving.ray.remote(endpoint, workload, count, work, args.workers, len(pids)))
            calls = [c.shared.remote(endpoint, count) for c in consumers]
        else:
            calls = [c.tfds.remote(target, count, i) for i, c in enumerate(consumers)]
        results = ray.get(calls)
    wall = time.perf_counter() - started
    ray.get(serving.stop.remote())
    created = [
        _created(node) - before for node, before in zip(consumer_nodes, created_before, strict=True)
    ]
    for actor in [serving, *consumers]:
        ray.kill(actor)
    received = sum(r[0] for r in results)
    rates = [r[0] / r[1] for r in results if r[1] == r[1] and r[1] > 0]
    cpu = {pid: seconds - baseline.cpu.get(pid, 0.0) for pid, seconds in tree.cpu.items()}
    by_role = dict.fromkeys(_ROLES, 0.0)
    for pid, seconds in cpu.items():
        if _descends(tree, pid, pids):
            by_role["consumers"] += seconds
        elif _descends(tree, pid, {producer_pid}):
            by_role["producer"] += seconds
        else:
            by_role["ray_system"] += seconds
    batch_bytes = BATCH * 3 * 224 * 224 if workload == "images" else BATCH * 3 * 32 * 32 * 4
    copies = (
        [bytes_ / (count * batch_bytes) for bytes_ in created]
        if mode == "ray"
        else [float(per_node)] * nodes
        if mode == "tfdata_service"
        else [0.0] * nodes
    )
    return {
        "workload": workload,
        "mode": mode,
        "nodes": nodes,
        "consumers_per_node": per_node,
        "consumers": nodes * per_node,
        "consumers_finished": sum(r[0] == count for r in results),
        "per_consumer_batches_per_s": statistics.median(rates) if rates else float("nan"),
        "slowest_batches_per_s": min(rates) if rates else float("nan"),
        "cpu_ms_per_batch": 1000 * sum(cpu.values()) / max(received, 1),
        **{f"cpu_ms_per_batch_{role}": 1000 * s / max(received, 1) for role, s in by_role.items()},
        "copies_per_node_per_batch": statistics.mean(copies),
        "copies_counted_by": "ray" if mode == "ray" else "design",
        "wall_s": wall,
        "batches": count,
        "workers": args.workers,
    }


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (workload, layout, mode) trial, on one cluster of four consumer nodes."""
    from sharing.ray_backend import simulated_cluster

    work = calibrate_work()
    rows = []
    with simulated_cluster(*cluster_nodes(max(nodes for nodes, _ in args.layouts))) as cluster:
        for workload in args.workloads:
            for layout in args.layouts:
                for mode in args.modes:
                    if mode == "tfdata_service" and workload != "images":
                        continue
                    row = trial(cluster, mode, workload, layout, args, work)
                    row["machine"] = machine_note()
                    rows.append(row)
                    print(
                        f"{workload} {layout} {mode}: "
                        f"{row['per_consumer_batches_per_s']:.1f} batches/s per consumer, "
                        f"{row['cpu_ms_per_batch']:.1f} CPU ms/batch, "
                        f"{row['copies_per_node_per_batch']:.2f} copies/node",
                        flush=True,
                    )
    return rows


def _layout(text: str) -> tuple[int, int]:
    """``(nodes, per node)`` of a layout the schema checked (``NODESxPER_NODE``)."""
    nodes, per_node = (int(part) for part in text.split("x"))
    return nodes, per_node


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark from the command line; write ``--out``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.sharing_ray",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", required=True, help="CSV to write")
    add_schema_options(parser, "sharing_ray")
    args = parser.parse_args(argv)
    options = {key: value for key, value in vars(args).items() if key != "out"}
    try:
        check_schema_options("sharing_ray", options)
    except ValueError as error:
        parser.error(str(error))
    args.layouts = [_layout(text) for text in args.layouts]
    rows = run(args)
    write_csv(rows, args.out)
    print_table(
        rows,
        ["workload", "mode", "nodes", "consumers_per_node", "per_consumer_batches_per_s",
         "cpu_ms_per_batch", "copies_per_node_per_batch"],
    )  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
