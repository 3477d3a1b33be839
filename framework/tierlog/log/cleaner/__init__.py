"""The log cleaner: compaction of logs whose ``cleanup.policy`` includes ``compact``.

Kafka's semantics: rolled segments are rewritten so that the latest record of each key
survives, at its original offset (compaction leaves gaps, never renumbers); tombstones stay
``delete.retention.ms`` after the cleaner first passes them (KIP-534's delete horizon, stored in
the batch header); aborted transactions' records go, and their markers once no data of theirs is
left; a producer's last batch stays (emptied if need be) so its state survives. A round never
reaches the active segment, the last stable offset, or records younger than
``min.compaction.lag.ms``; ``max.compaction.lag.ms`` forces one.

* ``OffsetMap``: key -> latest offset, bounded as ``log.cleaner.dedupe.buffer.size`` says;
* ``Cleaner``: one round of one log (``cleaning``), with the batch rewriting in ``rewrite`` and
  the transaction bookkeeping in ``transactions``;
* ``swap``: putting a cleaned segment in place so that a crash at any step loses nothing;
* ``LogCleanerManager``: which log next, dirty ratios, in-progress and uncleanable logs;
* ``LogCleaner``: the threads, the throttle and the metrics.
"""

from __future__ import annotations

from .cleaning import Cleaner, CleaningAbortedError, LogToClean, group_segments_by_size
from .log_cleaner import MANAGER_METRICS_GROUP, METRICS_GROUP, LogCleaner
from .manager import LogCleanerManager, cleanable_range
from .offset_map import OffsetMap
from .settings import UNLIMITED_RATE, CleanerSettings
from .stats import CleanerStats
from .swap import complete_swaps
from .throttler import Throttler

__all__ = [
    "MANAGER_METRICS_GROUP",
    "METRICS_GROUP",
    "UNLIMITED_RATE",
    "Cleaner",
    "CleanerSettings",
    "CleanerStats",
    "CleaningAbortedError",
    "LogCleaner",
    "LogCleanerManager",
    "LogToClean",
    "OffsetMap",
    "Throttler",
    "cleanable_range",
    "complete_swaps",
    "group_segments_by_size",
]
