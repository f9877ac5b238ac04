"""`sharing` as a new user first meets it: mistakes answered by errors that name the
argument, and no silent surprises."""

from __future__ import annotations

import pydoc
import re

import pytest
from sharing_checks import id_batches

from sharing import Consumer, Producer
from sharing.tensorsocket import TensorConsumer, TensorProducer

pytestmark = pytest.mark.timeout(90)


def test_an_endpoint_in_a_missing_folder_is_a_value_error_naming_it():
    with pytest.raises(ValueError) as error:
        Producer(id_batches(8, 4), endpoint="unix:/nonexistent-dir/x.sock")
    assert "endpoint='unix:/nonexistent-dir/x.sock'" in str(error.value)
    assert "/nonexistent-dir does not exist" in str(error.value)
    assert "unix:@NAME" in str(error.value)


@pytest.mark.parametrize("name", ["connect_timeout_s", "timeout_s"])
@pytest.mark.parametrize("value", [-1, 0, "10", float("nan")])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(name, value):
    message = f"{name} must be a number of seconds > 0"
    with Producer(id_batches(8, 4)) as producer, pytest.raises(ValueError, match=message):
        Consumer(producer.endpoint, **{name: value})


def test_from_dataset_without_a_batch_size_names_the_argument_not_an_internal_class():
    with pytest.raises(TypeError) as error:
        Producer.from_dataset(list(range(10)))
    assert "Producer.from_dataset() needs batch_size=" in str(error.value)
    assert "PooledLoader" not in str(error.value)


@pytest.mark.parametrize("cls", [TensorProducer, TensorConsumer])
def test_help_shows_the_ignored_arguments_as_ignored(cls):
    text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    assert "object at 0x" not in text
    assert re.search(r"heart_ports: [^=]+ = ignored", text)
