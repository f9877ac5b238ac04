"""Distributed (DDP) ranks for the echo stages, and summing counts over them."""

from __future__ import annotations

import torch
import torch.distributed as dist

from echo.core import check_int

__all__ = ["resolve_rank", "sum_over_ranks"]


def _initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def resolve_rank(rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
    """This process's ``(rank, world_size)``.

    Args:
        rank: This process's rank. Default None: ``torch.distributed``'s when a process group
            is initialised, else 0.
        world_size: Number of processes. Default None: ``torch.distributed``'s when a process
            group is initialised, else 1.

    Raises:
        ValueError: Only one of the two is given, or ``rank`` is not in ``[0, world_size)``.
    """
    if (rank is None) != (world_size is None):
        raise ValueError(
            f"rank={rank!r} and world_size={world_size!r}: pass both or neither "
            "(neither: taken from torch.distributed when it is initialised)"
        )
    if rank is None:
        return (dist.get_rank(), dist.get_world_size()) if _initialized() else (0, 1)
    world_size = check_int(world_size, "world_size", minimum=1)
    rank = check_int(rank, "rank")
    if rank >= world_size:
        raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")
    return rank, world_size


def sum_over_ranks(value: int) -> int:
    """The sum of ``value`` over all ranks (an all-reduce; every rank must call it).

    Use it for the study's fresh-example count under DDP: each rank's ``fresh`` /
    ``fresh_examples`` counts its own disjoint shard exactly, so the sum is the whole job's.
    Without an initialised process group it returns ``value``.
    """
    if not _initialized():
        return int(value)
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    if device == "cuda":
        device = f"cuda:{torch.cuda.current_device()}"
    total = torch.tensor([int(value)], dtype=torch.int64, device=device)
    dist.all_reduce(total)
    return int(total.item())
