"""Which log the cleaner picks and when: dirty ratio, compaction lags, uncleanable logs, the
throttle, the threads and their metrics, and the compaction configs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tierlog.config import BrokerConfig, resolve_topic_config
from tierlog.errors import InvalidConfigError
from tierlog.log import LogConfig, PartitionLog, files
from tierlog.log.cleaner import (
    MANAGER_METRICS_GROUP,
    METRICS_GROUP,
    CleanerSettings,
    LogCleaner,
    Throttler,
    cleanable_range,
)
from tierlog.metrics import MetricsRegistry

from .cleaner_support import COMPACTED, cleaner_for, entries, keyed
from .conftest import LogFactory
from .support import Clock


def _dirty(log: PartitionLog, batches: int, *, keys: int = 3, timestamp: int | None = None) -> None:
    for i in range(batches):
        pairs = [(f"k{i % keys}".encode(), f"v{i}".encode().ljust(60, b"."))]
        log.append_as_leader(keyed(pairs, timestamp=timestamp or log._clock()), 0)
    log.update_high_watermark(log.log_end_offset)
    log.roll()


def test_the_dirtiest_log_is_cleaned_first_and_a_clean_one_not_at_all(
    tmp_path: Path, make_log: LogFactory
) -> None:
    clock = Clock()
    config = {**COMPACTED, "min.cleanable.dirty.ratio": 0.5}
    less = make_log(tmp_path / "less-0", config, clock)
    more = make_log(tmp_path / "more-0", config, clock)
    _dirty(less, 20)
    _dirty(more, 20)
    cleaner = cleaner_for(lambda: [less, more], clock)
    assert cleaner.clean_once() and cleaner.clean_once()
    # Both clean now; a little new data makes "less" 1/3 dirty, much makes "more" mostly dirty.
    _dirty(less, 2)
    _dirty(more, 30)
    assert cleanable_range(more, clock.now)[0].dirty_ratio > 0.5
    assert cleanable_range(less, clock.now)[0].dirty_ratio < 0.5
    before = entries(less)
    assert cleaner.clean_once()
    assert more.cleaner_checkpoint == more.log_end_offset
    assert not cleaner.clean_once()  # "less" stays under min.cleanable.dirty.ratio
    assert entries(less) == before
    assert 0 < cleaner.manager.max_dirty_ratio < 0.5


def test_min_compaction_lag_holds_young_records_back(tmp_path: Path, make_log: LogFactory) -> None:
    clock = Clock()
    log = make_log(tmp_path / "c-0", {**COMPACTED, "min.compaction.lag.ms": 10_000}, clock)
    _dirty(log, 20)
    cleaner = cleaner_for(lambda: [log], clock)
    assert not cleaner.clean_once()
    assert len(entries(log)) == 20
    clock.advance(10_001)
    assert cleaner.clean_once()
    assert len(entries(log)) == 3


def test_max_compaction_lag_forces_a_round_below_the_dirty_ratio(
    tmp_path: Path, make_log: LogFactory
) -> None:
    clock = Clock()
    config = {**COMPACTED, "min.cleanable.dirty.ratio": 0.99, "max.compaction.lag.ms": 60_000}
    log = make_log(tmp_path / "c-0", config, clock)
    _dirty(log, 20)
    cleaner = cleaner_for(lambda: [log], clock)
    cleaner.clean_once()  # first round: all dirty
    _dirty(log, 2)
    assert not cleaner.clean_once()
    clock.advance(60_001 + 5_000)
    target, delay = cleanable_range(log, clock.now)
    assert target.needs_compaction_now and delay >= 5_000
    assert cleaner.clean_once()
    assert cleaner.manager.max_compaction_delay_ms == 0 or delay > 0
    assert log.cleaner_checkpoint == log.log_end_offset


def test_a_log_that_fails_to_clean_is_set_aside_and_the_others_go_on(
    tmp_path: Path, make_log: LogFactory
) -> None:
    clock = Clock()
    broken = make_log(tmp_path / "broken-0", COMPACTED, clock)
    healthy = make_log(tmp_path / "healthy-0", COMPACTED, clock)
    _dirty(broken, 30)
    _dirty(healthy, 20)
    # Flip a record byte of a rolled segment: its CRC no longer matches.
    path = broken.directory / files.log_file_name(0)
    data = bytearray(path.read_bytes())
    data[70] ^= 0xFF
    path.write_bytes(bytes(data))
    registry = MetricsRegistry()
    cleaner = LogCleaner(
        lambda: CleanerSettings(),
        lambda: [broken, healthy],
        clock=clock,
        metrics=registry,
        log_dirs=[tmp_path],
    )
    while cleaner.clean_once():
        pass
    assert cleaner.manager.is_uncleanable(broken)
    assert not cleaner.manager.is_uncleanable(healthy)
    assert path.read_bytes() == bytes(data)  # left as it was
    assert len(entries(healthy)) == 3
    assert (
        registry.value(
            MANAGER_METRICS_GROUP, "uncleanable-partitions-count", logDirectory=str(tmp_path)
        )
        == 1
    )
    cleaner.close()


def test_cleaner_threads_clean_in_the_background_and_report_metrics(
    tmp_path: Path, make_log: LogFactory
) -> None:
    logs = [make_log(tmp_path / f"c-{i}", COMPACTED) for i in range(3)]
    for log in logs:
        _dirty(log, 40, keys=4)
    registry = MetricsRegistry()
    cleaner = LogCleaner(
        # Room for 9 keys a thread: 4 keys fill 44% of a map.
        lambda: CleanerSettings(threads=2, backoff_ms=10, dedupe_buffer_size=2 * 10 * 24),
        lambda: logs,
        metrics=registry,
        log_dirs=[tmp_path],
    )
    cleaner.start()
    try:
        assert cleaner.thread_count == 2
        for log in logs:
            assert cleaner.await_cleaned(log, log.log_end_offset, timeout=30)
    finally:
        cleaner.stop()
    assert cleaner.thread_count == 0
    assert [len(entries(log)) for log in logs] == [4, 4, 4]
    assert registry.value(METRICS_GROUP, "max-buffer-utilization-percent") == 44
    assert 0 < registry.value(METRICS_GROUP, "cleaner-recopy-percent") < 100  # type: ignore[operator]
    assert registry.value(METRICS_GROUP, "DeadThreadCount") == 0
    assert registry.value(MANAGER_METRICS_GROUP, "time-since-last-run-ms") is not None
    cleaner.close()
    assert MetricsRegistry().names() == [] and registry.names() == []


def test_a_disabled_cleaner_starts_no_thread(tmp_path: Path) -> None:
    cleaner = LogCleaner(lambda: CleanerSettings(enable=False), lambda: [])
    cleaner.start()
    assert cleaner.thread_count == 0
    cleaner.stop()


def test_the_throttle_sleeps_off_a_rate_above_the_limit() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttler = Throttler(lambda: 1000.0, clock=lambda: now[0], sleep=sleep)
    throttler.maybe_throttle(500)  # inside the first check interval
    assert slept == []
    now[0] = 0.5
    throttler.maybe_throttle(1500)  # 2000 bytes in 0.5 s: 2 s worth at 1000 B/s
    assert slept == [pytest.approx(1.5)]
    now[0] += 1.0
    throttler.maybe_throttle(900)  # 900 bytes in 1 s: under the limit
    assert slept == [pytest.approx(1.5)]


def test_a_throttled_cleaner_is_held_to_its_rate(tmp_path: Path, make_log: LogFactory) -> None:
    clock = Clock()
    log = make_log(tmp_path / "c-0", COMPACTED, clock)
    _dirty(log, 40)
    slept: list[float] = []
    cleaner = cleaner_for(lambda: [log], clock, max_io_bytes_per_second=1000.0)
    cleaner._throttler._sleep = slept.append  # type: ignore[assignment]
    cleaner._throttler._interval = 0.0
    assert cleaner.clean_once()
    assert sum(slept) > 0


def test_compaction_configs_have_kafka_names_defaults_and_rules() -> None:
    topic = resolve_topic_config({"cleanup.policy": "compact"}, {})
    assert topic["delete.retention.ms"] == 86_400_000
    assert topic["min.cleanable.dirty.ratio"] == 0.5
    assert topic["min.compaction.lag.ms"] == 0
    assert topic["max.compaction.lag.ms"] == (1 << 63) - 1
    config = LogConfig.of({"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.2})
    assert config.compact and config.delete and config.min_cleanable_dirty_ratio == 0.2
    broker = {"log.cleaner.delete.retention.ms": 5, "log.cleaner.min.cleanable.ratio": 0.1}
    inherited = resolve_topic_config({}, broker)
    assert inherited["delete.retention.ms"] == 5 and inherited["min.cleanable.dirty.ratio"] == 0.1
    with pytest.raises(InvalidConfigError, match=r"min\.compaction\.lag\.ms.*max\.compaction"):
        resolve_topic_config({"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5}, {})
    with pytest.raises(InvalidConfigError, match=r"min\.cleanable\.dirty\.ratio"):
        resolve_topic_config({"min.cleanable.dirty.ratio": 1.5}, {})
    settings = CleanerSettings.from_broker(BrokerConfig.from_mapping({}))
    assert settings == CleanerSettings()
    assert settings.enable and settings.threads == 1 and settings.backoff_ms == 15000


def test_tiering_a_compacted_topic_is_refused_naming_both_keys() -> None:
    broker = {"remote.log.storage.system.enable": True}
    with pytest.raises(InvalidConfigError) as refused:
        resolve_topic_config({"cleanup.policy": "compact", "remote.storage.enable": True}, broker)
    assert "remote.storage.enable" in str(refused.value) and "cleanup.policy" in str(refused.value)
    assert (refused.value.code, refused.value.kafka_name) == (40, "INVALID_CONFIG")


def test_a_truncation_below_the_checkpoint_makes_the_rest_dirty_again(
    tmp_path: Path, make_log: LogFactory
) -> None:
    clock = Clock()
    log = make_log(tmp_path / "c-0", COMPACTED, clock)
    _dirty(log, 20)
    cleaner_for(lambda: [log], clock).clean_once()
    assert log.cleaner_checkpoint == 20
    log.truncate_to(15)
    assert log.cleaner_checkpoint == 15
    log.close()
    checkpoint = (tmp_path / "c-0" / files.CLEANER_OFFSET_CHECKPOINT).read_text()
    assert checkpoint.split() == ["0", "1", "c", "0", "15"]
    assert os.path.exists(tmp_path / "c-0" / files.CLEANER_OFFSET_CHECKPOINT)
