"""`Echo` and `build_pipeline` under DDP: a real 2-process gloo group on CPU."""

from __future__ import annotations

import json
import multiprocessing
import os
from collections import Counter

import pytest
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

from echo.torch import Echo, build_pipeline, sum_over_ranks

N = 51  # not a multiple of 2: each rank reads 26 (one index padded, like DistributedSampler)

pytestmark = pytest.mark.skipif(
    not dist.is_available() or not dist.is_gloo_available(), reason="torch without gloo"
)


def _rank_main(rank: int, world_size: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size
    )
    try:
        stage = Echo(list(range(N)), 2, shuffle_buffer=4, seed=0)  # rank from torch.distributed
        echoed = [int(v) for b in DataLoader(stage, batch_size=5, num_workers=2) for v in b]
        explicit = Echo(list(range(N)), 2, shuffle_buffer=4, seed=0, rank=rank, world_size=2)
        rows = [torch.tensor([i]) for i in range(N)]
        loader = build_pipeline(rows, point="before_augment", factor=1.5, batch_size=4,
                                num_workers=2, seed=0)  # fmt: skip
        piped = [int(v) for b in loader for v in b.flatten()]
        result = {
            "echoed": echoed,
            "explicit_matches": list(explicit) == list(Echo(list(range(N)), 2, shuffle_buffer=4)),
            "fresh": stage.fresh,
            "emitted": stage.emitted,
            "fresh_total": sum_over_ranks(stage.fresh),
            "piped": piped,
            "fresh_examples": loader.fresh_examples,
            "steps": loader.steps,
            "fresh_examples_total": sum_over_ranks(loader.fresh_examples),
        }
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(result, f)
    finally:
        dist.destroy_process_group()


def test_two_ranks_read_disjoint_padded_shards_with_exact_counts(tmp_path):
    context = multiprocessing.get_context("fork")
    ranks = [
        context.Process(target=_rank_main, args=(r, 2, str(tmp_path / "init"), str(tmp_path)))
        for r in range(2)
    ]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(timeout=120)
    assert [p.exitcode for p in ranks] == [0, 0]
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    shards = [set(r["echoed"]) for r in results]
    assert shards[0] | shards[1] == set(range(N))
    assert len(shards[0] & shards[1]) == 1  # the padded index
    for result, shard in zip(results, shards, strict=True):
        assert (result["fresh"], result["emitted"]) == (26, 52)
        assert set(Counter(result["echoed"]).values()) == {2} and len(shard) == 26
        assert result["fresh_total"] == 52
        assert result["fresh_examples"] == 26
        assert result["fresh_examples_total"] == 52
        assert result["explicit_matches"]  # rank=/world_size= read what the group's rank reads
    assert results[0]["steps"] == results[1]["steps"]  # ranks step together: no DDP hang
    assert set(results[0]["piped"]) | set(results[1]["piped"]) == set(range(N))


def test_explicit_ranks_cover_the_source_and_need_both_arguments():
    whole = sorted(list(Echo(list(range(10)), 1, rank=0, world_size=2)) +
                   list(Echo(list(range(10)), 1, rank=1, world_size=2)))  # fmt: skip
    assert whole == list(range(10))
    with pytest.raises(ValueError, match="world_size"):
        Echo(range(3), 2, rank=1)
    assert sum_over_ranks(7) == 7  # no process group: this process is the whole job
