"""One way for a test to wait for something that happens eventually."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: Long enough for a busy two-core CI machine; a passing test never waits this long.
PATIENCE_S = 60.0


def wait_until(condition: Callable[[], object], what: str, timeout: float = PATIENCE_S) -> Any:
    """Polls ``condition`` until it is truthy (returns its value) or fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
