"""The broker's log cleaner: ``log.cleaner.threads`` threads compacting logs, and its metrics.

Kafka's ``LogCleaner``. Every thread asks the manager for the dirtiest compacted log, cleans it
one round, and sleeps ``log.cleaner.backoff.ms`` when there is nothing to do. Leaders and
followers are cleaned alike: each replica compacts its own copy. The threads share one
throttler, so ``log.cleaner.io.max.bytes.per.second`` bounds their total disk traffic. A log
whose round fails is set aside as uncleanable (one warning, with the reason) and the others go
on.

Metrics, with Kafka's names: ``LogCleaner`` max-buffer-utilization-percent,
cleaner-recopy-percent, max-clean-time-secs, max-compaction-delay-secs and DeadThreadCount;
``LogCleanerManager`` max-dirty-percent, time-since-last-run-ms, and
uncleanable-partitions-count per ``logDirectory``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ...metrics import MetricName, MetricsScope
from .cleaning import Cleaner, CleaningAbortedError
from .manager import LogCleanerManager
from .offset_map import OffsetMap
from .settings import CleanerSettings
from .stats import CleanerStats
from .swap import StepHook
from .throttler import Throttler

if TYPE_CHECKING:
    from ..partition_log import PartitionLog

log = logging.getLogger(__name__)

METRICS_GROUP: Final = "LogCleaner"
MANAGER_METRICS_GROUP: Final = "LogCleanerManager"


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LogCleaner:
    """Cleaner threads over the logs ``logs()`` returns; start once, stop once (or reconfigure)."""

    def __init__(
        self,
        settings: Callable[[], CleanerSettings],
        logs: Callable[[], Iterable[PartitionLog]],
        *,
        metrics: MetricsScope | None = None,
        log_dirs: Sequence[Path] = (),
        clock: Callable[[], int] = _wall_clock_ms,
        name: str = "kafka-log-cleaner-thread",
        hook: StepHook | None = None,
    ) -> None:
        self._settings = settings
        self.manager = LogCleanerManager(logs)
        self._clock = clock
        self._name = name
        self._hook = hook
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lifecycle = threading.Lock()
        self._throttler = Throttler(
            lambda: self._settings().max_io_bytes_per_second, sleep=self._stop.wait
        )
        self._stats_lock = threading.Lock()
        #: The last round's stats of each thread, by thread index.
        self._last_stats: dict[int, CleanerStats] = {}
        self._last_run_ms = clock()
        self._dead_threads = 0
        self._cleaned = threading.Condition()
        self._metrics = metrics
        self._metric_names: list[MetricName] = []
        if metrics is not None:
            self._register_metrics(metrics, log_dirs)

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Starts ``log.cleaner.threads`` threads (none when ``log.cleaner.enable`` is false)."""
        with self._lifecycle:
            settings = self._settings()
            if not settings.enable or self._threads:
                return
            self._stop.clear()
            for index in range(settings.threads):
                thread = threading.Thread(
                    target=self._run, args=(index,), name=f"{self._name}-{index}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

    def stop(self) -> None:
        """Stops the threads; a round under way is abandoned (its ``.cleaned`` files deleted)."""
        with self._lifecycle:
            self._stop.set()
            for thread in self._threads:
                thread.join()
            self._threads.clear()

    def close(self) -> None:
        self.stop()
        if self._metrics is not None:
            for name in self._metric_names:
                self._metrics.remove(name)
            self._metric_names.clear()

    def reconfigure(self) -> None:
        """Applies a new thread count: the threads restart, as Kafka's do."""
        self.stop()
        self.start()

    @property
    def thread_count(self) -> int:
        return len(self._threads)

    # --- work -------------------------------------------------------------------------------

    def _run(self, index: int) -> None:
        try:
            while not self._stop.is_set():
                if not self.clean_once(index):
                    self._stop.wait(self._settings().backoff_ms / 1000)
        except BaseException:
            with self._stats_lock:
                self._dead_threads += 1
            log.exception("log cleaner thread %d died", index)
            raise

    def clean_once(self, index: int = 0) -> bool:
        """Cleans the dirtiest log one round, in this thread; False when none needed it."""
        now = self._clock()
        try:
            target = self.manager.grab_filthiest_log(now)
        except Exception:
            log.exception("choosing a log to clean failed")
            return False
        self._last_run_ms = now
        if target is None:
            return False
        plog = target.log
        settings = self._settings()
        cleaner = Cleaner(
            OffsetMap(settings.memory_per_thread, settings.io_buffer_load_factor),
            throttler=self._throttler,
            io_buffer_size=settings.io_buffer_size,
            check_done=self._check_done,
            hook=self._hook,
        )
        try:
            end, stats = cleaner.clean(target)
        except CleaningAbortedError as err:
            log.info("cleaning of %s stopped: %s", plog.directory, err)
            self.manager.abort(plog)
            return True
        except Exception as err:
            if plog.closed:
                self.manager.abort(plog)
                return True
            self.manager.mark_uncleanable(plog)
            log.warning(
                "%s is uncleanable and is left as it is until the broker restarts: %s",
                plog.directory,
                err,
                exc_info=True,
            )
            return True
        self.manager.done_cleaning(plog, end, stats.latest_delete_horizon)
        with self._stats_lock:
            self._last_stats[index] = stats
        log.info(
            "cleaned %s up to offset %d (dirty ratio %.2f): %s",
            plog.directory,
            end,
            target.dirty_ratio,
            stats.summary(),
        )
        with self._cleaned:
            self._cleaned.notify_all()
        return True

    def _check_done(self, plog: PartitionLog) -> None:
        if self._stop.is_set():
            raise CleaningAbortedError("the log cleaner is stopping")

    def await_cleaned(self, plog: PartitionLog, offset: int, timeout: float) -> bool:
        """Waits until ``plog`` is clean below ``offset`` (tests and tools)."""
        deadline = time.monotonic() + timeout
        with self._cleaned:
            while True:
                checkpoint = plog.cleaner_checkpoint
                if checkpoint is not None and checkpoint >= offset:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cleaned.wait(min(left, 0.1))

    # --- metrics ----------------------------------------------------------------------------

    def _register_metrics(self, metrics: MetricsScope, log_dirs: Sequence[Path]) -> None:
        gauges: list[tuple[MetricName, Callable[[], float | int]]] = [
            (MetricName(METRICS_GROUP, "max-buffer-utilization-percent"), self._max_buffer_use),
            (MetricName(METRICS_GROUP, "cleaner-recopy-percent"), self._recopy_percent),
            (MetricName(METRICS_GROUP, "max-clean-time-secs"), self._max_clean_time),
            (
                MetricName(METRICS_GROUP, "max-compaction-delay-secs"),
                lambda: self.manager.max_compaction_delay_ms // 1000,
            ),
            (MetricName(METRICS_GROUP, "DeadThreadCount"), lambda: self._dead_threads),
            (
                MetricName(MANAGER_METRICS_GROUP, "max-dirty-percent"),
                lambda: int(100 * self.manager.max_dirty_ratio),
            ),
            (
                MetricName(MANAGER_METRICS_GROUP, "time-since-last-run-ms"),
                lambda: max(self._clock() - self._last_run_ms, 0),
            ),
        ]
        for directory in log_dirs:
            path = str(directory)
            gauges.append(
                (
                    MetricName(
                        MANAGER_METRICS_GROUP,
                        "uncleanable-partitions-count",
                        {"logDirectory": path},
                    ),
                    lambda path=path: self.manager.uncleanable_count(path),  # type: ignore[misc]
                )
            )
        for name, read in gauges:
            metrics.gauge(name, read)
            self._metric_names.append(name)

    def _stats(self) -> list[CleanerStats]:
        with self._stats_lock:
            return list(self._last_stats.values())

    def _max_buffer_use(self) -> int:
        return int(max((100 * s.buffer_utilization for s in self._stats()), default=0))

    def _recopy_percent(self) -> int:
        stats = self._stats()
        if not stats:
            return 0
        return int(100 * sum(s.recopy_ratio for s in stats) / len(stats))

    def _max_clean_time(self) -> int:
        return int(max((s.elapsed_s for s in self._stats()), default=0))
