"""Which compacted log to clean next, and the cleaning state of every log: Kafka's
``LogCleanerManager``.

For each log whose ``cleanup.policy`` includes ``compact`` it works out the dirty range (from
the cleaner checkpoint to the first uncleanable offset) and its dirty ratio; the log with the
highest ratio above ``min.cleanable.dirty.ratio`` is cleaned first, and a log whose oldest
dirty record has waited ``max.compaction.lag.ms`` is cleaned whatever its ratio. When no log
qualifies, one whose tombstones' delete horizon has passed is cleaned to drop them. A log
being cleaned is not handed to a second thread; a log that failed is set aside as uncleanable
(counted per log directory) until the broker restarts, and the others go on.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import attrs

from ...errors import KafkaStorageError
from ..log_config import LogConfig
from .cleaning import LogToClean

if TYPE_CHECKING:
    from ..partition_log import PartitionLog

log = logging.getLogger(__name__)

_LONG_MAX = (1 << 63) - 1


@attrs.define
class _LogState:
    in_progress: bool = False
    uncleanable: bool = False
    #: The latest delete horizon the cleaner wrote into this log (-1: none pending).
    latest_delete_horizon: int = -1


class LogCleanerManager:
    """The cleaning state of the logs ``logs()`` returns; safe to use from many threads."""

    def __init__(self, logs: Callable[[], Iterable[PartitionLog]]) -> None:
        self._logs = logs
        self._lock = threading.Lock()
        self._states: weakref.WeakKeyDictionary[PartitionLog, _LogState] = (
            weakref.WeakKeyDictionary()
        )
        #: Highest dirty ratio seen at the last selection (``max-dirty-percent`` / 100).
        self.max_dirty_ratio = 0.0
        #: Longest wait past ``max.compaction.lag.ms`` seen at the last selection, in ms.
        self.max_compaction_delay_ms = 0

    def _state(self, plog: PartitionLog) -> _LogState:
        state = self._states.get(plog)
        if state is None:
            state = self._states[plog] = _LogState()
        return state

    # --- selection --------------------------------------------------------------------------

    def grab_filthiest_log(self, now: int) -> LogToClean | None:
        """The log to clean next, marked in progress; None when none needs cleaning."""
        with self._lock:
            candidates: list[LogToClean] = []
            horizons: list[PartitionLog] = []
            max_ratio = 0.0
            max_delay = 0
            for plog in self._logs():
                config = plog.config
                if not config.compact or plog.closed:
                    continue
                state = self._state(plog)
                if state.in_progress or state.uncleanable:
                    continue
                try:
                    target, delay = cleanable_range(plog, now)
                except Exception as err:
                    if not plog.closed:
                        log.warning("cannot tell what to clean in %s: %s", plog.directory, err)
                    continue
                max_delay = max(max_delay, delay)
                max_ratio = max(max_ratio, target.dirty_ratio)
                if (target.needs_compaction_now and target.cleanable_bytes > 0) or (
                    target.cleanable_bytes > 0
                    and target.dirty_ratio > config.min_cleanable_dirty_ratio
                ):
                    candidates.append(target)
                elif 0 <= state.latest_delete_horizon <= now:
                    horizons.append(plog)
            self.max_dirty_ratio = max_ratio
            self.max_compaction_delay_ms = max_delay
            chosen: LogToClean | None = None
            if candidates:
                chosen = max(candidates, key=lambda t: (t.needs_compaction_now, t.dirty_ratio))
            elif horizons:
                self._state(horizons[0]).latest_delete_horizon = -1
                with contextlib.suppress(KafkaStorageError):  # closed meanwhile
                    chosen, _ = cleanable_range(horizons[0], now)
            if chosen is not None:
                self._state(chosen.log).in_progress = True
            return chosen

    # --- outcomes ---------------------------------------------------------------------------

    def done_cleaning(self, plog: PartitionLog, end_offset: int, latest_horizon: int) -> None:
        """A round ended at ``end_offset``: the checkpoint moves there."""
        with self._lock:
            state = self._state(plog)
            state.in_progress = False
            if latest_horizon >= 0:
                state.latest_delete_horizon = max(state.latest_delete_horizon, latest_horizon)
        with contextlib.suppress(KafkaStorageError):  # closed meanwhile: nothing to record
            plog.set_cleaner_checkpoint(end_offset)

    def abort(self, plog: PartitionLog) -> None:
        """A round stopped early; the log may be cleaned again later."""
        with self._lock:
            self._state(plog).in_progress = False

    def mark_uncleanable(self, plog: PartitionLog) -> None:
        with self._lock:
            state = self._state(plog)
            state.in_progress = False
            state.uncleanable = True

    def is_uncleanable(self, plog: PartitionLog) -> bool:
        with self._lock:
            state = self._states.get(plog)
            return state is not None and state.uncleanable

    def uncleanable_count(self, log_dir: str | None = None) -> int:
        """Logs set aside as uncleanable, in ``log_dir`` (a partition directory's parent)."""
        with self._lock:
            return sum(
                1
                for plog, state in self._states.items()
                if state.uncleanable
                and not plog.closed
                and (log_dir is None or str(plog.directory.parent) == log_dir)
            )

    def is_in_progress(self, plog: PartitionLog) -> bool:
        with self._lock:
            state = self._states.get(plog)
            return state is not None and state.in_progress


def cleanable_range(plog: PartitionLog, now: int) -> tuple[LogToClean, int]:
    """The next round of ``plog`` and how long (ms) its oldest dirty record waited past
    ``max.compaction.lag.ms`` (Kafka's ``cleanableOffsets`` and compaction delay)."""
    with plog._lock:
        return _cleanable_range_locked(plog, now)


def _cleanable_range_locked(plog: PartitionLog, now: int) -> tuple[LogToClean, int]:
    plog._check_open()
    config: LogConfig = plog._config
    segments = plog._segments
    bases = plog._bases
    log_start = plog._log_start_offset
    log_end = plog._next_offset
    last_stable = plog.last_stable_offset
    checkpoint = plog.cleaner_checkpoint
    if checkpoint is None or checkpoint < log_start:
        first_dirty = log_start
    elif checkpoint > log_end:
        log.warning(
            "%s: cleaner checkpoint %d is past the log end %d; cleaning from the log start",
            plog.directory,
            checkpoint,
            log_end,
        )
        first_dirty = log_start
    else:
        first_dirty = checkpoint
    rolled = [(segment, nxt) for segment, nxt in zip(segments[:-1], bases[1:], strict=True)]
    dirty_rolled = [(s, nxt) for s, nxt in rolled if nxt > first_dirty]
    first_uncleanable = min(last_stable, bases[-1])
    min_lag = config.min_compaction_lag_ms
    if min_lag > 0:
        for segment, _ in dirty_rolled:
            if segment.largest_timestamp > now - min_lag:
                first_uncleanable = min(first_uncleanable, segment.base_offset)
                break
    first_uncleanable = max(first_uncleanable, first_dirty)
    delay = 0
    needs_now = False
    max_lag = config.max_compaction_lag_ms
    if max_lag < _LONG_MAX or min_lag > 0:
        stamps = [t for s, _ in dirty_rolled if (t := s.first_batch_timestamp()) > 0]
        if stamps and max_lag < _LONG_MAX:
            waited = now - min(stamps) - max_lag
            if waited > 0:
                delay = waited
                needs_now = True
    clean_bytes = sum(s.size for s, nxt in rolled if nxt <= first_dirty)
    cleanable_bytes = sum(
        s.size for s, nxt in rolled if nxt > first_dirty and s.base_offset < first_uncleanable
    )
    target = LogToClean(
        plog, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes, needs_now
    )
    return target, delay
