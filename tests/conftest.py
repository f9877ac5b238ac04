"""Shared fixtures and settings for the test suite."""

from __future__ import annotations

import os

# TensorFlow's C++ start-up banner drowns pytest's output; errors still show.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
