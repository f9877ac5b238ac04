"""``python -m sharing serve``: its options are `Producer`'s keywords (their defaults and
descriptions taken from there), and ``consumers``' former name still works, with a warning."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from sharing import Consumer, Producer
from sharing.__main__ import parse_args

KEYWORDS = {
    name: parameter
    for name, parameter in inspect.signature(Producer).parameters.items()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY
}


def serve(*options: str):
    return parse_args(["serve", "--loader", "module:function", *options])


def test_every_producer_keyword_is_an_option_with_the_producers_default():
    args = vars(serve())
    assert set(KEYWORDS) <= set(args)
    assert {name: args[name] for name in KEYWORDS} == {
        name: parameter.default for name, parameter in KEYWORDS.items()
    }


def test_the_help_carries_the_producers_descriptions():
    result = subprocess.run(
        [sys.executable, "-m", "sharing", "serve", "--help"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    text = " ".join(result.stdout.split())
    for name in KEYWORDS:
        assert f"--{name.replace('_', '-')}" in text
    assert "How many consumers to wait for before the first batch. Default 1." in text
    assert "--wait-for" not in text  # a former name is accepted, not offered


def test_options_parse_to_the_producers_types_and_epochs_0_is_until_stopped():
    args = serve("--epochs", "0", "--consumers", "3", "--join-grace-s", "0.5", "--device", "cpu")
    assert (args.epochs, args.consumers, args.join_grace_s, args.device) == (None, 3, 0.5, "cpu")
    assert serve("--epochs", "2").epochs == 2
    assert serve("--log-every", "5").log_every_s == 5.0  # an unambiguous prefix, as before


def test_the_former_option_and_keyword_still_work_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="--wait-for is now --consumers"):
        assert serve("--wait-for", "2").consumers == 2
    with pytest.warns(DeprecationWarning, match="wait_for= is now consumers="):
        producer = Producer([], wait_for=2)
    with producer:
        assert producer.consumers == 2
    with pytest.raises(TypeError, match="consumers= alone"):
        Producer([], consumers=2, wait_for=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Producer([], consumers=2).close()


def test_the_command_line_waits_for_its_consumers():
    here = Path(__file__).parent
    command = [
        sys.executable, "-m", "sharing", "serve", "--loader", "test_sharing:make_loader",
        "--loader-kwargs", '{"samples": 32}', "--consumers", "2", "--log-level", "WARNING",
    ]  # fmt: skip
    path = [str(here), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path)))
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        endpoint = process.stdout.readline().strip()
        consumers = [Consumer(endpoint), Consumer(endpoint)]  # 2 batches: within max_lag
        ids = [[i for batch in consumer for i in batch["id"].tolist()] for consumer in consumers]
        assert ids == [list(range(32))] * 2
        assert process.wait(timeout=20) == 0
    finally:
        process.kill()
