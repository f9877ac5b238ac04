"""CUDA batches through CUDA IPC handles (needs a GPU; skipped without one).

Producers and consumers run in spawned processes (CUDA cannot be used in a forked child of a
process that initialised it). A child reports what it saw, or the error it hit, through a
queue, so a failure is an assertion here rather than a timeout.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import traceback
from pathlib import Path

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
SPAWN = mp.get_context("spawn")
BATCHES, ROWS = 6, 8
DEVICE = "cuda"  # where the batches are shared


def make_batch(index: int) -> dict:
    """Producer batch ``index`` on the CPU: several dtypes, nesting, a non-tensor value."""
    generator = torch.Generator().manual_seed(index)
    return {
        "ids": torch.arange(index * ROWS, (index + 1) * ROWS),
        "images": torch.randint(0, 256, (ROWS, 3, 16, 16), dtype=torch.uint8, generator=generator),
        "pair": (
            torch.randn(ROWS, 5, generator=generator).to(torch.bfloat16),
            torch.randn(ROWS, 2, 3, generator=generator),
        ),
        "epoch_name": "generated",
    }


def _report(results, work, *args) -> None:
    try:
        results.put(("ok", work(*args)))
    except BaseException:
        results.put(("error", traceback.format_exc()))


def _serve(endpoints, loader, consumers, device) -> None:
    from sharing import Producer

    with Producer(loader, epochs=1, consumers=consumers, device=device) as producer:
        endpoints.put(producer.endpoint)
        producer.serve()


def _leaves(batch) -> list:
    if isinstance(batch, dict):
        return [leaf for value in batch.values() for leaf in _leaves(value)]
    if isinstance(batch, (tuple, list)):
        return [leaf for value in batch for leaf in _leaves(value)]
    return [batch]


def _compare(received, expected) -> list[str]:
    """What differs between a received batch and the producer's (on the CPU): nothing if all
    tensors are on the sharing device with the producer's dtype, shape and values."""
    problems = []
    for got, want in zip(_leaves(received), _leaves(expected), strict=True):
        if not isinstance(want, torch.Tensor):
            if got != want:
                problems.append(f"value {got!r} != {want!r}")
        elif got.device.type != DEVICE or got.dtype != want.dtype or got.shape != want.shape:
            problems.append(f"{got.device} {got.dtype} {tuple(got.shape)} for {want.dtype}")
        elif not torch.equal(got.cpu(), want):
            problems.append(f"different values in a {want.dtype} {tuple(want.shape)} tensor")
    return problems


def _take(batches: list, start: int, rows: int):
    """Rows ``start:start + rows`` of ``batches`` joined, in their structure."""
    first = batches[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(batches)[start : start + rows]
    if isinstance(first, dict):
        return {key: _take([b[key] for b in batches], start, rows) for key in first}
    if isinstance(first, tuple):
        return tuple(_take(list(parts), start, rows) for parts in zip(*batches, strict=True))
    return first


def _consume_and_compare(endpoint, batch_size):
    """Every batch received, compared with the producer's (sliced or joined to batch_size)."""
    from sharing import Consumer

    expected = [make_batch(i) for i in range(BATCHES)]
    rows = batch_size or ROWS
    ids, problems = [], []
    for index, batch in enumerate(Consumer(endpoint, batch_size=batch_size)):
        want = _take(expected, index * rows, rows)
        problems += [f"batch {index}: {p}" for p in _compare(batch, want)]
        ids.extend(batch["ids"].cpu().tolist())
    return ids, problems


def _start(target, *args) -> mp.Process:
    process = SPAWN.Process(target=target, args=args)
    process.start()
    return process


def _outcomes(results, count: int) -> list:
    outcomes = []
    for _ in range(count):
        status, value = results.get(timeout=180)
        assert status == "ok", value
        outcomes.append(value)
    return outcomes


def _join(processes) -> None:
    for process in processes:
        process.join(60)
        if process.is_alive():
            process.kill()
    assert all(p.exitcode == 0 for p in processes), [p.exitcode for p in processes]


def test_cuda_batches_arrive_intact_at_every_consumer_once():
    endpoints, results = SPAWN.Queue(), SPAWN.Queue()
    batches = [make_batch(i) for i in range(BATCHES)]
    producer = _start(_serve, endpoints, batches, 2, DEVICE)
    endpoint = endpoints.get(timeout=120)
    consumers = [
        _start(_report, results, _consume_and_compare, endpoint, size) for size in (None, 4)
    ]
    outcomes = _outcomes(results, len(consumers))
    _join([producer, *consumers])
    for ids, problems in outcomes:
        assert problems == []
        assert sorted(ids) == ids == list(range(BATCHES * ROWS))


class _Views:
    """Batches that are views into one CUDA storage at different offsets, made on the GPU in
    the producer's process (a loader that yields CUDA tensors itself)."""

    def __len__(self) -> int:
        return BATCHES

    def __iter__(self):
        base = torch.arange(BATCHES * 40, dtype=torch.float32, device=DEVICE)
        for i in range(BATCHES):
            block = base[i * 40 : (i + 1) * 40]
            yield block[3:11], block[20:40].view(4, 5)


def _consume_views(endpoint):
    from sharing import Consumer

    # Plain lists back: a CPU tensor in a multiprocessing queue needs its sender alive.
    return [tuple(t.cpu().tolist() for t in batch) for batch in Consumer(endpoint)]


def test_views_into_one_cuda_storage_keep_their_offsets():
    endpoints, results = SPAWN.Queue(), SPAWN.Queue()
    producer = _start(_serve, endpoints, _Views(), 1, None)
    consumer = _start(_report, results, _consume_views, endpoints.get(timeout=120))
    (received,) = _outcomes(results, 1)
    _join([producer, consumer])
    base = torch.arange(BATCHES * 40, dtype=torch.float32)
    assert received == [
        (
            base[i * 40 + 3 : i * 40 + 11].tolist(),
            base[i * 40 + 20 : (i + 1) * 40].view(4, 5).tolist(),
        )
        for i in range(BATCHES)
    ]


def _consume_slowly(endpoint):
    """Queue slow GPU work on each batch and move on without waiting for it, as a training
    loop does; the sums are read only at the end."""
    from sharing import Consumer

    sums = []
    for batch in Consumer(endpoint):
        torch.cuda._sleep(20_000_000)  # ~10 ms of GPU time before the batch is read
        sums.append(batch["images"].double().sum())
    return [float(s) for s in sums]


def test_released_batches_stay_intact_while_queued_gpu_work_reads_them():
    endpoints, results = SPAWN.Queue(), SPAWN.Queue()
    batches = [make_batch(i) for i in range(BATCHES)] * 4  # the producer keeps allocating
    producer = _start(_serve, endpoints, batches, 1, DEVICE)
    consumer = _start(_report, results, _consume_slowly, endpoints.get(timeout=120))
    (sums,) = _outcomes(results, 1)
    _join([producer, consumer])
    assert sums == [float(b["images"].double().sum()) for b in batches]


def _with_toy(toy_root: str, work, *args):
    """Run ``work`` in a spawned child after registering the toy workload there."""
    sys.path.insert(0, toy_root)
    from experiments import registry

    registry.discover("toy_workloads")
    return work(*args)


def _serve_toy(endpoints, workload):
    from experiments.consume import workload_loader
    from sharing import Producer

    with Producer(
        workload_loader(workload, seed=0), epochs=None, consumers=2, device=DEVICE
    ) as producer:
        endpoints.put(producer.endpoint)
        producer.serve()


def _train(argv):
    import json

    from experiments.run import main

    status = main(argv)
    out = argv[argv.index("--out") + 1]
    return status, json.loads(Path(out).read_text())


def test_harness_runs_train_on_cuda_batches_from_a_shared_producer(tmp_path, toy_workload):
    toy_root = str(Path(sys.modules["toy_workloads"].__file__).parents[1])
    endpoints, results = SPAWN.Queue(), SPAWN.Queue()
    producer = _start(_with_toy, toy_root, _serve_toy, endpoints, toy_workload)
    endpoint = endpoints.get(timeout=120)
    trainers = []
    for lr in ("0.1", "0.05"):
        argv = ["--workload", toy_workload, "--lr", lr, "--device", DEVICE, "--threads", "1"]
        argv += ["--consume", endpoint, "--out", str(tmp_path / f"lr{lr}.json")]
        trainers.append(_start(_report, results, _with_toy, toy_root, _train, argv))
    outcomes = _outcomes(results, len(trainers))
    _join(trainers)
    producer.terminate()
    producer.join(30)
    for status, record in outcomes:
        assert status == 0 and record["reached"]
        assert record["device"].startswith(DEVICE) and record["consume"] == endpoint
