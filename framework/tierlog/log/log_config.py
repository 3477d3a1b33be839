"""The topic settings a partition log acts on, read once from a topic config into plain fields.

The append and read paths consult these on every call, so they are attributes of a frozen value
rather than lookups in a mapping. Names and defaults are Kafka's topic configs
(``segment.bytes``, ``retention.ms``...); ``LogConfig.of`` accepts a resolved ``TopicConfig``, a
mapping of topic overrides (resolved against the broker defaults), or a ``LogConfig``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..config import TopicConfig, resolve_topic_config
from ..records import TimestampType
from ..records.validation import ValidationRules, max_decompressed_size_for

_LONG_MAX = (1 << 63) - 1
#: ``local.retention.*`` value meaning "same as ``retention.*``".
INHERIT_RETENTION = -2


@attrs.frozen
class LogConfig:
    """The settings of one partition's local log; all dynamic (``PartitionLog.update_config``)."""

    segment_bytes: int = 1073741824
    segment_ms: int = 7 * 24 * 3_600_000
    #: Random reduction of ``segment_ms`` per segment, so partitions do not all roll at once.
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3_600_000
    retention_bytes: int = -1
    local_retention_ms: int = INHERIT_RETENTION
    local_retention_bytes: int = INHERIT_RETENTION
    remote_storage_enable: bool = False
    remote_log_copy_disable: bool = False
    flush_messages: int = _LONG_MAX
    flush_ms: int = _LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: TimestampType = TimestampType.CREATE_TIME
    message_timestamp_before_max_ms: int = _LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    #: ``cleanup.policy`` includes ``compact``: every produced record needs a key, and the log
    #: cleaner keeps only the latest record per key.
    compact: bool = False
    #: ``cleanup.policy`` includes ``delete``: retention by time and size applies.
    delete: bool = True
    delete_retention_ms: int = 86_400_000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = _LONG_MAX
    file_delete_delay_ms: int = 60000
    producer_id_expiration_ms: int = 86_400_000
    #: What a produced batch is checked against, built once from the fields above.
    validation_rules: ValidationRules = attrs.field(init=False, eq=False, repr=False)

    @validation_rules.default
    def _validation_rules(self) -> ValidationRules:
        return ValidationRules(
            timestamp_type=self.message_timestamp_type,
            timestamp_before_max_ms=self.message_timestamp_before_max_ms,
            timestamp_after_max_ms=self.message_timestamp_after_max_ms,
            compacted=self.compact,
            max_decompressed_size=max_decompressed_size_for(self.max_message_bytes),
        )

    @classmethod
    def of(cls, config: LogConfig | TopicConfig | Mapping[str, Any] | None) -> LogConfig:
        """A LogConfig from any of the forms a caller holds a topic's configuration in."""
        if config is None:
            return cls.from_topic_config(resolve_topic_config({}, {}))
        if isinstance(config, LogConfig):
            return config
        if isinstance(config, TopicConfig):
            return cls.from_topic_config(config)
        extras = ("segment.jitter.ms", "producer.id.expiration.ms")
        overrides = {k: v for k, v in config.items() if k not in extras}
        resolved = cls.from_topic_config(resolve_topic_config(overrides, {}))
        jitter = config.get("segment.jitter.ms")
        expiration = config.get("producer.id.expiration.ms")
        return attrs.evolve(
            resolved,
            segment_jitter_ms=resolved.segment_jitter_ms if jitter is None else int(jitter),
            producer_id_expiration_ms=(
                resolved.producer_id_expiration_ms if expiration is None else int(expiration)
            ),
        )

    @classmethod
    def from_topic_config(cls, topic: TopicConfig) -> LogConfig:
        values = topic.values

        def number(name: str) -> int:
            value = values[name]
            assert isinstance(value, int)
            return value

        policy = values["cleanup.policy"]
        ratio = values["min.cleanable.dirty.ratio"]
        timestamp_type = (
            TimestampType.LOG_APPEND_TIME
            if values["message.timestamp.type"] == "LogAppendTime"
            else TimestampType.CREATE_TIME
        )
        return cls(
            segment_bytes=number("segment.bytes"),
            segment_ms=number("segment.ms"),
            segment_index_bytes=number("segment.index.bytes"),
            index_interval_bytes=number("index.interval.bytes"),
            retention_ms=number("retention.ms"),
            retention_bytes=number("retention.bytes"),
            local_retention_ms=number("local.retention.ms"),
            local_retention_bytes=number("local.retention.bytes"),
            remote_storage_enable=bool(values["remote.storage.enable"]),
            remote_log_copy_disable=bool(values["remote.log.copy.disable"]),
            flush_messages=number("flush.messages"),
            flush_ms=number("flush.ms"),
            max_message_bytes=number("max.message.bytes"),
            message_timestamp_type=timestamp_type,
            message_timestamp_before_max_ms=number("message.timestamp.before.max.ms"),
            message_timestamp_after_max_ms=number("message.timestamp.after.max.ms"),
            compact=isinstance(policy, tuple) and "compact" in policy,
            delete=isinstance(policy, tuple) and "delete" in policy,
            delete_retention_ms=number("delete.retention.ms"),
            min_cleanable_dirty_ratio=float(ratio) if isinstance(ratio, int | float) else 0.5,
            min_compaction_lag_ms=number("min.compaction.lag.ms"),
            max_compaction_lag_ms=number("max.compaction.lag.ms"),
            file_delete_delay_ms=number("file.delete.delay.ms"),
        )

    @property
    def effective_local_retention_ms(self) -> int:
        """``local.retention.ms`` with -2 resolved to ``retention.ms``."""
        if self.local_retention_ms == INHERIT_RETENTION:
            return self.retention_ms
        return self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        """``local.retention.bytes`` with -2 resolved to ``retention.bytes``."""
        if self.local_retention_bytes == INHERIT_RETENTION:
            return self.retention_bytes
        return self.local_retention_bytes

    @property
    def remote_copy_enabled(self) -> bool:
        """Whether local segments are tiered (so local deletion waits for the copy)."""
        return self.remote_storage_enable and not self.remote_log_copy_disable
