"""The cluster metadata image: topics, their ids, configs, replicas, leaders and epochs.

The controller owns the only writable copy and publishes a new immutable image after every
change; brokers read the latest one (as KRaft brokers replay the metadata log). Because images
never change, a broker answering a Metadata request sees one consistent cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from ..model import TopicPartition, Uuid
from . import protocol as p


def _frozen_str_map(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping))


def _frozen_topics(mapping: Mapping[str, TopicImage]) -> Mapping[str, TopicImage]:
    return MappingProxyType(dict(mapping))


def _frozen_configs(
    mapping: Mapping[str, Mapping[str, str]],
) -> Mapping[str, Mapping[str, str]]:
    return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in mapping.items()})


@attrs.frozen
class IsrChange:
    """An ISR a leader proposes, against the leader and partition epochs it holds (one
    partition of Kafka's AlterPartition)."""

    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]


@attrs.frozen
class PartitionRegistration:
    """Where one partition lives and who leads it.

    ``leader`` is -1 while no in-sync replica is alive. ``leader_epoch`` grows by one with every
    leader change; ``partition_epoch`` with every change of this registration at all.

    While a reassignment is under way (KIP-455) ``replicas`` holds the target replicas followed
    by those leaving, ``adding_replicas`` the targets that were not replicas before and
    ``removing_replicas`` those leaving; both are empty otherwise.
    """

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int = p.NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas the partition ends on: ``replicas`` without those leaving."""
        return tuple(b for b in self.replicas if b not in self.removing_replicas)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "partition_epoch": self.partition_epoch,
        }
        if self.reassigning:
            data["adding_replicas"] = list(self.adding_replicas)
            data["removing_replicas"] = list(self.removing_replicas)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PartitionRegistration:
        return cls(
            replicas=tuple(int(b) for b in data["replicas"]),
            isr=tuple(int(b) for b in data["isr"]),
            leader=int(data["leader"]),
            leader_epoch=int(data["leader_epoch"]),
            partition_epoch=int(data["partition_epoch"]),
            # Files written before reassignments existed have neither key.
            adding_replicas=tuple(int(b) for b in data.get("adding_replicas", ())),
            removing_replicas=tuple(int(b) for b in data.get("removing_replicas", ())),
        )


@attrs.frozen
class TopicImage:
    """A topic: its id (which tells a re-created topic from the old one), partitions, configs.

    ``configs`` holds the topic-level overrides as given (strings); each broker resolves them
    against its own defaults, as Kafka does.
    """

    name: str
    topic_id: Uuid
    partitions: tuple[PartitionRegistration, ...]
    configs: Mapping[str, str] = attrs.field(converter=_frozen_str_map, eq=False)

    def partition(self, index: int) -> PartitionRegistration | None:
        return self.partitions[index] if 0 <= index < len(self.partitions) else None

    def topic_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(self.name, i) for i in range(len(self.partitions))]

    def to_json(self) -> dict[str, Any]:
        return {
            "topic_id": str(self.topic_id),
            "configs": dict(self.configs),
            "partitions": [registration.to_json() for registration in self.partitions],
        }

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> TopicImage:
        return cls(
            name=name,
            topic_id=Uuid.from_string(data["topic_id"]),
            partitions=tuple(PartitionRegistration.from_json(d) for d in data["partitions"]),
            configs={str(k): str(v) for k, v in data["configs"].items()},
        )


@attrs.frozen
class ClusterImage:
    """One consistent view of the whole cluster."""

    cluster_id: str
    controller_id: int
    controller_epoch: int
    live_brokers: frozenset[int]
    topics: Mapping[str, TopicImage] = attrs.field(converter=_frozen_topics, eq=False)
    #: broker id ('' for the cluster-wide default) -> dynamic broker configs set on it.
    broker_configs: Mapping[str, Mapping[str, str]] = attrs.field(
        factory=dict, converter=_frozen_configs, eq=False
    )

    def topic(self, name: str) -> TopicImage | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: Uuid) -> TopicImage | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    def registration(self, tp: TopicPartition) -> PartitionRegistration | None:
        topic = self.topics.get(tp.topic)
        return None if topic is None else topic.partition(tp.partition)
