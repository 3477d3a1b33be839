"""Where tierlog keeps its metadata in ZooKeeper: Kafka's ZooKeeper-mode data model.

The paths are Kafka's (``kafka.zk.ZkData``), so an operator who knows a Kafka ensemble finds
the same nodes here. Every path is relative to the chroot of ``zookeeper.connect``; the client
adds the chroot, nothing here knows about it.
"""

from __future__ import annotations

from typing import Final

#: Persistent: the cluster id, created once, create-if-absent.
CLUSTER: Final = "/cluster"
CLUSTER_ID: Final = "/cluster/id"
#: Ephemeral ``{"version":1,"brokerid":N,"timestamp":"..."}``: whoever holds it is the controller.
CONTROLLER: Final = "/controller"
#: Persistent: the controller epoch; its znode version fences every controller write.
CONTROLLER_EPOCH: Final = "/controller_epoch"
BROKERS: Final = "/brokers"
#: Parent of the ephemeral broker registrations ``/brokers/ids/<id>``.
BROKER_IDS: Final = "/brokers/ids"
#: Parent of the topic assignments ``/brokers/topics/<topic>``.
BROKER_TOPICS: Final = "/brokers/topics"
CONFIG: Final = "/config"
#: Parent of the topic config overrides ``/config/topics/<topic>``.
TOPIC_CONFIGS: Final = "/config/topics"
#: Parent of the broker config overrides ``/config/brokers/<id>`` and ``<default>``.
BROKER_CONFIGS: Final = "/config/brokers"
#: Kafka's znode name for the cluster-wide default of a broker config.
DEFAULT_BROKER_CONFIG: Final = "<default>"
#: Persistent: the start of the next block of producer ids to hand out.
PRODUCER_ID_BLOCK: Final = "/latest_producer_id_block"

#: The persistent parents a fresh cluster needs before anything is registered or written.
PERSISTENT_PARENTS: Final = (
    CLUSTER,
    BROKER_IDS,
    BROKER_TOPICS,
    TOPIC_CONFIGS,
    BROKER_CONFIGS,
)


def _segment(kind: str, name: str) -> str:
    """One path component; refuses what would address another node than the one meant."""
    if not name or name in (".", "..") or "/" in name or "\x00" in name:
        raise ValueError(f"{kind} {name!r} cannot be a ZooKeeper node name")
    return name


def _broker_id(broker_id: int) -> str:
    if isinstance(broker_id, bool) or not isinstance(broker_id, int) or broker_id < 0:
        raise ValueError(f"broker id must be a non-negative int, got {broker_id!r}")
    return str(broker_id)


def broker_path(broker_id: int) -> str:
    """The ephemeral registration of a live broker; its czxid is the broker epoch."""
    return f"{BROKER_IDS}/{_broker_id(broker_id)}"


def topic_path(topic: str) -> str:
    """The replica assignment of a topic (and its topic id)."""
    return f"{BROKER_TOPICS}/{_segment('topic', topic)}"


def partitions_path(topic: str) -> str:
    """Parent of the per-partition nodes of a topic."""
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise ValueError(f"partition must be a non-negative int, got {partition!r}")
    return f"{partitions_path(topic)}/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    """Leader, leader epoch and ISR of a partition; its znode version is the partition epoch."""
    return f"{partition_path(topic, partition)}/state"


def topic_config_path(topic: str) -> str:
    """The config overrides of a topic."""
    return f"{TOPIC_CONFIGS}/{_segment('topic', topic)}"


def broker_config_path(broker_id: int | None) -> str:
    """The config overrides of one broker, or with None the cluster-wide ``<default>``."""
    if broker_id is None:
        return f"{BROKER_CONFIGS}/{DEFAULT_BROKER_CONFIG}"
    return f"{BROKER_CONFIGS}/{_broker_id(broker_id)}"


def broker_id_from_node(name: str) -> int:
    """The broker id a child of ``/brokers/ids`` stands for."""
    if not name.isdigit() or not name.isascii():
        raise ValueError(f"{BROKER_IDS} child {name!r} is not a broker id")
    return int(name)
