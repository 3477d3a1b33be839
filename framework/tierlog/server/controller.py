"""The controller: the one place that decides topics, replica placement, leaders and epochs.

It creates, grows (CreatePartitions) and deletes topics (fresh ``Uuid`` topic ids, replicas
placed round-robin over the live brokers), elects leaders (the first live in-sync replica, or on
an operator's ElectLeaders the preferred one), bumps leader epochs on every
leader change, and tells brokers what to host through the transport: ``LeaderAndIsr`` to lead or
follow, ``StopReplica`` to stop (and delete) replicas. Leaders change their ISR through
:meth:`Controller.alter_partition` (Kafka's AlterPartition, in-process); a broker that stops
leaves every ISR it was in (unless it was the last member, as KRaft keeps it). Partitions move
between brokers by reassignment (KIP-455, :meth:`Controller.alter_partition_reassignments`):
the target replicas join as followers, and once all of them are in the ISR the partition
settles on them and the replicas left behind are stopped and deleted. Everything it
decides is saved to its :class:`~tierlog.coordination.store.MetadataStore` (a JSON file in the
data dir, or ZooKeeper) before anyone is told, so a restarted cluster comes back with the same
topics, ids, configs and epochs. Brokers read the
published :class:`~tierlog.server.image.ClusterImage` and are told of each new one. It also
hands out producer ids in blocks (KIP-730, :meth:`Controller.allocate_producer_ids`), persisting
the next block's start before a block leaves, so no id is given twice across restarts.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping

import attrs

from ..config import BrokerConfig, resolve_topic_config
from ..config.topic import TOPIC_CONFIG
from ..coordination.store import ClusterState, MetadataStore
from ..errors import (
    ElectionNotNeededError,
    FencedLeaderEpochError,
    InvalidConfigError,
    InvalidRequestError,
    InvalidTopicError,
    InvalidUpdateVersionError,
    NotLeaderOrFollowerError,
    TierlogError,
    TopicExistsError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from ..model import ZERO_UUID, TopicPartition, Uuid
from . import protocol as p
from . import reassignment
from .configs import wire_value
from .image import ClusterImage, IsrChange, PartitionRegistration, TopicImage
from .internal_topics import check_client_delete
from .leader_election import elect
from .partition_creation import plan_new_partitions
from .producer_ids import MAX_PRODUCER_ID, PRODUCER_ID_BLOCK_SIZE, ProducerIdsBlock
from .topic_creation import plan_replicas
from .topics import collision_key, validate_topic_name
from .transport import Transport

log = logging.getLogger(__name__)

ImageListener = Callable[[ClusterImage], None]


class Controller:
    """Cluster metadata and the decisions about it; thread-safe (one lock, short sections)."""

    def __init__(
        self,
        config: BrokerConfig,
        store: MetadataStore,
        transport: Transport,
        broker_ids: Iterable[int],
        *,
        controller_id: int | None = None,
        keep_leaders: bool = False,
    ) -> None:
        """``controller_id``: the broker whose process runs this controller (a multi-process
        cluster; None in an embedded one). ``keep_leaders``: a controller taking over from
        another keeps the leaders it finds, as Kafka's does; a cluster starting up (the
        embedded one) has nobody lead until its broker registers again."""
        self.config = config
        self._metadata_store = store
        self._transport = transport
        self._all_brokers = tuple(sorted(broker_ids))
        self._own_id = controller_id
        self._broker_epochs: dict[int, int] = {}
        self._lock = threading.RLock()
        # Requests to brokers are queued under ``_lock`` (so they leave in decision order) and
        # sent after it is released: a broker applying one may wait on a thread of its own
        # that is itself waiting for the controller (a replica fetcher in AlterPartition).
        self._outbox: deque[tuple[int, p.LeaderAndIsrRequest | p.StopReplicaRequest]] = deque()
        self._send_lock = threading.RLock()
        self._listeners: list[ImageListener] = []
        self._live: set[int] = set()
        # Claiming the store makes this the one controller, under a new controller epoch.
        claimed = store.claim(
            config.get_int("broker.id") if controller_id is None else controller_id,
            cluster_id=config.get_str("cluster.id") or None,
        )
        self._cluster_id = claimed.cluster_id
        self._controller_epoch = claimed.controller_epoch
        self._broker_configs: dict[str, dict[str, str]] = {
            k: dict(v) for k, v in claimed.broker_configs.items()
        }
        #: The first id of the next producer id block; persisted before a block is handed out.
        self._next_producer_id = claimed.next_producer_id
        self._topics: dict[str, TopicImage] = dict(claimed.topics)
        if not keep_leaders:
            # Nobody leads until its broker registers again; the election then bumps the epoch.
            for name, topic in claimed.topics.items():
                offline = tuple(attrs.evolve(reg, leader=p.NO_LEADER) for reg in topic.partitions)
                self._topics[name] = attrs.evolve(topic, partitions=offline)
        #: What the store holds: the controller's state goes back to it when a save fails.
        self._saved = claimed
        self._save()
        self._image = self._build_image()

    # --- persistence ----------------------------------------------------------------------

    def _state(self) -> ClusterState:
        return ClusterState(
            cluster_id=self._cluster_id,
            controller_epoch=self._controller_epoch,
            topics=self._topics,
            broker_configs=self._broker_configs,
            next_producer_id=self._next_producer_id,
        )

    def _save(self) -> None:
        """Saves the current state; call with the lock held. A save that fails leaves the
        controller with what the store held before, so nothing unsaved is ever published."""
        state = self._state()
        if state == self._saved:
            return
        try:
            self._metadata_store.save(state)
        except BaseException:
            saved = self._saved
            self._topics = dict(saved.topics)
            self._broker_configs = {k: dict(v) for k, v in saved.broker_configs.items()}
            self._next_producer_id = saved.next_producer_id
            raise
        self._saved = state

    # --- the image ------------------------------------------------------------------------

    @property
    def controller_id(self) -> int:
        """The broker whose process runs this controller in a multi-process cluster; in an
        embedded one the lowest live broker id, as the broker that would win an election."""
        if self._own_id is not None:
            return self._own_id
        with self._lock:
            return min(self._live) if self._live else p.NO_LEADER

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def broker_ids(self) -> tuple[int, ...]:
        """Every broker of the cluster, live or not."""
        return self._all_brokers

    @property
    def transport(self) -> Transport:
        """How requests reach the brokers; runtime components (the topic-based metadata
        manager's clients) send through it like any client."""
        return self._transport

    def image(self) -> ClusterImage:
        return self._image

    def subscribe(self, listener: ImageListener) -> Callable[[], None]:
        """Calls ``listener(image)`` after each change; returns an unsubscribe function."""
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def _build_image(self) -> ClusterImage:
        return ClusterImage(
            cluster_id=self._cluster_id,
            controller_id=self._own_id
            if self._own_id is not None
            else min(self._live)
            if self._live
            else p.NO_LEADER,
            controller_epoch=self._controller_epoch,
            live_brokers=frozenset(self._live),
            topics=self._topics,
            broker_configs={k: dict(v) for k, v in self._broker_configs.items()},
        )

    def _commit(self) -> ClusterImage:
        """Persists, then publishes the new image; call with the lock held."""
        self._save()
        self._image = image = self._build_image()
        for listener in list(self._listeners):
            try:
                listener(image)
            except Exception:
                log.exception("metadata listener %r failed", listener)
        return image

    # --- brokers --------------------------------------------------------------------------

    def register_broker(self, broker_id: int, *, broker_epoch: int = -1) -> None:
        """A broker is serving: tell it everything it hosts, and let it lead where it can.

        ``broker_epoch`` is its registration's (ZooKeeper's czxid) in a multi-process cluster:
        a broker seen again with another epoch bounced, and must be sent everything again.
        """
        with self._lock:
            self._live.add(broker_id)
            self._broker_epochs[broker_id] = broker_epoch
            if broker_id not in self._all_brokers:
                self._all_brokers = tuple(sorted({*self._all_brokers, broker_id}))
            changed = self._elect_leaders(lambda reg: reg.leader == p.NO_LEADER)
            removed = self._complete_reassignments()
            self._commit()
            self._send_full_state(broker_id)
            self._send_leader_and_isr(sorted({*changed, *removed}), exclude={broker_id})
            self._stop_removed_replicas(removed)
        self._flush()

    def take_over(self, live: Mapping[int, int]) -> None:
        """A controller elected in a running cluster: ``live`` maps the registered brokers to
        their epochs. Brokers that died with no controller to notice leave every ISR, leaders
        gone are replaced, and every live broker is sent its whole state."""
        with self._lock:
            self._live = set(live)
            self._broker_epochs = dict(live)
            self._all_brokers = tuple(sorted({*self._all_brokers, *live}))
            assigned = {
                b for topic in self._topics.values() for reg in topic.partitions for b in reg.isr
            }
            shrunk = [
                tp for dead in sorted(assigned - self._live) for tp in self._remove_from_isrs(dead)
            ]
            changed = self._elect_leaders(lambda reg: reg.leader not in self._live)
            removed = self._complete_reassignments()
            self._commit()
            for broker_id in sorted(self._live):
                self._send_full_state(broker_id)
            self._stop_removed_replicas(removed)
            log.info(
                "controller %s took over: brokers %s live, %d ISR(s) shrunk, %d leader(s) elected",
                self._own_id,
                sorted(self._live),
                len(shrunk),
                len(changed),
            )
        self._flush()

    def unregister_broker(self, broker_id: int) -> None:
        """A broker stops (controlled shutdown or failure): take it out of every ISR (keeping a
        last member, the only replica known to hold everything) and move leadership away."""
        with self._lock:
            self._live.discard(broker_id)
            self._broker_epochs.pop(broker_id, None)
            shrunk = self._remove_from_isrs(broker_id)
            changed = self._elect_leaders(lambda reg: reg.leader == broker_id)
            self._commit()
            self._send_leader_and_isr(sorted({*shrunk, *changed}))
        self._flush()

    def _remove_from_isrs(self, broker_id: int) -> list[TopicPartition]:
        changed: list[TopicPartition] = []
        for name, topic in list(self._topics.items()):
            partitions = list(topic.partitions)
            for index, reg in enumerate(partitions):
                if broker_id not in reg.isr or len(reg.isr) == 1:
                    continue
                partitions[index] = attrs.evolve(
                    reg,
                    isr=tuple(b for b in reg.isr if b != broker_id),
                    partition_epoch=reg.partition_epoch + 1,
                )
                changed.append(TopicPartition(name, index))
            self._topics[name] = attrs.evolve(topic, partitions=tuple(partitions))
        return changed

    def alter_partition(
        self,
        tp: TopicPartition,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        isr: Iterable[int],
    ) -> PartitionRegistration:
        """One leader's ISR change (see :meth:`alter_partitions`); raises if refused."""
        change = IsrChange(leader_epoch, partition_epoch, tuple(isr))
        answer = self.alter_partitions(leader_id, {tp: change})[tp]
        if isinstance(answer, TierlogError):
            raise answer
        return answer

    def alter_partitions(
        self, leader_id: int, changes: Mapping[TopicPartition, IsrChange]
    ) -> dict[TopicPartition, PartitionRegistration | TierlogError]:
        """A leader's ISR changes (Kafka's AlterPartition), committed together; each
        partition's answer is its new registration or the error that refused it.

        A change is refused unless ``leader_id`` leads the partition at the change's leader
        epoch and its partition epoch is current, or is older and the ISR asked for is
        already in place (the same request again, its answer lost: the current registration
        is the answer); every new member must be a live assigned replica. A change bumps the
        partition epoch and is published in the image; brokers learn of it from there, as
        KRaft brokers do, the leader from the answer. An ISR that now holds every target of a
        reassignment completes it (the replicas are told by LeaderAndIsr and StopReplica).
        One commit serves the whole batch: a restarted follower rejoining a thousand ISRs
        costs a few commits, not a thousand.
        """
        answers: dict[TopicPartition, PartitionRegistration | TierlogError] = {}
        with self._lock:
            changed: list[TopicPartition] = []
            for tp, change in changes.items():
                try:
                    reg = self._registration_for_isr_change(tp, leader_id, change)
                except TierlogError as err:
                    answers[tp] = err
                    continue
                if reg.isr == change.isr and change.partition_epoch < reg.partition_epoch:
                    # Asked again after a lost answer (a timeout, a controller failover): the
                    # change is made, so the leader learns the current registration (as in
                    # Kafka, before the epoch check, or it would be refused forever).
                    answers[tp] = reg
                    continue
                try:
                    self._check_isr_change(tp, reg, leader_id, change)
                except TierlogError as err:
                    answers[tp] = err
                    continue
                updated = attrs.evolve(reg, isr=change.isr, partition_epoch=reg.partition_epoch + 1)
                self._store(tp, updated)
                log.info("%s: ISR %s -> %s", tp, reg.isr, change.isr)
                answers[tp] = updated
                changed.append(tp)
            if not changed:
                return answers
            removed = self._complete_reassignments(changed)
            self._commit()
            if removed:
                self._send_leader_and_isr(removed)
                self._stop_removed_replicas(removed)
        if removed:
            # The caller (a leader's ISR sender, a request handler) does not wait for the
            # brokers to apply a completed reassignment.
            self._flush_in_background()
        return answers

    def _registration_for_isr_change(
        self, tp: TopicPartition, leader_id: int, change: IsrChange
    ) -> PartitionRegistration:
        """The registration ``change`` applies to, if ``leader_id`` leads it at its epoch."""
        topic = self._topics.get(tp.topic)
        reg = None if topic is None else topic.partition(tp.partition)
        if topic is None or reg is None:
            raise UnknownTopicOrPartitionError(f"unknown topic or partition {tp}")
        if reg.leader != leader_id:
            raise NotLeaderOrFollowerError(
                f"broker {leader_id} does not lead {tp} (leader: {reg.leader})"
            )
        if reg.leader_epoch != change.leader_epoch:
            raise FencedLeaderEpochError(
                f"{tp}: leader epoch {change.leader_epoch}, the current is {reg.leader_epoch}"
            )
        return reg

    def _check_isr_change(
        self, tp: TopicPartition, reg: PartitionRegistration, leader_id: int, change: IsrChange
    ) -> None:
        """Raises unless ``change`` is current and names live assigned replicas only."""
        if reg.partition_epoch != change.partition_epoch:
            raise InvalidUpdateVersionError(
                f"{tp}: partition epoch {change.partition_epoch} is not the current "
                f"{reg.partition_epoch}"
            )
        wanted = change.isr
        if leader_id not in wanted or len(set(wanted)) != len(wanted):
            raise InvalidRequestError(f"{tp}: invalid ISR {wanted}")
        for replica in wanted:
            if replica not in reg.replicas:
                raise InvalidRequestError(f"{tp}: {replica} is not a replica")
            if replica not in reg.isr and replica not in self._live:
                raise InvalidRequestError(f"{tp}: broker {replica} is not alive")

    def _elect_leaders(
        self, needs_election: Callable[[PartitionRegistration], bool]
    ) -> list[TopicPartition]:
        """Re-elects where ``needs_election``; returns the partitions whose leader changed.

        Only a live in-sync replica may lead, unless the topic's (or the cluster's)
        ``unclean.leader.election.enable`` lets any live replica take over, with data loss.
        """
        changed: list[TopicPartition] = []
        for name, topic in list(self._topics.items()):
            unclean = self._unclean_allowed(topic)
            partitions = list(topic.partitions)
            for index, reg in enumerate(partitions):
                if not needs_election(reg):
                    continue
                leader = next((b for b in reg.isr if b in self._live), p.NO_LEADER)
                if leader == p.NO_LEADER and unclean:
                    leader = next((b for b in reg.replicas if b in self._live), p.NO_LEADER)
                if leader == reg.leader:
                    continue
                isr = reg.isr if leader == p.NO_LEADER or leader in reg.isr else (leader,)
                partitions[index] = attrs.evolve(
                    reg,
                    isr=isr,
                    leader=leader,
                    leader_epoch=reg.leader_epoch + 1,
                    partition_epoch=reg.partition_epoch + 1,
                )
                changed.append(TopicPartition(name, index))
            self._topics[name] = TopicImage(
                name, topic.topic_id, tuple(partitions), configs=topic.configs
            )
        return changed

    def elect_leaders(self, request: p.ElectLeadersRequest) -> p.ElectLeadersResponse:
        """ElectLeaders (see ``leader_election.py``), each partition answered on its own.

        With ``topic_partitions`` None every partition of the cluster is tried and, as in
        Kafka, those that needed no election are left out of the answer.
        """
        if request.election_type not in tuple(p.ElectionType):
            return p.ElectLeadersResponse(InvalidRequestError.code or -1)
        everything = request.topic_partitions is None
        with self._lock:
            if request.topic_partitions is None:
                wanted = [
                    TopicPartition(name, index)
                    for name, topic in sorted(self._topics.items())
                    for index in range(len(topic.partitions))
                ]
            else:
                # A partition named twice is elected (and answered) once.
                wanted = list(
                    dict.fromkeys(
                        TopicPartition(t.topic, index)
                        for t in request.topic_partitions
                        for index in t.partitions
                    )
                )
            answers: dict[str, list[p.PartitionResult]] = {}
            elected: list[TopicPartition] = []
            for tp in wanted:
                try:
                    reg = self._registration(tp)
                    self._store(tp, elect(tp, reg, request.election_type, self._live))
                except TierlogError as err:
                    if everything and isinstance(err, ElectionNotNeededError):
                        continue
                    answers.setdefault(tp.topic, []).append(
                        p.PartitionResult(tp.partition, err.code or -1, str(err))
                    )
                    continue
                log.info(
                    "%s: leader %d elected (%s)",
                    tp,
                    self._registration(tp).leader,
                    p.ElectionType(request.election_type).name.lower(),
                )
                elected.append(tp)
                answers.setdefault(tp.topic, []).append(p.PartitionResult(tp.partition))
            if elected:
                self._commit()
                self._send_leader_and_isr(elected)
        self._flush()
        return p.ElectLeadersResponse(
            replica_election_results=[
                p.ReplicaElectionResult(topic, results) for topic, results in answers.items()
            ]
        )

    def _unclean_allowed(self, topic: TopicImage) -> bool:
        try:
            return bool(
                resolve_topic_config(topic.configs, self.config)["unclean.leader.election.enable"]
            )
        except TierlogError:
            return self.config.get_bool("unclean.leader.election.enable")

    def _state_of(
        self, tp: TopicPartition, *, is_new: bool = False
    ) -> p.LeaderAndIsrPartitionState:
        reg = self._topics[tp.topic].partitions[tp.partition]
        return p.LeaderAndIsrPartitionState(
            topic_name=tp.topic,
            partition_index=tp.partition,
            leader=reg.leader,
            leader_epoch=reg.leader_epoch,
            isr=reg.isr,
            partition_epoch=reg.partition_epoch,
            replicas=reg.replicas,
            is_new=is_new,
            adding_replicas=reg.adding_replicas,
            removing_replicas=reg.removing_replicas,
        )

    def _send_full_state(self, broker_id: int) -> None:
        states = [
            self._state_of(TopicPartition(name, index))
            for name, topic in self._topics.items()
            for index, reg in enumerate(topic.partitions)
            if broker_id in reg.replicas
        ]
        self._send(broker_id, states, full=True)

    def _send_leader_and_isr(
        self,
        partitions: Iterable[TopicPartition],
        *,
        exclude: Iterable[int] = (),
        is_new: bool = False,
    ) -> None:
        skipped = set(exclude)
        by_broker: dict[int, list[p.LeaderAndIsrPartitionState]] = {}
        for tp in partitions:
            state = self._state_of(tp, is_new=is_new)
            for replica in state.replicas:
                if replica in self._live and replica not in skipped:
                    by_broker.setdefault(replica, []).append(state)
        for broker_id, states in sorted(by_broker.items()):
            self._send(broker_id, states, full=False)

    def _send(
        self, broker_id: int, states: list[p.LeaderAndIsrPartitionState], *, full: bool
    ) -> None:
        """Queues a LeaderAndIsr for ``broker_id``; :meth:`_flush` delivers it."""
        topics = {s.topic_name for s in states}
        request = p.LeaderAndIsrRequest(
            controller_id=self.controller_id,
            controller_epoch=self._controller_epoch,
            partition_states=states,
            topic_ids=tuple(sorted((t, self._topics[t].topic_id) for t in topics)),
            live_leaders=tuple(sorted(self._live)),
            type=p.LEADER_AND_ISR_FULL if full else p.LEADER_AND_ISR_INCREMENTAL,
        )
        self._outbox.append((broker_id, request))

    def _flush(self) -> None:
        """Delivers the queued requests in order; call without holding ``_lock``.

        Whoever holds the send lock drains the queue, so a caller returns only once its own
        requests (and any queued before them) were delivered.
        """
        with self._send_lock:
            while self._outbox:
                broker_id, request = self._outbox.popleft()
                if isinstance(request, p.StopReplicaRequest):
                    self._deliver_stop_replica(broker_id, request)
                else:
                    self._deliver_leader_and_isr(broker_id, request)

    def _flush_in_background(self) -> None:
        """Delivers the queue from a thread of the controller's own, for callers that must not
        wait for brokers to apply what they caused."""
        threading.Thread(target=self._flush_logged, name="controller-sender", daemon=True).start()

    def _flush_logged(self) -> None:
        try:
            self._flush()
        except Exception:
            log.exception("delivering controller requests failed")

    def _deliver_leader_and_isr(self, broker_id: int, request: p.LeaderAndIsrRequest) -> None:
        try:
            response = self._transport.send(broker_id, request)
        except TierlogError as err:
            # The broker re-syncs from a full LeaderAndIsr when it registers again.
            log.warning("LeaderAndIsr to broker %d failed: %s", broker_id, err)
            return
        for error in response.partition_errors:
            if error.error_code != p.NONE:
                log.warning(
                    "broker %d could not apply LeaderAndIsr for %s-%d: error %d",
                    broker_id,
                    error.topic_name,
                    error.partition_index,
                    error.error_code,
                )

    # --- topics ---------------------------------------------------------------------------

    def create_topics(
        self, request: p.CreateTopicsRequest, *, internal_allowed: bool = False
    ) -> p.CreateTopicsResponse:
        """CreateTopics: each topic is checked completely before anything is written.
        ``internal_allowed``: the runtime's own request (a broker creating an internal topic
        through the controller), which may use internal names."""
        counts: dict[str, int] = {}
        for topic in request.topics:
            counts[topic.name] = counts.get(topic.name, 0) + 1
        results = []
        with self._lock:
            created: list[TopicPartition] = []
            requested = 0
            for topic in request.topics:
                if counts[topic.name] > 1:
                    results.append(
                        p.CreatableTopicResult(
                            topic.name,
                            error_code=InvalidRequestError.code,
                            error_message=f"topic {topic.name!r} appears more than once",
                        )
                    )
                    continue
                try:
                    image = self._plan_topic(
                        topic, internal_allowed=internal_allowed, requested=requested
                    )
                except TierlogError as err:
                    results.append(
                        p.CreatableTopicResult(
                            topic.name, error_code=err.code or -1, error_message=str(err)
                        )
                    )
                    continue
                requested += len(image.partitions)
                if not request.validate_only:
                    self._topics[image.name] = image
                    created.extend(image.topic_partitions())
                results.append(self._created_result(image, request.validate_only))
            if created:
                self._commit()
                self._send_leader_and_isr(created, is_new=True)
        self._flush()
        return p.CreateTopicsResponse(results)

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        internal: bool = False,
    ) -> TopicImage:
        """Creates one topic for the runtime itself (internal names allowed); raises on error."""
        topic = p.CreatableTopic(
            name,
            num_partitions,
            replication_factor,
            configs=[p.CreatableTopicConfig(k, v) for k, v in (configs or {}).items()],
        )
        with self._lock:
            image = self._plan_topic(topic, internal_allowed=internal)
            self._topics[name] = image
            self._commit()
            self._send_leader_and_isr(image.topic_partitions(), is_new=True)
        self._flush()
        return image

    def _plan_topic(
        self, topic: p.CreatableTopic, *, internal_allowed: bool = False, requested: int = 0
    ) -> TopicImage:
        """The topic as it would be created; raises the error to answer (see
        ``topic_creation.py``). ``requested``: partitions asked for earlier in the request."""
        name = validate_topic_name(topic.name, internal_allowed=True)
        if name in self._topics:
            raise TopicExistsError(f"topic {name!r} already exists")
        validate_topic_name(name, internal_allowed=internal_allowed)
        clash = next((t for t in self._topics if collision_key(t) == collision_key(name)), None)
        if clash is not None:
            raise InvalidTopicError(
                f"topic {name!r} collides with existing topic {clash!r}: '.' and '_' are the "
                f"same in metric names"
            )
        configs: dict[str, str] = {}
        for entry in topic.configs:
            if entry.value is None:
                raise InvalidConfigError(f"{entry.name}: a null value", key=entry.name)
            if entry.name in configs:
                raise InvalidRequestError(f"config {entry.name!r} is given twice")
            configs[entry.name] = entry.value
        resolve_topic_config(configs, self.config)
        assignment = plan_replicas(
            topic,
            self.config,
            self._all_brokers,
            sorted(self._live),
            existing=sum(len(t.partitions) for t in self._topics.values()),
            requested=requested,
        )
        registrations = [self._new_registration(replicas) for replicas in assignment]
        topic_id = Uuid.random()
        while any(t.topic_id == topic_id for t in self._topics.values()):
            topic_id = Uuid.random()
        return TopicImage(name, topic_id, tuple(registrations), configs=configs)

    def _new_registration(self, replicas: tuple[int, ...]) -> PartitionRegistration:
        """A new, empty partition: led by its first live replica, and every live replica is
        in sync (there is nothing to catch up on)."""
        leader = next((b for b in replicas if b in self._live), p.NO_LEADER)
        in_sync = tuple(b for b in replicas if b in self._live)
        return PartitionRegistration(replicas=replicas, isr=in_sync or replicas, leader=leader)

    def _created_result(self, image: TopicImage, validate_only: bool) -> p.CreatableTopicResult:
        resolved = resolve_topic_config(image.configs, self.config)
        configs = []
        for key in TOPIC_CONFIG:
            value = resolved.values[key.name]
            overridden = key.name in resolved.overrides
            configs.append(
                p.CreatableTopicConfigs(
                    name=key.name,
                    value=None if key.secret else wire_value(value),
                    read_only=False,
                    config_source=p.ConfigSource.TOPIC_CONFIG
                    if overridden
                    else p.ConfigSource.DEFAULT_CONFIG,
                    is_sensitive=key.secret,
                )
            )
        return p.CreatableTopicResult(
            name=image.name,
            topic_id=ZERO_UUID if validate_only else image.topic_id,
            num_partitions=len(image.partitions),
            replication_factor=len(image.partitions[0].replicas),
            configs=configs,
        )

    def delete_topics(self, request: p.DeleteTopicsRequest) -> p.DeleteTopicsResponse:
        """DeleteTopics by name or id: stop every replica and delete its directory.

        Each entry is answered on its own, as Kafka's ``ControllerApis.deleteTopics`` does: an
        entry with neither name nor id, or with both, and a topic named twice (by name or id)
        are INVALID_REQUEST and delete nothing; an unknown one UNKNOWN_TOPIC_OR_PARTITION; an
        internal topic TOPIC_AUTHORIZATION_FAILED (``internal_topics.py``).
        """
        wanted: list[tuple[str | None, Uuid]] = [(n, ZERO_UUID) for n in request.topic_names]
        wanted.extend((t.name, t.topic_id) for t in request.topics)
        results = []
        with self._lock:
            found = [self._deletion_target(name, topic_id) for name, topic_id in wanted]
            named = Counter(t.name for t in found if isinstance(t, TopicImage))
            doomed: list[TopicImage] = []
            for (name, topic_id), target in zip(wanted, found, strict=True):
                if isinstance(target, TopicImage) and named[target.name] > 1:
                    target = InvalidRequestError(f"topic {target.name!r} is named more than once")
                if isinstance(target, TierlogError):
                    results.append(
                        p.DeletableTopicResult(name, topic_id, target.code or -1, str(target))
                    )
                    continue
                doomed.append(target)
                results.append(p.DeletableTopicResult(target.name, target.topic_id))
            if doomed:
                for topic in doomed:
                    del self._topics[topic.name]
                self._commit()
                self._stop_replicas(doomed)
        self._flush()
        return p.DeleteTopicsResponse(results)

    def create_partitions(self, request: p.CreatePartitionsRequest) -> p.CreatePartitionsResponse:
        """CreatePartitions: grows each topic (see ``partition_creation.py``); the new
        partitions get leaders at once and existing ones are left as they are. A topic named
        twice is INVALID_REQUEST, as in Kafka's ``ControllerApis.createPartitions``."""
        named = Counter(t.name for t in request.topics)
        results = []
        with self._lock:
            added: list[TopicPartition] = []
            requested = 0
            existing = sum(len(t.partitions) for t in self._topics.values())
            for wanted in request.topics:
                try:
                    if named[wanted.name] > 1:
                        raise InvalidRequestError(f"topic {wanted.name!r} appears more than once")
                    topic = self._topics.get(wanted.name)
                    if topic is None:
                        raise UnknownTopicOrPartitionError(f"unknown topic {wanted.name!r}")
                    assignment = plan_new_partitions(
                        topic,
                        wanted,
                        self.config,
                        frozenset(self._all_brokers),
                        sorted(self._live),
                        existing=existing + requested,
                        requested=requested,
                    )
                except TierlogError as err:
                    results.append(
                        p.CreatePartitionsTopicResult(wanted.name, err.code or -1, str(err))
                    )
                    continue
                requested += len(assignment)
                results.append(p.CreatePartitionsTopicResult(wanted.name))
                if request.validate_only:
                    continue
                first = len(topic.partitions)
                grown = (*topic.partitions, *(self._new_registration(r) for r in assignment))
                self._topics[topic.name] = attrs.evolve(topic, partitions=grown)
                added.extend(TopicPartition(topic.name, i) for i in range(first, len(grown)))
                log.info("%s: %d -> %d partitions", topic.name, first, len(grown))
            if added:
                self._commit()
                self._send_leader_and_isr(added, is_new=True)
        self._flush()
        return p.CreatePartitionsResponse(results)

    def _deletion_target(self, name: str | None, topic_id: Uuid) -> TopicImage | TierlogError:
        """The topic a DeleteTopics entry names, or the error to answer for it."""
        if name is None and topic_id == ZERO_UUID:
            return InvalidRequestError("neither a topic name nor a topic id is given")
        if name is not None and topic_id != ZERO_UUID:
            return InvalidRequestError("give a topic name or a topic id, not both")
        if name is not None:
            topic = self._topics.get(name)
        else:
            topic = next((t for t in self._topics.values() if t.topic_id == topic_id), None)
        if topic is None:
            return UnknownTopicOrPartitionError(
                f"unknown topic {name!r}" if name is not None else f"unknown topic id {topic_id}"
            )
        try:
            check_client_delete(topic.name)
        except TierlogError as err:
            return err
        return topic

    def _stop_replicas(self, topics: Iterable[TopicImage]) -> None:
        by_broker: dict[int, list[p.StopReplicaPartitionState]] = {}
        for topic in topics:
            for index, reg in enumerate(topic.partitions):
                state = p.StopReplicaPartitionState(
                    topic.name, index, leader_epoch=reg.leader_epoch, delete_partition=True
                )
                for replica in reg.replicas:
                    if replica in self._live:
                        by_broker.setdefault(replica, []).append(state)
        for broker_id, states in sorted(by_broker.items()):
            request = p.StopReplicaRequest(self.controller_id, self._controller_epoch, states)
            self._outbox.append((broker_id, request))

    def _deliver_stop_replica(self, broker_id: int, request: p.StopReplicaRequest) -> None:
        try:
            self._transport.send(broker_id, request)
        except TierlogError as err:
            # A broker that missed it deletes the strays on its next full LeaderAndIsr.
            log.warning("StopReplica to broker %d failed: %s", broker_id, err)

    # --- reassignments (KIP-455) -----------------------------------------------------------

    def alter_partition_reassignments(
        self, request: p.AlterPartitionReassignmentsRequest
    ) -> p.AlterPartitionReassignmentsResponse:
        """AlterPartitionReassignments: start, replace (a new target while one is under way) or,
        with ``replicas`` None, cancel the reassignment of each partition; each partition is
        checked and answered on its own."""
        responses = []
        with self._lock:
            moved: list[TopicPartition] = []
            removed: dict[TopicPartition, tuple[int, ...]] = {}
            for topic in request.topics:
                answers = []
                for wanted in topic.partitions:
                    try:
                        tp = self._existing_partition(topic.name, wanted.partition_index)
                        if wanted.replicas is None:
                            removed[tp] = self._cancel_reassignment(tp)
                        elif self._start_reassignment(tp, wanted.replicas):
                            moved.append(tp)
                    except TierlogError as err:
                        answers.append(
                            p.ReassignablePartitionResponse(
                                wanted.partition_index,
                                error_code=err.code or -1,
                                error_message=str(err),
                            )
                        )
                        continue
                    answers.append(p.ReassignablePartitionResponse(wanted.partition_index))
                responses.append(p.ReassignableTopicResponse(topic.name, answers))
            # A shrink (or a target already in sync) completes at once.
            removed.update(self._complete_reassignments(moved))
            if moved or removed:
                self._commit()
                self._send_leader_and_isr(sorted({*moved, *removed}))
                self._stop_removed_replicas(removed)
        self._flush()
        return p.AlterPartitionReassignmentsResponse(responses)

    def list_partition_reassignments(
        self, request: p.ListPartitionReassignmentsRequest
    ) -> p.ListPartitionReassignmentsResponse:
        """The reassignments under way (of the partitions asked for); others are left out."""
        with self._lock:
            if request.topics is None:
                wanted = [
                    TopicPartition(name, index)
                    for name, topic in sorted(self._topics.items())
                    for index in range(len(topic.partitions))
                ]
            else:
                # As Kafka, partitions that do not exist are left out, not answered.
                wanted = [
                    TopicPartition(t.name, index)
                    for t in request.topics
                    if t.name in self._topics
                    for index in t.partition_indexes
                    if index >= 0
                ]
            ongoing: dict[str, list[p.OngoingPartitionReassignment]] = {}
            for tp in wanted:
                topic = self._topics.get(tp.topic)
                reg = None if topic is None else topic.partition(tp.partition)
                moving = reassignment.ongoing(reg, tp.partition)
                if moving is not None:
                    ongoing.setdefault(tp.topic, []).append(moving)
        return p.ListPartitionReassignmentsResponse(
            [p.OngoingTopicReassignment(name, parts) for name, parts in ongoing.items()]
        )

    def _existing_partition(self, topic: str, index: int) -> TopicPartition:
        """``topic``-``index`` if the cluster has it; UNKNOWN_TOPIC_OR_PARTITION otherwise."""
        known = self._topics.get(topic)
        if known is None or known.partition(index) is None:
            raise UnknownTopicOrPartitionError(f"unknown topic or partition {topic}-{index}")
        return TopicPartition(topic, index)

    def _registration(self, tp: TopicPartition) -> PartitionRegistration:
        topic = self._topics.get(tp.topic)
        reg = None if topic is None else topic.partition(tp.partition)
        if reg is None:
            raise UnknownTopicOrPartitionError(f"unknown topic or partition {tp}")
        return reg

    def _store(self, tp: TopicPartition, reg: PartitionRegistration) -> None:
        topic = self._topics[tp.topic]
        partitions = list(topic.partitions)
        partitions[tp.partition] = reg
        self._topics[tp.topic] = attrs.evolve(topic, partitions=tuple(partitions))

    def _start_reassignment(self, tp: TopicPartition, target: tuple[int, ...]) -> bool:
        """Records the move of ``tp`` to ``target``; returns whether anything changed."""
        reg = self._registration(tp)
        moving = reassignment.started(tp, reg, target, self._all_brokers)
        if moving is None:
            return False
        self._store(tp, moving)
        log.info("%s: reassigning %s -> %s", tp, reg.replicas, list(target))
        return True

    def _cancel_reassignment(self, tp: TopicPartition) -> tuple[int, ...]:
        """Goes back to the replicas from before the reassignment; returns the replicas that
        were being added, to stop."""
        reg = self._registration(tp)
        back = reassignment.cancelled(tp, reg, self._live)
        self._store(tp, back)
        log.info("%s: reassignment cancelled, back on %s", tp, list(back.replicas))
        return reg.adding_replicas

    def _complete_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[int, ...]]:
        """Settles each reassigning partition (of ``partitions``, default all) whose target
        replicas are all in sync; returns those settled, with the replicas each left behind."""
        if partitions is None:
            partitions = [
                TopicPartition(name, index)
                for name, topic in self._topics.items()
                for index, reg in enumerate(topic.partitions)
                if reg.reassigning
            ]
        removed: dict[TopicPartition, tuple[int, ...]] = {}
        for tp in partitions:
            topic = self._topics.get(tp.topic)
            reg = None if topic is None else topic.partition(tp.partition)
            done = None if reg is None else reassignment.completed(reg, self._live)
            if reg is None or done is None:
                continue
            self._store(tp, done)
            log.info("%s: reassignment to %s completed", tp, list(done.replicas))
            removed[tp] = reg.removing_replicas
        return removed

    def _stop_removed_replicas(self, removed: Mapping[TopicPartition, tuple[int, ...]]) -> None:
        """Queues StopReplica (delete) for the replicas a reassignment left behind. Only their
        local copy goes: the broker keeps the remote data of a topic that still exists."""
        by_broker: dict[int, list[p.StopReplicaPartitionState]] = {}
        for tp, brokers in sorted(removed.items()):
            reg = self._topics[tp.topic].partitions[tp.partition]
            state = p.StopReplicaPartitionState(
                tp.topic, tp.partition, leader_epoch=reg.leader_epoch, delete_partition=True
            )
            for broker_id in brokers:
                # One down now deletes the stray on its next full LeaderAndIsr.
                if broker_id in self._live:
                    by_broker.setdefault(broker_id, []).append(state)
        for broker_id, states in sorted(by_broker.items()):
            request = p.StopReplicaRequest(self.controller_id, self._controller_epoch, states)
            self._outbox.append((broker_id, request))

    # --- configs --------------------------------------------------------------------------

    def alter_topic_configs(
        self, name: str, changes: Mapping[str, str | None], *, validate_only: bool = False
    ) -> None:
        """Sets (or, with None, removes) topic overrides; validated, persisted, then published."""
        with self._lock:
            topic = self._topics.get(name)
            if topic is None:
                raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
            current = resolve_topic_config(topic.configs, self.config)
            current.with_changes(dict(changes), self.config)
            updated = dict(topic.configs)
            canonical = TOPIC_CONFIG.canonicalize(dict(changes))
            for key, value in canonical.items():
                for synonym in TOPIC_CONFIG[key].synonyms:
                    updated.pop(synonym, None)
                if value is None:
                    updated.pop(key, None)
                else:
                    updated[key] = str(value)
            if validate_only:
                return
            self._topics[name] = TopicImage(name, topic.topic_id, topic.partitions, configs=updated)
            self._commit()

    def record_broker_configs(self, resource: str, changes: Mapping[str, str | None]) -> None:
        """Persists dynamic broker configs (already applied and validated by the broker)."""
        with self._lock:
            stored = self._broker_configs.setdefault(resource, {})
            for key, value in changes.items():
                if value is None:
                    stored.pop(key, None)
                else:
                    stored[key] = value
            if not stored:
                del self._broker_configs[resource]
            self._commit()

    def stored_topic_configs(self, topic: str) -> dict[str, str] | None:
        """A topic's config overrides; None for a topic the cluster does not know."""
        found = self._image.topic(topic)
        return None if found is None else dict(found.configs)

    def broker_configs(self, broker_id: int) -> dict[str, str]:
        """The dynamic configs stored for ``broker_id``, over the cluster-wide defaults."""
        with self._lock:
            return {
                **self._broker_configs.get("", {}),
                **self._broker_configs.get(str(broker_id), {}),
            }

    # --- producer ids (KIP-730) -------------------------------------------------------------

    def allocate_producer_ids(self, broker_id: int) -> ProducerIdsBlock:
        """A fresh block of producer ids for ``broker_id`` (Kafka's AllocateProducerIds).

        The start of the following block is persisted first: should the controller crash
        right after answering, its successor still never gives these ids again.
        """
        with self._lock:
            first = self._next_producer_id
            if first + PRODUCER_ID_BLOCK_SIZE - 1 > MAX_PRODUCER_ID:
                raise UnknownServerError("every producer id has been handed out")
            block = ProducerIdsBlock(broker_id, first, PRODUCER_ID_BLOCK_SIZE)
            self._next_producer_id = block.next_block_first_id
            self._save()
            log.info("producer ids %d..%d to broker %d", first, block.last_producer_id, broker_id)
            return block

    def live_brokers(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._live)

    def live_broker_epochs(self) -> dict[int, int]:
        """Each live broker's epoch, as it registered (-1 in an embedded cluster)."""
        with self._lock:
            return {broker_id: self._broker_epochs.get(broker_id, -1) for broker_id in self._live}
