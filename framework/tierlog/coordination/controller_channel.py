"""A broker's controller in a multi-process cluster: the pushed image, and decisions forwarded.

The controller runs in whichever broker process holds ``/controller`` in ZooKeeper. Every
broker keeps the :class:`~tierlog.server.image.ClusterImage` that controller last pushed to it
with UpdateMetadata (refusing one from an older controller epoch), and asks the controller for
every decision over the wire: AlterPartition for ISR changes, AllocateProducerIds, and the
topic and config changes clients send to any broker (forwarded, as KRaft brokers forward them,
so clients need not find the controller themselves). While this broker holds the role itself,
the same calls go straight to its in-process :class:`~tierlog.server.controller.Controller`.

Registration is the broker's own: its ephemeral ``/brokers/ids/<id>`` node is created when it
starts serving, and a clean stop first asks the controller to move leadership away
(ControlledShutdown) and then deletes the node. Dynamic broker configs are read from and
written to ``/config/brokers`` directly, as Kafka's ZooKeeper-mode brokers do.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from ..config import BrokerConfig
from ..errors import (
    BrokerNotAvailableError,
    NotControllerError,
    RequestTimedOutError,
    StaleControllerEpochError,
    TierlogError,
    error_for_code,
)
from ..model import TopicPartition, Uuid
from ..server import protocol as p
from ..server.image import ClusterImage, IsrChange, PartitionRegistration, TopicImage
from ..server.producer_ids import ProducerIdsBlock
from ..server.transport import Transport
from ..server.update_metadata import image_from_update_metadata
from ..wire.endpoints import Endpoint, EndpointDirectory
from ..wire.network_transport import NetworkTransport
from . import paths
from .registration import BrokerRegistration

if TYPE_CHECKING:
    from ..server.controller import Controller

log = logging.getLogger(__name__)

T = TypeVar("T")
ImageListener = Callable[[ClusterImage], None]

#: How often a broker waiting for a controller looks again.
_POLL_S = 0.1
#: ControlledShutdown attempts before a broker stops anyway (Kafka's
#: ``controlled.shutdown.max.retries`` default).
CONTROLLED_SHUTDOWN_ATTEMPTS = 3
_RETRIABLE = (NotControllerError, BrokerNotAvailableError, RequestTimedOutError)


def _raise_for(code: int, message: str | None, what: str) -> None:
    if code != p.NONE:
        raise error_for_code(code)(message or f"{what}: error {code}")


class ControllerChannel:
    """Implements :class:`~tierlog.server.controller_view.ControllerView` for one broker of a
    multi-process cluster."""

    def __init__(
        self,
        config: BrokerConfig,
        zk: KazooClient,
        transport: NetworkTransport,
        endpoints: EndpointDirectory,
        registration: BrokerRegistration | None,
    ) -> None:
        self.config = config
        self.broker_id = config.get_int("broker.id")
        self._zk = zk
        self._transport = transport
        self._endpoints = endpoints
        #: This broker's ZooKeeper registration; the node sets it once its listener is bound.
        self.registration = registration
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._image = ClusterImage(
            cluster_id="",
            controller_id=p.NO_LEADER,
            controller_epoch=0,
            live_brokers=frozenset(),
            topics={},
        )
        self._listeners: list[ImageListener] = []
        #: Who holds ``/controller`` now, as the controller role's watch last saw it.
        self._controller_id = p.NO_LEADER
        #: The controller of this process while it holds the role.
        self._local: Controller | None = None
        #: Registered brokers (from ZooKeeper), id -> endpoints.
        self._registered: dict[int, tuple[Endpoint, ...]] = {}
        self._timeout_s = config.get_int("zookeeper.session.timeout.ms") / 1000 + 30
        self.broker_epoch = -1
        #: Called once the controlled shutdown is over and the registration gone.
        self.on_deregistered: list[Callable[[], None]] = []

    # --- what the node tells it -----------------------------------------------------------

    def set_controller(self, controller_id: int) -> None:
        with self._changed:
            self._controller_id = controller_id
            self._changed.notify_all()

    def set_local_controller(self, controller: Controller | None) -> None:
        with self._changed:
            self._local = controller
            self._changed.notify_all()

    def set_broker_epoch(self, epoch: int) -> None:
        log.info("broker %d registered again, with broker epoch %d", self.broker_id, epoch)
        self.broker_epoch = epoch

    @property
    def local_controller(self) -> Controller | None:
        return self._local

    def set_registered(self, brokers: Mapping[int, tuple[Endpoint, ...]]) -> None:
        """The brokers registered in ZooKeeper and their endpoints; clients and replicas
        reach them at these addresses."""
        with self._lock:
            gone = set(self._registered) - set(brokers)
            old = dict(self._registered)
            self._registered = dict(brokers)
        # This broker's own listener registers and unregisters what it advertises: its node
        # vanishing (a session expiry, or the node a crashed run of it left behind) must not
        # take its endpoints out of the answers it gives clients.
        for broker_id in gone - {self.broker_id}:
            for endpoint in old[broker_id]:
                self._endpoints.unregister(broker_id, endpoint)
        for broker_id, endpoints in brokers.items():
            if broker_id == self.broker_id:
                continue
            for endpoint in endpoints:
                self._endpoints.register(broker_id, endpoint)

    def address(self, broker_id: int, listener: str | None) -> tuple[str, int] | None:
        """Where to reach ``broker_id``: its endpoint on ``listener`` (its first if None)."""
        with self._lock:
            endpoints = self._registered.get(broker_id, ())
        for endpoint in endpoints:
            if listener is None or endpoint.name == listener:
                return endpoint.host, endpoint.port
        return None

    def registered_ids(self) -> tuple[int, ...]:
        with self._lock:
            return tuple(sorted(self._registered))

    # --- UpdateMetadata -------------------------------------------------------------------

    def update_metadata(self, request: p.UpdateMetadataRequest) -> p.UpdateMetadataResponse:
        """Takes the controller's push; one from an older controller is STALE_CONTROLLER_EPOCH."""
        image, _endpoints = image_from_update_metadata(request)
        with self._changed:
            if image.controller_epoch < self._image.controller_epoch:
                return p.UpdateMetadataResponse(StaleControllerEpochError.code or 11)
            self._image = image
            listeners = list(self._listeners)
            self._changed.notify_all()
        for listener in listeners:
            try:
                listener(image)
            except Exception:
                log.exception("metadata listener %r failed", listener)
        return p.UpdateMetadataResponse()

    # --- ControllerView: reading ----------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._image.cluster_id

    @property
    def broker_ids(self) -> tuple[int, ...]:
        image = self._image
        assigned = {
            b for topic in image.topics.values() for reg in topic.partitions for b in reg.replicas
        }
        return tuple(sorted(assigned | set(self.registered_ids()) | image.live_brokers))

    @property
    def transport(self) -> Transport:
        return self._transport

    def image(self) -> ClusterImage:
        return self._image

    def subscribe(self, listener: ImageListener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def live_brokers(self) -> frozenset[int]:
        return self._image.live_brokers

    def wait_for(self, check: Callable[[ClusterImage], bool], timeout_s: float) -> bool:
        """Waits until the pushed image satisfies ``check``; returns whether it did."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not check(self._image):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.5))
            return True

    # --- ControllerView: registration -----------------------------------------------------

    def register_broker(self, broker_id: int) -> None:
        """Registers in ZooKeeper, then waits for the controller to count this broker live."""
        if self.registration is None:
            raise RuntimeError(f"broker {broker_id} has no listener to register yet")
        self.broker_epoch = self.registration.register()
        log.info("broker %d registered with broker epoch %d", broker_id, self.broker_epoch)
        if not self.wait_for(lambda image: broker_id in image.live_brokers, self._timeout_s):
            log.warning(
                "broker %d: no controller has counted it live yet; serving anyway", broker_id
            )

    def unregister_broker(self, broker_id: int) -> None:
        """Controlled shutdown: leadership moves away first, then the registration goes.

        A process that never registered (its broker.id was taken by another broker) has
        nothing to hand over, and must not ask the controller to take the holder of that
        broker.id out of the cluster."""
        if self.broker_epoch == -1:
            log.info("broker %d never registered: no controlled shutdown", broker_id)
            return
        try:
            remaining = self._controlled_shutdown(broker_id)
            if remaining:
                log.warning(
                    "broker %d still leads %d partition(s) after controlled shutdown",
                    broker_id,
                    len(remaining),
                )
        except TierlogError as err:
            log.warning("broker %d: controlled shutdown failed: %s", broker_id, err)
        finally:
            if self.registration is not None:
                self.registration.deregister()
            for callback in self.on_deregistered:
                try:
                    callback()
                except Exception:
                    log.exception("broker %d: after deregistering, %r failed", broker_id, callback)

    def _controlled_shutdown(self, broker_id: int) -> list[TopicPartition]:
        for attempt in range(1, CONTROLLED_SHUTDOWN_ATTEMPTS + 1):
            try:
                return self._call(
                    lambda local: _local_controlled_shutdown(local, broker_id),
                    lambda cid: self._remote_controlled_shutdown(cid, broker_id),
                    "ControlledShutdown",
                    timeout_s=5.0,
                )
            except TierlogError as err:
                log.info(
                    "broker %d: controlled shutdown attempt %d failed: %s", broker_id, attempt, err
                )
        raise NotControllerError(
            f"controlled shutdown of broker {broker_id} failed {CONTROLLED_SHUTDOWN_ATTEMPTS} times"
        )

    def _remote_controlled_shutdown(
        self, controller_id: int, broker_id: int
    ) -> list[TopicPartition]:
        response = self._transport.send(
            controller_id,
            p.ControlledShutdownRequest(broker_id=broker_id, broker_epoch=self.broker_epoch),
        )
        _raise_for(response.error_code, None, "ControlledShutdown")
        return [
            TopicPartition(r.topic_name, r.partition_index) for r in response.remaining_partitions
        ]

    # --- ControllerView: decisions --------------------------------------------------------

    def _call(
        self,
        local: Callable[[Controller], T],
        remote: Callable[[int], T],
        what: str,
        *,
        timeout_s: float | None = None,
    ) -> T:
        """``local(controller)`` while this process holds the role, else ``remote(id)`` on the
        broker that holds it, trying again (until the timeout) while no controller answers."""
        deadline = time.monotonic() + (self._timeout_s if timeout_s is None else timeout_s)
        last: BaseException | None = None
        while True:
            with self._lock:
                controller, controller_id = self._local, self._controller_id
            if controller is not None:
                return local(controller)
            if controller_id != p.NO_LEADER:
                try:
                    return remote(controller_id)
                except _RETRIABLE as err:
                    last = err
            if time.monotonic() >= deadline:
                raise NotControllerError(
                    f"{what}: no controller answered"
                    + (f" (last: {last})" if last is not None else "")
                )
            with self._changed:
                self._changed.wait(_POLL_S)

    def _forward(self, request: Any, local: Callable[[Controller], Any]) -> Any:
        """A client's request for the controller: answered here or by the controller."""
        return self._call(
            local,
            lambda cid: self._transport.send(cid, request),
            type(request).__name__,
        )

    def create_topics(
        self, request: p.CreateTopicsRequest, *, internal_allowed: bool = False
    ) -> p.CreateTopicsResponse:
        if internal_allowed:
            return self._call(
                lambda c: c.create_topics(request, internal_allowed=True),
                lambda cid: self._transport.send_as_admin(cid, request),
                "CreateTopics",
            )
        return self._forward(request, lambda c: c.create_topics(request))  # type: ignore[no-any-return]

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        internal: bool = False,
    ) -> TopicImage:
        request = p.CreateTopicsRequest(
            [
                p.CreatableTopic(
                    name,
                    num_partitions,
                    replication_factor,
                    configs=[p.CreatableTopicConfig(k, v) for k, v in (configs or {}).items()],
                )
            ]
        )
        result = self.create_topics(request, internal_allowed=internal).topics[0]
        _raise_for(result.error_code, result.error_message, f"creating topic {name!r}")
        if not self.wait_for(lambda image: image.topic(name) is not None, self._timeout_s):
            raise RequestTimedOutError(f"topic {name!r} was created but never reached this broker")
        topic = self._image.topic(name)
        assert topic is not None
        return topic

    def delete_topics(self, request: p.DeleteTopicsRequest) -> p.DeleteTopicsResponse:
        return self._forward(request, lambda c: c.delete_topics(request))  # type: ignore[no-any-return]

    def create_partitions(self, request: p.CreatePartitionsRequest) -> p.CreatePartitionsResponse:
        return self._forward(request, lambda c: c.create_partitions(request))  # type: ignore[no-any-return]

    def elect_leaders(self, request: p.ElectLeadersRequest) -> p.ElectLeadersResponse:
        return self._forward(request, lambda c: c.elect_leaders(request))  # type: ignore[no-any-return]

    def alter_partition_reassignments(
        self, request: p.AlterPartitionReassignmentsRequest
    ) -> p.AlterPartitionReassignmentsResponse:
        return self._forward(request, lambda c: c.alter_partition_reassignments(request))  # type: ignore[no-any-return]

    def list_partition_reassignments(
        self, request: p.ListPartitionReassignmentsRequest
    ) -> p.ListPartitionReassignmentsResponse:
        return self._forward(request, lambda c: c.list_partition_reassignments(request))  # type: ignore[no-any-return]

    def alter_partitions(
        self, leader_id: int, changes: Mapping[TopicPartition, IsrChange]
    ) -> dict[TopicPartition, PartitionRegistration | TierlogError]:
        return self._call(
            lambda c: c.alter_partitions(leader_id, changes),
            lambda cid: self._remote_alter_partitions(cid, leader_id, changes),
            "AlterPartition",
            timeout_s=5.0,
        )

    def _remote_alter_partitions(
        self, controller_id: int, leader_id: int, changes: Mapping[TopicPartition, IsrChange]
    ) -> dict[TopicPartition, PartitionRegistration | TierlogError]:
        """One AlterPartition request for every change; a partition the answer leaves out is
        refused with NOT_CONTROLLER (asked again after the leader's backoff)."""
        answers: dict[TopicPartition, PartitionRegistration | TierlogError] = {}
        by_topic: dict[str, list[p.AlterPartitionPartitionData]] = {}
        topic_ids: dict[Uuid, str] = {}
        for tp, change in changes.items():
            topic = self._image.topic(tp.topic)
            if topic is None:
                answers[tp] = error_for_code(3)(f"unknown topic {tp.topic!r}")
                continue
            topic_ids[topic.topic_id] = tp.topic
            by_topic.setdefault(tp.topic, []).append(
                p.AlterPartitionPartitionData(
                    partition_index=tp.partition,
                    leader_epoch=change.leader_epoch,
                    new_isr_with_epochs=[
                        p.BrokerState(broker_id=b, broker_epoch=-1) for b in change.isr
                    ],
                    partition_epoch=change.partition_epoch,
                )
            )
        if not by_topic:
            return answers
        request = p.AlterPartitionRequest(
            broker_id=leader_id,
            broker_epoch=self.broker_epoch,
            topics=[
                p.AlterPartitionTopicData(topic_id=topic_id, partitions=by_topic[name])
                for topic_id, name in topic_ids.items()
            ],
        )
        response = self._transport.send(controller_id, request)
        _raise_for(response.error_code, None, "AlterPartition")
        for answered in response.topics:
            name = topic_ids.get(answered.topic_id)
            if name is None:
                continue
            for partition in answered.partitions:
                tp = TopicPartition(name, partition.partition_index)
                if tp not in changes:
                    continue
                if partition.error_code != p.NONE:
                    answers[tp] = error_for_code(partition.error_code)(
                        f"AlterPartition of {tp}: error {partition.error_code}"
                    )
                    continue
                current = self._image.registration(tp)
                answers[tp] = PartitionRegistration(
                    replicas=current.replicas if current is not None else changes[tp].isr,
                    isr=tuple(partition.isr),
                    leader=partition.leader_id,
                    leader_epoch=partition.leader_epoch,
                    partition_epoch=partition.partition_epoch,
                )
        for tp in changes:
            if tp not in answers:
                answers[tp] = NotControllerError(
                    f"AlterPartition of {tp}: the controller did not answer for it"
                )
        return answers

    def allocate_producer_ids(self, broker_id: int) -> ProducerIdsBlock:
        def remote(controller_id: int) -> ProducerIdsBlock:
            response = self._transport.send(
                controller_id,
                p.AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=self.broker_epoch),
            )
            _raise_for(response.error_code, None, "AllocateProducerIds")
            return ProducerIdsBlock(broker_id, response.producer_id_start, response.producer_id_len)

        return self._call(
            lambda c: c.allocate_producer_ids(broker_id), remote, "AllocateProducerIds"
        )

    def alter_topic_configs(
        self, name: str, changes: Mapping[str, str | None], *, validate_only: bool = False
    ) -> None:
        def remote(controller_id: int) -> None:
            request = p.IncrementalAlterConfigsRequest(
                [
                    p.AlterConfigsResource(
                        p.ResourceType.TOPIC,
                        name,
                        [
                            p.AlterableConfig(key, p.AlterConfigOp.SET, value)
                            if value is not None
                            else p.AlterableConfig(key, p.AlterConfigOp.DELETE)
                            for key, value in changes.items()
                        ],
                    )
                ],
                validate_only,
            )
            response = self._transport.send(controller_id, request)
            for result in response.responses:
                _raise_for(result.error_code, result.error_message, f"altering topic {name!r}")

        self._call(
            lambda c: c.alter_topic_configs(name, changes, validate_only=validate_only),
            remote,
            "IncrementalAlterConfigs",
        )

    # --- dynamic broker configs, in ZooKeeper ---------------------------------------------

    def broker_configs(self, broker_id: int) -> dict[str, str]:
        return {
            **self._read_broker_configs(None),
            **self._read_broker_configs(broker_id),
        }

    def _read_broker_configs(self, broker_id: int | None) -> dict[str, str]:
        path = paths.broker_config_path(broker_id)
        try:
            return self._read_config(path) or {}
        except ValueError as err:
            log.warning("ignoring %s", err)
            return {}

    def stored_topic_configs(self, topic: str) -> dict[str, str] | None:
        """Read from ``/config/topics/<topic>`` itself: a broker recovering its logs has no
        pushed image yet. Raises ValueError for an unreadable node rather than guess."""
        return self._read_config(paths.topic_config_path(topic))

    def _read_config(self, path: str) -> dict[str, str] | None:
        """The ``config`` object of a config znode; None if there is no such node."""
        try:
            raw, _stat = self._zk.get(path)
        except NoNodeError:
            return None
        try:
            data = json.loads(raw)
            return {str(k): str(v) for k, v in data.get("config", {}).items()}
        except (ValueError, AttributeError) as err:
            raise ValueError(f"unreadable config node {path}: {err}") from err

    def record_broker_configs(self, resource: str, changes: Mapping[str, str | None]) -> None:
        broker_id = int(resource) if resource else None
        path = paths.broker_config_path(broker_id)
        stored = self._read_broker_configs(broker_id)
        for key, value in changes.items():
            if value is None:
                stored.pop(key, None)
            else:
                stored[key] = value
        data = json.dumps({"version": 1, "config": stored}, sort_keys=True).encode()
        if self._zk.exists(path):
            self._zk.set(path, data)
        else:
            self._zk.create(path, data, makepath=True)


def _local_controlled_shutdown(controller: Controller, broker_id: int) -> list[TopicPartition]:
    controller.unregister_broker(broker_id)
    image = controller.image()
    return [
        TopicPartition(topic.name, index)
        for topic in image.topics.values()
        for index, reg in enumerate(topic.partitions)
        if reg.leader == broker_id
    ]
