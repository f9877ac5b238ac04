"""CUDA batches through CUDA IPC handles (needs a GPU; skipped without one).

Producers and consumers run in spawned processes (CUDA cannot be used in a forked child of a
process that initialised it), started through the `children` fixture, which stops any still
running when the test ends, so a failed test cannot hang pytest at exit. A child reports what
it saw, or the error it hit, through a queue, so a failure is an assertion here rather than a
timeout. The first test is the one most likely to catch corruption: ``scripts/gpu-check.sh``
runs this file first, in a pytest call of its own.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import traceback
from pathlib import Path

import pytest
import torch
from process_group import ProcessGroup

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
SPAWN = mp.get_context("spawn")
BATCHES, ROWS = 6, 8
DEVICE = "cuda"  # where the batches are shared
WAIT_S = 30  # for a child's endpoint or outcome: far above what a working one takes
SLEEP_CYCLES = 20_000_000  # GPU clock cycles: ~10 ms on an H100 or H200


@pytest.fixture
def children():
    """A `ProcessGroup` of spawned processes for the test; those still running at its end (a
    producer serving forever, a consumer of a failed test) are terminated, then killed."""
    group = ProcessGroup(SPAWN)
    yield group
    group.stop()


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


def _outcomes(results, count: int) -> list:
    outcomes = []
    for _ in range(count):
        status, value = results.get(timeout=WAIT_S)
        assert status == "ok", value
        outcomes.append(value)
    return outcomes


def _join(processes) -> None:
    for process in processes:
        process.join(WAIT_S)
    assert [p.exitcode for p in processes] == [0] * len(processes)


def _check_after_gpu_work(endpoint, sleep_cycles: int, count: int):
    """Queue ``sleep_cycles`` of GPU sleep on each batch, then a copy of each of its tensors,
    and move on without waiting, as a training loop does: the copies read the shared memory
    only after the sleep, when this consumer has asked for later batches and the other one
    may have released this batch. Every value of every copy is then checked."""
    from sharing import Consumer
    from sharing.layout import map_tensors

    copies = []
    for batch in Consumer(endpoint):
        torch.cuda._sleep(sleep_cycles)
        copies.append(map_tensors(batch, torch.Tensor.clone))
    torch.cuda.synchronize()
    expected = [make_batch(i) for i in range(count)]
    problems = [
        f"batch {index}: {problem}"
        for index, (got, want) in enumerate(zip(copies, expected, strict=False))
        for problem in _compare(got, want)
    ]
    return len(copies), problems


def test_two_consumers_at_different_speeds_read_intact_batches_after_their_gpu_work(children):
    # Each consumer releases a batch while its queued GPU work still has to read it, one
    # twice as late as the other; distinct batches, so a block reused too early shows.
    count = 4 * BATCHES
    endpoints, results = SPAWN.Queue(), SPAWN.Queue()
    producer = children.start(_serve, endpoints, [make_batch(i) for i in range(count)], 2, DEVICE)
    endpoint = endpoints.get(timeout=WAIT_S)
    consumers = [
        children.start(_report, results, _check_after_gpu_work, endpoint, cycles, count)
        for cycles in (SLEEP_CYCLES, 2 * SLEEP_CYCLES)
    ]
    outcomes = _outcomes(results, len(consumers))
    _join([producer, *consumers])
    assert outcomes == [(count, []), (count, [])]


def test_cuda_batches_arrive_intact_at_every_consumer_once(children):
    endpoints, results = SPAWN.Queue(), SPAWN.Queue()
    batches = [make_batch(i) for i in range(BATCHES)]
    producer = children.start(_serve, endpoints, batches, 2, DEVICE)
    endpoint = endpoints.get(timeout=WAIT_S)
    consumers = [
        children.start(_report, results, _consume_and_compare, endpoint, size) for size in (None, 4)
    ]
    outcomes = _outcomes(results, len(consumers))
    _join([producer, *consumers])
    for ids, problems in outcomes:
        assert problems == []
        assert sorted(ids) == ids == list(range(BATCHES * ROWS))


def _keep_after_leaving(endpoint, hold_s: float):
    """Keep every batch, leave, hold them ``hold_s`` longer, then check them: the producer
    must still be alive (its memory is what they are)."""
    import time

    from sharing import Consumer
    from sharing.endpoint import pid_alive

    consumer = Consumer(endpoint)
    kept = list(consumer)
    consumer.leave()
    time.sleep(hold_s)
    alive = pid_alive(consumer._producer_pid)
    expected = [make_batch(i) for i in range(len(kept))]
    problems = [
        f"batch {index}: {problem}"
        for index, (got, want) in enumerate(zip(kept, expected, strict=True))
        for problem in _compare(got, want)
    ]
    return len(kept), alive, problems


def test_the_producer_outlives_the_cuda_batches_a_consumer_keeps_after_leaving(children):
    endpoints, results = SPAWN.Queue(), SPAWN.Queue()
    producer = children.start(_serve, endpoints, [make_batch(i) for i in range(BATCHES)], 1, DEVICE)
    endpoint = endpoints.get(timeout=WAIT_S)
    consumer = children.start(_report, results, _keep_after_leaving, endpoint, 2.0)
    (outcome,) = _outcomes(results, 1)
    _join([producer, consumer])  # the producer ends once the consumer's tensors are gone
    assert outcome == (BATCHES, True, [])


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


def test_views_into_one_cuda_storage_keep_their_offsets(children):
    endpoints, results = SPAWN.Queue(), SPAWN.Queue()
    producer = children.start(_serve, endpoints, _Views(), 1, None)
    consumer = children.start(_report, results, _consume_views, endpoints.get(timeout=WAIT_S))
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
        torch.cuda._sleep(SLEEP_CYCLES)  # GPU time before the batch is read
        sums.append(batch["images"].double().sum())
    return [float(s) for s in sums]


def test_released_batches_stay_intact_while_queued_gpu_work_reads_them(children):
    endpoints, results = SPAWN.Queue(), SPAWN.Queue()
    batches = [make_batch(i) for i in range(BATCHES)] * 4  # the producer keeps allocating
    producer = children.start(_serve, endpoints, batches, 1, DEVICE)
    consumer = children.start(_report, results, _consume_slowly, endpoints.get(timeout=WAIT_S))
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


def test_harness_runs_train_on_cuda_batches_from_a_shared_producer(
    tmp_path, toy_workload, children
):
    toy_root = str(Path(sys.modules["toy_workloads"].__file__).parents[1])
    endpoints, results = SPAWN.Queue(), SPAWN.Queue()
    children.start(_with_toy, toy_root, _serve_toy, endpoints, toy_workload)  # serves forever
    endpoint = endpoints.get(timeout=WAIT_S)
    trainers = []
    for lr in ("0.1", "0.05"):
        argv = ["--workload", toy_workload, "--lr", lr, "--device", DEVICE, "--threads", "1"]
        argv += ["--consume", endpoint, "--out", str(tmp_path / f"lr{lr}.json")]
        trainers.append(children.start(_report, results, _with_toy, toy_root, _train, argv))
    outcomes = _outcomes(results, len(trainers))
    _join(trainers)
    for status, record in outcomes:
        assert status == 0 and record["reached"]
        assert record["device"].startswith(DEVICE) and record["consume"] == endpoint


def test_a_batch_of_too_many_cuda_tensors_is_refused_when_described():
    from sharing.layout import MAX_LAYOUT_BYTES, describe

    tensors = [torch.full((4,), float(i), device=DEVICE) for i in range(200)]
    describe(tensors[:100])  # up to about 520 bytes of layout each: 100 fit one message
    with pytest.raises(TypeError, match=f"at most {MAX_LAYOUT_BYTES} bytes"):
        describe(tensors)  # refused here, not when sent (which would stop the producer)
