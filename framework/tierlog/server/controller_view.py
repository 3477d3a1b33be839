"""What a broker needs of its controller, whichever process the controller runs in.

In an embedded cluster the broker holds the :class:`~tierlog.server.controller.Controller`
itself; in a multi-process cluster it holds a
:class:`~tierlog.coordination.controller_channel.ControllerChannel`, which keeps the image the
controller pushes and forwards every decision to the broker holding the controller role. Both
answer this protocol, so request handlers never know which they talk to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from ..errors import TierlogError
from ..model import TopicPartition
from . import protocol as p
from .image import ClusterImage, IsrChange, PartitionRegistration, TopicImage
from .producer_ids import ProducerIdsBlock
from .transport import Transport

ImageListener = Callable[[ClusterImage], None]


class ControllerView(Protocol):
    """The controller as one broker sees it: the cluster image and the decisions it asks for."""

    @property
    def cluster_id(self) -> str: ...

    @property
    def broker_ids(self) -> tuple[int, ...]:
        """Every broker the cluster knows, live or not."""
        ...

    @property
    def transport(self) -> Transport:
        """How this broker's runtime components reach brokers, itself included."""
        ...

    def image(self) -> ClusterImage: ...

    def subscribe(self, listener: ImageListener) -> Callable[[], None]: ...

    def live_brokers(self) -> frozenset[int]: ...

    def register_broker(self, broker_id: int) -> None: ...

    def unregister_broker(self, broker_id: int) -> None: ...

    def alter_partitions(
        self, leader_id: int, changes: Mapping[TopicPartition, IsrChange]
    ) -> dict[TopicPartition, PartitionRegistration | TierlogError]:
        """A leader's ISR changes in one request: each partition's new registration, or the
        error that refused it; raises when no controller answered at all."""
        ...

    def allocate_producer_ids(self, broker_id: int) -> ProducerIdsBlock: ...

    def create_topics(
        self, request: p.CreateTopicsRequest, *, internal_allowed: bool = False
    ) -> p.CreateTopicsResponse: ...

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        internal: bool = False,
    ) -> TopicImage: ...

    def delete_topics(self, request: p.DeleteTopicsRequest) -> p.DeleteTopicsResponse: ...

    def create_partitions(
        self, request: p.CreatePartitionsRequest
    ) -> p.CreatePartitionsResponse: ...

    def elect_leaders(self, request: p.ElectLeadersRequest) -> p.ElectLeadersResponse: ...

    def alter_partition_reassignments(
        self, request: p.AlterPartitionReassignmentsRequest
    ) -> p.AlterPartitionReassignmentsResponse: ...

    def list_partition_reassignments(
        self, request: p.ListPartitionReassignmentsRequest
    ) -> p.ListPartitionReassignmentsResponse: ...

    def alter_topic_configs(
        self, name: str, changes: Mapping[str, str | None], *, validate_only: bool = False
    ) -> None: ...

    def record_broker_configs(self, resource: str, changes: Mapping[str, str | None]) -> None: ...

    def broker_configs(self, broker_id: int) -> dict[str, str]: ...

    def stored_topic_configs(self, topic: str) -> dict[str, str] | None:
        """A topic's config overrides as the cluster stores them, None for an unknown topic.

        A broker opening its logs at startup asks this before any image reached it: a
        tiered log opened with the broker's defaults would take its first local offset for
        its log start, and serve nothing of what only remote storage holds.
        """
        ...
