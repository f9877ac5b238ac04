"""`EchoNode` inside a real ``torchdata.nodes`` graph: epochs and exact resume."""

from __future__ import annotations

import pytest

nodes = pytest.importorskip(
    "torchdata.nodes", reason="torchdata is not installed (the `dev` extra)"
)

from echo.torch.nodes import EchoNode  # noqa: E402


def _loader():
    read = nodes.Mapper(nodes.IterableWrapper(range(40)), lambda i: i * 10)
    echoed = EchoNode(read, 1.5, shuffle_buffer=5, seed=3)
    return nodes.Loader(nodes.Batcher(echoed, batch_size=4, drop_last=False))


def test_each_epoch_draws_anew_and_counts_are_kept():
    loader = _loader()
    epochs = [list(loader) for _ in range(2)]
    assert epochs[0] != epochs[1]
    for epoch in epochs:
        values = [v for batch in epoch for v in batch]
        assert set(values) == {i * 10 for i in range(40)}
        assert 40 <= len(values) <= 80


@pytest.mark.parametrize("stop_at", [0, 3, 9])
def test_a_loader_resumes_mid_epoch_exactly(stop_at):
    reference = _loader()
    epochs = [list(reference) for _ in range(2)]
    loader = _loader()
    it = iter(loader)
    head = [next(it) for _ in range(stop_at)]
    state = loader.state_dict()
    resumed = _loader()
    resumed.load_state_dict(state)
    assert head + list(resumed) == epochs[0]
    assert list(resumed) == epochs[1]


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="factor"):
        EchoNode(nodes.IterableWrapper(range(3)), 0.5)
    with pytest.raises(ValueError, match="shuffle_buffer"):
        EchoNode(nodes.IterableWrapper(range(3)), 2, shuffle_buffer=-1)
