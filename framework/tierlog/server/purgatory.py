"""Kafka's delayed-operation purgatory: requests that wait for a condition or a deadline.

A delayed operation (a fetch waiting for ``min_bytes``, later a remote fetch waiting for its
read, a produce waiting for ISR acks) is tried at once; if it cannot complete it is watched under
keys (usually partitions) and tried again whenever something happens to a key
(:meth:`DelayedOperationPurgatory.check_and_complete`), until it completes or its delay expires
on the purgatory's timer thread. Completion happens exactly once, whoever gets there first.
"""

from __future__ import annotations

import abc
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)


class DelayedOperation(abc.ABC):
    """An operation that completes when :meth:`try_complete` succeeds or after ``delay_ms``."""

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = max(0, delay_ms)
        self._lock = threading.Lock()
        self._completed = threading.Event()

    @abc.abstractmethod
    def try_complete(self) -> bool:
        """Checks the condition; if it holds, returns :meth:`force_complete`'s result."""

    @abc.abstractmethod
    def on_complete(self) -> None:
        """Produces the result; called exactly once, on whichever thread completes it."""

    def on_expiration(self) -> None:  # noqa: B027 - optional hook
        """Called after :meth:`on_complete` when the operation completed by expiring."""

    def force_complete(self) -> bool:
        """Completes now unless already completed; returns whether this call completed it."""
        with self._lock:
            if self._completed.is_set():
                return False
            try:
                self.on_complete()
            finally:
                self._completed.set()
            return True

    @property
    def is_completed(self) -> bool:
        return self._completed.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until completed (or ``timeout`` seconds); returns whether it completed."""
        return self._completed.wait(timeout)

    def _safe_try_complete(self) -> bool:
        if self.is_completed:
            return True
        try:
            return self.try_complete()
        except Exception:
            log.exception("delayed operation %r failed; completing it", self)
            return self.force_complete()


_Op = TypeVar("_Op", bound=DelayedOperation)


class DelayedOperationPurgatory(Generic[_Op]):
    """Watches delayed operations by key and expires them on a timer thread."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, list[_Op]] = {}
        self._lock = threading.Lock()
        self._timer_cv = threading.Condition()
        self._deadlines: list[tuple[float, int, _Op]] = []
        self._sequence = itertools.count()
        self._running = True
        #: Operations completed by their deadline rather than their condition (Kafka's
        #: ExpiresPerSec counts the same).
        self.expired = 0
        self._reaper = threading.Thread(
            target=self._expire_loop, name=f"ExpirationReaper-{name}", daemon=True
        )
        self._reaper.start()

    def try_complete_else_watch(self, operation: _Op, keys: Iterable[Hashable]) -> bool:
        """Completes ``operation`` now if it can, else watches it under ``keys`` until it can.

        Returns whether it completed now. The operation is tried a second time after it is
        watched, so an event between the first try and the watch is never missed.
        """
        if operation._safe_try_complete():
            return True
        watched = list(keys)
        with self._lock:
            if not self._running:
                operation.force_complete()
                return True
            for key in watched:
                self._watchers.setdefault(key, []).append(operation)
        if operation._safe_try_complete():
            self._unwatch(operation, watched)
            return True
        if operation.delay_ms == 0 or not watched:
            self._expire(operation)
            return True
        with self._timer_cv:
            deadline = time.monotonic() + operation.delay_ms / 1000
            heapq.heappush(self._deadlines, (deadline, next(self._sequence), operation))
            self._timer_cv.notify()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Tries every operation watched under ``key``; returns how many completed."""
        with self._lock:
            operations = list(self._watchers.get(key, ()))
        completed = 0
        for operation in operations:
            if not operation.is_completed and operation._safe_try_complete():
                completed += 1
        if completed:
            for operation in operations:
                if operation.is_completed:
                    self._forget(operation)
        elif operations:
            self._purge(key)
        return completed

    def _forget(self, operation: _Op) -> None:
        """Drops a completed operation from every key it was watched under."""
        with self._lock:
            for key in [k for k, ops in self._watchers.items() if operation in ops]:
                remaining = [op for op in self._watchers[key] if op is not operation]
                if remaining:
                    self._watchers[key] = remaining
                else:
                    del self._watchers[key]

    def watched(self) -> int:
        """How many operations are waiting (each counted once)."""
        with self._lock:
            return len(
                {id(op) for ops in self._watchers.values() for op in ops if not op.is_completed}
            )

    def shutdown(self) -> None:
        """Completes every waiting operation and stops the timer thread."""
        with self._lock:
            self._running = False
            pending = {id(op): op for ops in self._watchers.values() for op in ops}
            self._watchers.clear()
        for operation in pending.values():
            if operation.force_complete():
                operation.on_expiration()
        with self._timer_cv:
            self._timer_cv.notify()
        self._reaper.join()

    def _expire(self, operation: _Op) -> None:
        if operation.force_complete():
            with self._lock:
                self.expired += 1
            operation.on_expiration()

    def _purge(self, key: Hashable) -> None:
        with self._lock:
            remaining = [op for op in self._watchers.get(key, ()) if not op.is_completed]
            if remaining:
                self._watchers[key] = remaining
            else:
                self._watchers.pop(key, None)

    def _unwatch(self, operation: _Op, keys: Iterable[Hashable]) -> None:
        with self._lock:
            for key in keys:
                ops = self._watchers.get(key)
                if ops is not None and operation in ops:
                    ops.remove(operation)
                    if not ops:
                        del self._watchers[key]

    def _expire_loop(self) -> None:
        while True:
            with self._timer_cv:
                while self._running:
                    now = time.monotonic()
                    while self._deadlines and self._deadlines[0][2].is_completed:
                        heapq.heappop(self._deadlines)
                    if self._deadlines and self._deadlines[0][0] <= now:
                        break
                    timeout = self._deadlines[0][0] - now if self._deadlines else None
                    # A request may ask for 2**63 ms, longer than a thread can wait at once.
                    self._timer_cv.wait(
                        None if timeout is None else min(timeout, threading.TIMEOUT_MAX)
                    )
                if not self._running:
                    return
                _, _, operation = heapq.heappop(self._deadlines)
            self._expire(operation)
            self._forget(operation)
