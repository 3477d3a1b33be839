"""The broker settings the log cleaner runs on, read afresh every round (they are dynamic)."""

from __future__ import annotations

from typing import Final, Protocol

import attrs

#: Java's ``Double.MAX_VALUE``, Kafka's default ``log.cleaner.io.max.bytes.per.second``.
UNLIMITED_RATE: Final = 1.7976931348623157e308


class BrokerSettings(Protocol):
    """What the cleaner reads from the broker's live configuration."""

    def get_int(self, name: str) -> int: ...
    def get_float(self, name: str) -> float: ...
    def get_bool(self, name: str) -> bool: ...


@attrs.frozen
class CleanerSettings:
    """``log.cleaner.*`` as the cleaner uses them (Kafka's ``CleanerConfig``)."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 134217728
    io_buffer_load_factor: float = 0.9
    io_buffer_size: int = 524288
    max_io_bytes_per_second: float = UNLIMITED_RATE
    backoff_ms: int = 15000

    @classmethod
    def from_broker(cls, config: BrokerSettings) -> CleanerSettings:
        return cls(
            enable=config.get_bool("log.cleaner.enable"),
            threads=config.get_int("log.cleaner.threads"),
            dedupe_buffer_size=config.get_int("log.cleaner.dedupe.buffer.size"),
            io_buffer_load_factor=config.get_float("log.cleaner.io.buffer.load.factor"),
            io_buffer_size=config.get_int("log.cleaner.io.buffer.size"),
            max_io_bytes_per_second=config.get_float("log.cleaner.io.max.bytes.per.second"),
            backoff_ms=config.get_int("log.cleaner.backoff.ms"),
        )

    @property
    def memory_per_thread(self) -> int:
        """Each thread's share of ``log.cleaner.dedupe.buffer.size``."""
        return self.dedupe_buffer_size // max(self.threads, 1)
