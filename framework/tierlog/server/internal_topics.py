"""The runtime's internal topics, and what clients may not do to them.

One list says which topics belong to the system (Kafka's ``Topic.isInternal``); Metadata
reports them with ``is_internal`` and the remote log manager never tiers them. The runtime
writes them through its own in-process path (``Transport.send_internal``, which is Kafka's
``internalTopicsAllowed``); between the processes of a multi-process cluster that produce
carries the client id ``__admin_client``, which Kafka's rule (and the listener's) lets write
them. A client may read and describe them; what could break the runtime is refused:

- Produce: INVALID_TOPIC_EXCEPTION, as Kafka's ``ReplicaManager.appendRecords`` answers when
  internal topics are not allowed ("Cannot append to internal topic").
- DeleteRecords: INVALID_TOPIC_EXCEPTION, as Kafka's ``ReplicaManager.deleteRecordsOnLocalLog``.
- DeleteTopics: TOPIC_AUTHORIZATION_FAILED. Kafka leaves deletion to its authorizer, and a KRaft
  controller answers this code to a principal not allowed to delete the topic; tierlog has no
  authorizer and allows no client to. Deleting ``__remote_log_metadata`` would otherwise stop
  tiering on every broker until a restart.
- IncrementalAlterConfigs: allowed, as in Kafka (operators tune retention and segment sizes of
  internal topics), except the :data:`PINNED_CONFIGS` the runtime depends on: INVALID_CONFIG
  naming the key, the code Kafka's ``LogConfig`` validation gives a combination a log cannot
  run with (such as a compacted topic with remote storage).
- CreateTopics: internal names start with the reserved ``__`` (see ``topics.py``), so a client
  gets TOPIC_ALREADY_EXISTS once the topic exists and INVALID_TOPIC_EXCEPTION before.

``__remote_log_metadata`` is internal here although Kafka's list holds only the coordinators'
topics: tierlog hosts it itself and cannot tier anything without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..config.topic import TOPIC_CONFIG
from ..errors import InvalidConfigError, InvalidTopicError, TopicAuthorizationFailedError

REMOTE_LOG_METADATA_TOPIC: Final = "__remote_log_metadata"
CONSUMER_OFFSETS_TOPIC: Final = "__consumer_offsets"
TRANSACTION_STATE_TOPIC: Final = "__transaction_state"

INTERNAL_TOPICS: Final = frozenset(
    {REMOTE_LOG_METADATA_TOPIC, CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC}
)

PINNED_CONFIGS: Final[Mapping[str, Mapping[str, str]]] = {
    # Events are keyed so that compaction keeps exactly the live remote segments' history.
    REMOTE_LOG_METADATA_TOPIC: {"cleanup.policy": "compact", "remote.storage.enable": "false"},
    # The coordinators keep the latest value per key: their topics must stay compacted.
    CONSUMER_OFFSETS_TOPIC: {"cleanup.policy": "compact", "remote.storage.enable": "false"},
    TRANSACTION_STATE_TOPIC: {"cleanup.policy": "compact", "remote.storage.enable": "false"},
}
"""Topic configs of each internal topic that clients may not change."""


def is_internal(topic: str) -> bool:
    """Whether ``topic`` belongs to the runtime (Kafka's ``Topic.isInternal``)."""
    return topic in INTERNAL_TOPICS


def check_client_append(topic: str) -> None:
    """Refuses a client's produce to an internal topic."""
    if is_internal(topic):
        raise InvalidTopicError(
            f"cannot append to internal topic {topic!r}: only the runtime writes it"
        )


def check_client_delete_records(topic: str) -> None:
    """Refuses a client's DeleteRecords on an internal topic."""
    if is_internal(topic):
        raise InvalidTopicError(f"cannot delete records of internal topic {topic!r}")


def check_client_delete(topic: str) -> None:
    """Refuses a client's DeleteTopics of an internal topic."""
    if is_internal(topic):
        raise TopicAuthorizationFailedError(
            f"internal topic {topic!r} belongs to the runtime and cannot be deleted"
        )


def check_client_config_changes(topic: str, changes: Mapping[str, str | None]) -> None:
    """Refuses changes (canonical key to new override, None to remove it) that would move a
    pinned config of an internal topic away from the value the runtime needs."""
    pinned = PINNED_CONFIGS.get(topic, {})
    for name, value in changes.items():
        required = pinned.get(name)
        if required is None:
            continue
        key = TOPIC_CONFIG[name]
        if value is None or key.parse(value) != key.parse(required):
            raise InvalidConfigError(
                f"{name} of internal topic {topic!r} must stay {required!r}: the runtime "
                f"depends on it",
                key=name,
                value=value,
            )
