"""Stateful-test setup: silence the adapter's logging of the faults the machines inject.

The machines inject put, get and build failures on purpose; the reference
adapter logs each with a traceback, which would bury a failure report under
thousands of expected log lines.
"""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(autouse=True)
def _quiet_injected_faults(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="chunk_adapter")
