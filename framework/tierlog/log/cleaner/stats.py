"""What one cleaning round did, for the log line and the ``LogCleaner`` metrics."""

from __future__ import annotations

import time

import attrs


@attrs.define
class CleanerStats:
    """Counts of one round (Kafka's ``CleanerStats``)."""

    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0
    #: The latest delete horizon written (-1: none): the round after it can drop tombstones.
    latest_delete_horizon: int = -1
    start_s: float = attrs.field(factory=time.monotonic)
    map_done_s: float = 0.0
    end_s: float = 0.0

    @property
    def elapsed_s(self) -> float:
        return max(self.end_s - self.start_s, 0.0)

    @property
    def recopy_ratio(self) -> float:
        """Bytes written over bytes read: how much of what was read had to be written again."""
        return self.bytes_written / self.bytes_read if self.bytes_read else 0.0

    def summary(self) -> str:
        mib = 1024 * 1024
        return (
            f"{self.bytes_read / mib:.1f} MiB read, {self.bytes_written / mib:.1f} MiB written "
            f"({100 * self.recopy_ratio:.1f}%), {self.messages_read} records read, "
            f"{self.messages_written} kept, {self.elapsed_s:.2f} s, "
            f"map {100 * self.buffer_utilization:.1f}% full"
        )
