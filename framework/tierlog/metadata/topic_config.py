"""Settings of the topic-based metadata manager: its ``rlmm.config.*`` slice, typed.

Names and defaults are Kafka's (``TopicBasedRemoteLogMetadataManagerConfig``), relative to the
slice. ``remote.log.metadata.checkpoint.interval.ms`` is tierlog's own: how often the consumed
state is written to the log dir so a restart resumes instead of replaying the topic.

Client settings pass through three prefixes, as in Kafka: ``remote.log.metadata.common.client.``
for both clients, then ``.producer.`` or ``.consumer.`` on top. The settings the manager depends
on (acks=all and idempotence for the producer, reading from the earliest offset for the
consumer) are forced and cannot be overridden.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from ..config import ConfigDef, ConfigKey, ConfigType, any_of, at_least, one_of
from ..errors import InvalidConfigError
from ..server.internal_topics import REMOTE_LOG_METADATA_TOPIC

TOPIC_NAME: Final = REMOTE_LOG_METADATA_TOPIC

NUM_PARTITIONS: Final = "remote.log.metadata.topic.num.partitions"
REPLICATION_FACTOR: Final = "remote.log.metadata.topic.replication.factor"
RETENTION_MS: Final = "remote.log.metadata.topic.retention.ms"
CONSUME_WAIT_MS: Final = "remote.log.metadata.consume.wait.ms"
INIT_RETRY_INTERVAL_MS: Final = "remote.log.metadata.initialization.retry.interval.ms"
INIT_RETRY_MAX_TIMEOUT_MS: Final = "remote.log.metadata.initialization.retry.max.timeout.ms"
CHECKPOINT_INTERVAL_MS: Final = "remote.log.metadata.checkpoint.interval.ms"

COMMON_CLIENT_PREFIX: Final = "remote.log.metadata.common.client."
PRODUCER_PREFIX: Final = "remote.log.metadata.producer."
CONSUMER_PREFIX: Final = "remote.log.metadata.consumer."


def config_def() -> ConfigDef:
    """Every key of the slice."""
    keys = (
        ConfigKey(
            NUM_PARTITIONS,
            ConfigType.INT,
            50,
            validator=at_least(1),
            doc="Partitions of the internal topic. Fixed once the topic exists: a different "
            "value is refused at start-up, because user partitions would map elsewhere.",
        ),
        ConfigKey(
            REPLICATION_FACTOR,
            ConfigType.INT,
            3,
            validator=at_least(1),
            doc="Replication factor of the internal topic, capped by the number of brokers.",
        ),
        ConfigKey(
            RETENTION_MS,
            ConfigType.LONG,
            -1,
            validator=any_of(one_of(-1), at_least(1)),
            doc="retention.ms of the internal topic. The topic is compacted (events are keyed "
            "so that the segments deleted from remote storage drop out of it), so this bounds "
            "nothing; it is kept for configurations written when the topic was not compacted.",
        ),
        ConfigKey(
            CONSUME_WAIT_MS,
            ConfigType.LONG,
            120_000,
            validator=at_least(0),
            doc="How long a write waits for this broker's own consumer to apply it.",
        ),
        ConfigKey(
            INIT_RETRY_INTERVAL_MS,
            ConfigType.LONG,
            100,
            validator=at_least(0),
            doc="Pause between attempts to create or read the internal topic at start-up.",
        ),
        ConfigKey(
            INIT_RETRY_MAX_TIMEOUT_MS,
            ConfigType.LONG,
            120_000,
            validator=at_least(0),
            doc="Initialization budget, counted from broker-ready (KIP-1197). Past it the "
            "manager gives up: tiering stops on this broker, local data is still served.",
        ),
        ConfigKey(
            CHECKPOINT_INTERVAL_MS,
            ConfigType.LONG,
            30_000,
            validator=at_least(1),
            doc="How often the consumed state is checkpointed to the first log dir (and at "
            "close), so a restart resumes from there.",
        ),
    )
    return ConfigDef(
        keys=keys,
        raw_prefixes=(COMMON_CLIENT_PREFIX, PRODUCER_PREFIX, CONSUMER_PREFIX),
    )


_FORCED_PRODUCER: Final[dict[str, object]] = {"acks": "all", "enable.idempotence": "true"}
_FORCED_CONSUMER: Final[dict[str, object]] = {
    "auto.offset.reset": "earliest",
    "isolation.level": "read_uncommitted",
}


@attrs.frozen
class TopicBasedConfig:
    """The parsed slice."""

    num_partitions: int
    replication_factor: int
    retention_ms: int
    consume_wait_ms: int
    init_retry_interval_ms: int
    init_retry_max_timeout_ms: int
    checkpoint_interval_ms: int
    producer: Mapping[str, object]
    consumer: Mapping[str, object]

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], *, broker_id: int = 0) -> TopicBasedConfig:
        """Parse and validate a slice (raw strings or parsed values).

        :raises InvalidConfigError: naming the key, for an unknown key or a bad value.
        """
        values = config_def().parse(raw)
        common = _prefixed(values, COMMON_CLIENT_PREFIX)
        client_id = f"__remote_log_metadata_client_{broker_id}"
        producer = {
            "client.id": f"{client_id}_producer",
            **common,
            **_prefixed(values, PRODUCER_PREFIX),
            **_FORCED_PRODUCER,
        }
        consumer = {
            "client.id": f"{client_id}_consumer",
            # Short waits: an assignment change is picked up within one fetch.
            "fetch.max.wait.ms": "100",
            **common,
            **_prefixed(values, CONSUMER_PREFIX),
            **_FORCED_CONSUMER,
        }
        return cls(
            num_partitions=int(values[NUM_PARTITIONS]),  # type: ignore[call-overload]
            replication_factor=int(values[REPLICATION_FACTOR]),  # type: ignore[call-overload]
            retention_ms=int(values[RETENTION_MS]),  # type: ignore[call-overload]
            consume_wait_ms=int(values[CONSUME_WAIT_MS]),  # type: ignore[call-overload]
            init_retry_interval_ms=int(values[INIT_RETRY_INTERVAL_MS]),  # type: ignore[call-overload]
            init_retry_max_timeout_ms=int(values[INIT_RETRY_MAX_TIMEOUT_MS]),  # type: ignore[call-overload]
            checkpoint_interval_ms=int(values[CHECKPOINT_INTERVAL_MS]),  # type: ignore[call-overload]
            producer=producer,
            consumer=consumer,
        )

    def topic_configs(self) -> dict[str, str]:
        """Configs of the internal topic when this manager creates it."""
        return {
            "retention.ms": str(self.retention_ms),
            "retention.bytes": "-1",
            "cleanup.policy": "compact",
            "remote.storage.enable": "false",
        }


def _prefixed(values: Mapping[str, object], prefix: str) -> dict[str, object]:
    found = {k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix)}
    for name in found:
        if name in _FORCED_PRODUCER or name in _FORCED_CONSUMER:
            raise InvalidConfigError(
                f"{prefix}{name} cannot be set: the metadata manager depends on its value",
                key=prefix + name,
            )
    return found


__all__ = ["TOPIC_NAME", "TopicBasedConfig", "config_def"]
