"""Fixtures of the partition-log tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
from tierlog.log import LogConfig, PartitionLog

from .support import Clock, open_log


class LogFactory(Protocol):
    def __call__(
        self,
        directory: Path,
        config: dict[str, Any] | LogConfig | None = ...,
        clock: Clock | None = ...,
    ) -> PartitionLog: ...


@pytest.fixture
def make_log() -> Iterator[LogFactory]:
    """Opens partition logs and closes whichever are still open when the test ends."""
    opened: list[PartitionLog] = []

    def factory(
        directory: Path,
        config: dict[str, Any] | LogConfig | None = None,
        clock: Clock | None = None,
    ) -> PartitionLog:
        log = open_log(directory, config, clock)
        opened.append(log)
        return log

    yield factory
    for log in opened:
        log.close()
