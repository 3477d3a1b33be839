"""Which replicas this broker hosts and in what role, as the controller says.

LeaderAndIsr makes replicas leaders or followers (starting and stopping replica fetchers, and
telling the remote log manager); StopReplica, and a full LeaderAndIsr for replicas it no longer
names, remove them. Of the brokers removing a deleted topic's replica, exactly one deletes its
remote data: the leader, or without a live leader the lowest-numbered live replica.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..errors import StaleControllerEpochError, TierlogError, error_code_of
from ..model import TopicPartition
from . import protocol as p
from .partition import Partition, ReplicaRole
from .replica_fetcher import InitialFetchState
from .request_validation import (
    check_controller_epoch,
    check_leader_and_isr_state,
    check_replica_state,
    topic_id_of,
)

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)


def leader_and_isr(broker: Broker, request: p.LeaderAndIsrRequest) -> p.LeaderAndIsrResponse:
    try:
        check_controller_epoch(request.controller_epoch, broker.controller.image())
    except StaleControllerEpochError as err:
        return p.LeaderAndIsrResponse(error_code=err.code or -1)
    topic_ids = dict(request.topic_ids)
    errors = []
    leaders: list[Partition] = []
    followers: list[Partition] = []
    wanted: set[TopicPartition] = set()
    fetchers = broker.replica_fetcher_manager
    start_fetching: dict[TopicPartition, InitialFetchState] = {}
    for state in request.partition_states:
        try:
            check_leader_and_isr_state(state)
            topic_id = topic_id_of(state.topic_name, topic_ids)
        except TierlogError as err:
            errors.append(
                p.LeaderAndIsrPartitionError(
                    state.topic_name, state.partition_index, error_code_of(err)
                )
            )
            continue
        tp = TopicPartition(state.topic_name, state.partition_index)
        wanted.add(tp)
        code = p.NONE
        try:
            partition = broker.get_or_create_partition(tp, topic_id)
            if partition.is_stale_leader_and_isr(state):
                log.info("broker %d: ignoring stale LeaderAndIsr for %s", broker.broker_id, tp)
            elif state.leader == broker.broker_id:
                if fetchers is not None:
                    fetchers.remove_fetcher_for_partitions([tp])
                partition.make_leader(state, topic_id)
                leaders.append(partition)
            else:
                new_leader = (
                    partition.role is not ReplicaRole.FOLLOWER
                    or partition.leader_id != state.leader
                    or partition.leader_epoch != state.leader_epoch
                )
                if new_leader and fetchers is not None:
                    fetchers.remove_fetcher_for_partitions([tp])
                partition.make_follower(state, topic_id)
                followers.append(partition)
                if new_leader and state.leader != p.NO_LEADER:
                    start_fetching[tp] = InitialFetchState(
                        state.leader, state.leader_epoch, partition.log.log_end_offset
                    )
        except Exception as err:
            log.exception("broker %d: LeaderAndIsr for %s failed", broker.broker_id, tp)
            code = error_code_of(err)
        errors.append(p.LeaderAndIsrPartitionError(tp.topic, tp.partition, code))
        broker.on_append(tp)
    if fetchers is not None:
        fetchers.add_fetcher_for_partitions(start_fetching)
        fetchers.shutdown_idle_threads()
    if broker.remote_log_manager is not None:
        try:
            broker.remote_log_manager.on_leadership_change(leaders, followers)
        except Exception:
            log.exception(
                "broker %d: remote log manager leadership change failed", broker.broker_id
            )
    if broker.group_coordinator is not None:
        try:
            broker.group_coordinator.on_leadership_change(leaders, followers)
        except Exception:
            log.exception("broker %d: group coordinator leadership change failed", broker.broker_id)
    if request.type == p.LEADER_AND_ISR_FULL:
        hosted = [partition.topic_partition for partition in broker.hosted_replicas()]
        for tp in [tp for tp in hosted if tp not in wanted]:
            _remove_partition(broker, tp, delete=True)
    return p.LeaderAndIsrResponse(partition_errors=errors)


def stop_replica(broker: Broker, request: p.StopReplicaRequest) -> p.StopReplicaResponse:
    try:
        check_controller_epoch(request.controller_epoch, broker.controller.image())
    except StaleControllerEpochError as err:
        return p.StopReplicaResponse(error_code=err.code or -1)
    errors = []
    for state in request.partition_states:
        code = p.NONE
        try:
            check_replica_state(state.topic_name, state.partition_index)
            tp = TopicPartition(state.topic_name, state.partition_index)
            _remove_partition(broker, tp, delete=state.delete_partition)
        except Exception as err:
            code = error_code_of(err)
        errors.append(p.StopReplicaPartitionError(state.topic_name, state.partition_index, code))
    return p.StopReplicaResponse(partition_errors=errors)


def _remove_partition(broker: Broker, tp: TopicPartition, *, delete: bool) -> None:
    """Stops hosting ``tp``: its fetcher stops, its waiters wake, its remote data goes if the
    topic is gone and this broker is the cleaner, and its directory is deleted or closed.

    The fetcher lets go of it first: a fetcher that found it gone would count it as failed."""
    fetchers = broker.replica_fetcher_manager
    if fetchers is not None and broker.partition(tp) is not None:
        fetchers.remove_fetcher_for_partitions([tp])
    partition = broker.detach_partition(tp)
    if partition is None:
        return
    led, leader = partition.is_leader, partition.leader_id
    if broker.group_coordinator is not None:
        broker.group_coordinator.on_partition_removed(tp)
    # acks=all produces waiting on it fail now (NOT_LEADER_OR_FOLLOWER), not at timeout.
    partition.make_offline()
    if fetchers is not None:
        fetchers.shutdown_idle_threads()
    rlm = broker.remote_log_manager
    if rlm is not None:
        image = broker.controller.image()
        topic = image.topic(tp.topic)
        gone = delete and (topic is None or topic.topic_id != partition.topic_id)
        # One broker cleans up remote data: the leader, or without a live leader the
        # lowest-numbered live replica.
        cleaner = led or (
            leader not in image.live_brokers
            and broker.broker_id
            == min((r for r in partition.replicas if r in image.live_brokers), default=-1)
        )
        try:
            rlm.stop_partition(partition, delete_remote=gone and cleaner)
        except Exception:
            log.exception("broker %d: removing remote data of %s failed", broker.broker_id, tp)
    if delete:
        log.info("broker %d: deleting %s", broker.broker_id, partition.directory)
        partition.delete()
    else:
        partition.close()
    broker.on_append(tp)
