"""`echo` in Keras ``model.fit``: the epoch length is known, so no "ran out of data"."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from echo.tfdata import echo  # noqa: E402

pytestmark = pytest.mark.tf


@pytest.mark.parametrize("where", ["before_batch", "after_batch"])
def test_model_fit_runs_every_epoch_in_full_without_a_warning(where, caplog):
    x = np.arange(64, dtype="float32").reshape(-1, 1) / 64
    ds = tf.data.Dataset.from_tensor_slices((x, 2 * x))
    ds = ds.apply(echo(2)).batch(8) if where == "before_batch" else ds.batch(8).apply(echo(2))
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=1)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        history = model.fit(ds, epochs=3, verbose=0)
    messages = [str(w.message) for w in caught] + [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "ran out of data" in m], messages
    assert len(history.history["loss"]) == 3
    assert int(model.optimizer.iterations.numpy()) == 3 * 16  # 128 echoed examples / 8
