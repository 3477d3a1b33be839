"""The broker's periodic tasks, as Kafka names them: log-retention, isr-expiration and
highwatermark-checkpoint.

Each runs on its own daemon thread and reads its interval anew every round, so a dynamic config
change applies from the next one; all stop together when the broker stops.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)


class BackgroundTasks:
    """The periodic tasks of one broker; started once, stopped once."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._stop.clear()
        loops: list[tuple[str, Callable[[], None]]] = [
            ("log-retention", self._retention_loop),
            ("isr-expiration", self._isr_expiration_loop),
            ("highwatermark-checkpoint", self._high_watermark_checkpoint_loop),
        ]
        for name, loop in loops:
            thread = threading.Thread(
                target=loop, name=f"{name}-{self._broker.broker_id}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stops every task and waits for each to finish its round."""
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _every(self, key: str, scale: int) -> bool:
        """Waits one interval of ``key`` (in ms, divided by ``scale``); False once stopped."""
        return not self._stop.wait(self._broker.config.get_int(key) / scale)

    def _retention_loop(self) -> None:
        while self._every("log.retention.check.interval.ms", 1000):
            self._broker.check_retention()

    def _isr_expiration_loop(self) -> None:
        """Kafka's isr-expiration task: every half ``replica.lag.time.max.ms``."""
        while self._every("replica.lag.time.max.ms", 2000):
            self._broker.shrink_isrs()

    def _high_watermark_checkpoint_loop(self) -> None:
        """Kafka's highwatermark-checkpoint task: every replica's high watermark, periodically."""
        while self._every("replica.high.watermark.checkpoint.interval.ms", 1000):
            for partition in self._broker.hosted_replicas():
                try:
                    partition.log.checkpoint_high_watermark()
                except Exception as err:
                    log.warning("%s: high watermark checkpoint failed: %s", partition.log, err)
