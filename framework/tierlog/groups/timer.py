"""One thread running the coordinator's timeouts: sessions, rebalances, the initial delay,
offset expiry.

Kafka's coordinator keeps a timer per shard; one heap for the broker is enough here, since a
task only takes its shard's lock. Scheduling under a key replaces that key's earlier task, as
rescheduling a member's heartbeat deadline must; a replaced or cancelled task never runs.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Hashable

log = logging.getLogger(__name__)


class Timer:
    def __init__(self, name: str) -> None:
        self._heap: list[tuple[float, int, Hashable]] = []
        self._tasks: dict[Hashable, tuple[int, Callable[[], None]]] = {}
        self._sequence = itertools.count()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def schedule(self, key: Hashable, delay_ms: float, task: Callable[[], None]) -> None:
        """Runs ``task`` after ``delay_ms``, replacing any task scheduled under ``key``."""
        with self._cond:
            if self._closed:
                return
            seq = next(self._sequence)
            self._tasks[key] = (seq, task)
            heapq.heappush(self._heap, (time.monotonic() + max(delay_ms, 0) / 1000, seq, key))
            self._cond.notify()

    def cancel(self, key: Hashable) -> None:
        with self._cond:
            self._tasks.pop(key, None)

    def cancel_where(self, match: Callable[[Hashable], bool]) -> None:
        """Cancels every task whose key ``match`` selects (a shard going away)."""
        with self._cond:
            for key in [k for k in self._tasks if match(k)]:
                del self._tasks[key]

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._tasks.clear()
            self._cond.notify()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cond:
                task = None
                while task is None:
                    if self._closed:
                        return
                    now = time.monotonic()
                    if not self._heap:
                        self._cond.wait()
                        continue
                    due, seq, key = self._heap[0]
                    if due > now:
                        self._cond.wait(due - now)
                        continue
                    heapq.heappop(self._heap)
                    current = self._tasks.get(key)
                    if current is not None and current[0] == seq:
                        del self._tasks[key]
                        task = current[1]
            try:
                task()
            except Exception:
                log.exception("coordinator timer task %r failed", key)
