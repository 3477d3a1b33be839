"""``LogConfig``: the topic settings the log acts on, from any form a caller holds them in."""

from __future__ import annotations

from pathlib import Path

import pytest
from tierlog.config import resolve_topic_config
from tierlog.errors import InvalidConfigError
from tierlog.log import LogConfig
from tierlog.records import TimestampType

from .conftest import LogFactory
from .support import T0, batch, segment_bases


def test_defaults_are_kafkas() -> None:
    config = LogConfig.of(None)
    assert config == LogConfig()
    assert (config.segment_bytes, config.index_interval_bytes) == (1 << 30, 4096)
    assert config.effective_local_retention_ms == config.retention_ms == 7 * 86_400_000


def test_topic_overrides_and_extras() -> None:
    config = LogConfig.of(
        {
            "segment.bytes": 4096,
            "message.timestamp.type": "LogAppendTime",
            "local.retention.bytes": 7,
            "segment.jitter.ms": 50,
            "producer.id.expiration.ms": 1000,
        }
    )
    assert config.segment_bytes == 4096
    assert config.message_timestamp_type is TimestampType.LOG_APPEND_TIME
    assert config.segment_jitter_ms == 50 and config.producer_id_expiration_ms == 1000
    assert config.effective_local_retention_bytes == 7
    topic = resolve_topic_config({"retention.bytes": 10}, {"log.retention.bytes": 99})
    assert LogConfig.of(topic).retention_bytes == 10


def test_bad_values_name_the_key() -> None:
    with pytest.raises(InvalidConfigError, match=r"segment\.bytes"):
        LogConfig.of({"segment.bytes": 1})


def test_update_config_applies_to_the_next_append(tmp_path: Path, make_log: LogFactory) -> None:
    log = make_log(tmp_path / "t-0")
    for i in range(3):
        log.append_as_leader(batch(1, tag=i), leader_epoch=0)
    assert segment_bases(log) == [0]
    log.update_config({"segment.bytes": len(batch(1)) * 2})
    for i in range(4):
        log.append_as_leader(batch(1, tag=i), leader_epoch=0)
    assert segment_bases(log) == [0, 3, 5]


def test_roll_jitter_only_shortens_segment_ms(tmp_path: Path, make_log: LogFactory) -> None:
    log = make_log(tmp_path / "t-0", {"segment.ms": 1000, "segment.jitter.ms": 500})
    log.append_as_leader(batch(1, timestamp=T0), leader_epoch=0)
    log.append_as_leader(batch(1, timestamp=T0 + 499), leader_epoch=0)
    assert segment_bases(log) == [0]
    log.append_as_leader(batch(1, timestamp=T0 + 1001), leader_epoch=0)
    assert segment_bases(log) == [0, 2]
