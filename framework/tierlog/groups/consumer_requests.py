"""ConsumerGroupHeartbeat and ConsumerGroupDescribe on the coordinator: the consumer group
protocol (KIP-848) beside the classic one.

A heartbeat runs under its shard's lock: the outcome's records are appended (acks=all) and only
then replayed into the group, through the same replay that loads a shard, so what a member was
told is always what a new coordinator would rebuild. The member's session timer restarts on
every heartbeat (``group.consumer.session.timeout.ms``), and a member left revoking partitions
past its rebalance timeout is fenced, as Kafka does; a loaded shard arms every member's session
timer afresh.

A group id belongs to one protocol at a time, as in Kafka 4: a heartbeat for a classic group
with members is answered GROUP_ID_NOT_FOUND; an empty classic group is replaced by a consumer
group (its committed offsets stay). Converting a live group between protocols (Kafka 4's
online upgrade and downgrade) is not done.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..errors import GroupIdNotFoundError, InvalidGroupIdError, TierlogError, error_code_of
from ..model import Uuid
from ..server.image import ClusterImage
from ..server.internal_topics import is_internal
from . import consumer_records as cr
from .classic_group import now_ms
from .consumer_group import ConsumerGroup, TopicMetadata
from .consumer_heartbeat import (
    ConsumerGroupSettings,
    HeartbeatOutcome,
    fence,
    heartbeat,
)
from .consumer_member import MemberState
from .consumer_protocol import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedAssignment,
    DescribedConsumerGroup,
    DescribedMember,
    DescribedTopicPartitions,
)
from .dispatch import register_handler
from .records import CoordinatorRecord, key_version
from .shard import CoordinatorShard, register_load_hook, register_replayer

if TYPE_CHECKING:
    from .runtime import GroupCoordinator

log = logging.getLogger(__name__)


class ImageTopics:
    """The cluster image's topics, as a consumer group sees them."""

    def __init__(self, image: ClusterImage) -> None:
        self._image = image

    def topic(self, name: str) -> TopicMetadata | None:
        found = self._image.topic(name)
        if found is None:
            return None
        return TopicMetadata(found.topic_id, name, len(found.partitions))

    def names(self) -> Iterable[str]:
        return [name for name in self._image.topics if not is_internal(name)]


def settings_of(coordinator: GroupCoordinator) -> ConsumerGroupSettings:
    config = coordinator.config
    return ConsumerGroupSettings(
        heartbeat_interval_ms=config.get_int("group.consumer.heartbeat.interval.ms"),
        session_timeout_ms=config.get_int("group.consumer.session.timeout.ms"),
        max_size=config.get_int("group.consumer.max.size"),
        assignors=tuple(config.get_list("group.consumer.assignors")),
    )


# --- ConsumerGroupHeartbeat -------------------------------------------------------------------


def consumer_group_heartbeat(
    coordinator: GroupCoordinator, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    if not request.group_id:
        raise InvalidGroupIdError("GroupId can't be empty.")
    settings = settings_of(coordinator)
    topics = ImageTopics(coordinator.broker.controller.image())
    shard = coordinator.shard_for(request.group_id)
    with shard.lock:
        shard.check_active()
        existing = shard.groups.get(request.group_id)
        replaced: list[CoordinatorRecord] = []
        if existing is not None and not isinstance(existing, ConsumerGroup):
            if request.member_epoch != 0 or not existing.is_empty():
                raise GroupIdNotFoundError(f"Group {request.group_id} is not a consumer group.")
            replaced = existing.tombstones()
        group = existing if isinstance(existing, ConsumerGroup) else None
        outcome = heartbeat(group, request, settings, topics, str(Uuid.random()))
        shard.append(replaced + outcome.records)
        if replaced:
            shard.groups.pop(request.group_id, None)
        apply(shard, outcome.records)
        _set_timers(coordinator, shard, request.group_id, outcome)
        return outcome.response


def apply(shard: CoordinatorShard, records: Sequence[CoordinatorRecord]) -> None:
    """Replays records just written, exactly as a loading shard replays them; a group epoch
    moving counts as a rebalance."""
    touched = set()
    rebalances = 0
    for record in records:
        _replay(shard, record.key, record.value)
        version = key_version(record.key)
        touched.add(cr.decode_key(version, record.key)[0])
        if version == cr.GROUP_EPOCH_KEY_VERSION and record.value is not None:
            rebalances += 1
    metrics = shard.runtime.consumer_metrics
    if rebalances and metrics is not None:
        metrics.rebalances.mark(rebalances)
    now = now_ms()
    for group_id in touched:
        group = shard.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            group.touch(now)


def _replay(shard: CoordinatorShard, key: bytes, value: bytes | None) -> None:
    def group_for(group_id: str, create: bool) -> ConsumerGroup | None:
        group = shard.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return group
        if not create:
            return None
        made = ConsumerGroup(group_id, settings_of(shard.runtime).assignors[0])
        shard.groups[group_id] = made
        return made

    version = key_version(key)
    cr.replay(version, key, value, group_for)
    group_id = cr.decode_key(version, key)[0]
    group = shard.groups.get(group_id)
    if isinstance(group, ConsumerGroup) and group.dead:
        del shard.groups[group_id]


def _session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-session", group_id, member_id)


def _rebalance_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-rebalance", group_id, member_id)


def _set_timers(
    coordinator: GroupCoordinator,
    shard: CoordinatorShard,
    group_id: str,
    outcome: HeartbeatOutcome,
) -> None:
    for member_id in outcome.disarm:
        shard.cancel(_session_key(group_id, member_id))
        shard.cancel(_rebalance_key(group_id, member_id))
    for member_id in outcome.disarm_rebalance:
        shard.cancel(_rebalance_key(group_id, member_id))
    if outcome.arm_session is not None:
        _arm_session(coordinator, shard, group_id, outcome.arm_session)
    if outcome.arm_rebalance is not None:
        member_id, epoch, timeout_ms = outcome.arm_rebalance
        shard.schedule(
            _rebalance_key(group_id, member_id),
            max(timeout_ms, 0),
            lambda: _rebalance_expired(coordinator, shard, group_id, member_id, epoch),
        )


def _arm_session(
    coordinator: GroupCoordinator, shard: CoordinatorShard, group_id: str, member_id: str
) -> None:
    shard.schedule(
        _session_key(group_id, member_id),
        settings_of(coordinator).session_timeout_ms,
        lambda: _session_expired(coordinator, shard, group_id, member_id),
    )


def _session_expired(
    coordinator: GroupCoordinator, shard: CoordinatorShard, group_id: str, member_id: str
) -> None:
    group = shard.groups.get(group_id)
    if not isinstance(group, ConsumerGroup) or member_id not in group.members:
        return
    log.info("consumer group %s: member %s fenced, its session expired", group_id, member_id)
    _fence(coordinator, shard, group, member_id)


def _rebalance_expired(
    coordinator: GroupCoordinator,
    shard: CoordinatorShard,
    group_id: str,
    member_id: str,
    epoch: int,
) -> None:
    group = shard.groups.get(group_id)
    if not isinstance(group, ConsumerGroup):
        return
    member = group.members.get(member_id)
    if (
        member is None
        or member.member_epoch != epoch
        or member.state != MemberState.UNREVOKED_PARTITIONS
    ):
        return
    log.info(
        "consumer group %s: member %s fenced, it did not revoke its partitions in time",
        group_id,
        member_id,
    )
    _fence(coordinator, shard, group, member_id)


def _fence(
    coordinator: GroupCoordinator, shard: CoordinatorShard, group: ConsumerGroup, member_id: str
) -> None:
    topics = ImageTopics(coordinator.broker.controller.image())
    outcome = fence(group, group.members[member_id], topics)
    try:
        shard.append(outcome.records)
    except TierlogError as err:
        log.warning(
            "consumer group %s: fencing member %s failed, retried later: %s",
            group.group_id,
            member_id,
            err,
        )
        _arm_session(coordinator, shard, group.group_id, member_id)
        return
    apply(shard, outcome.records)
    _set_timers(coordinator, shard, group.group_id, outcome)


def _arm_loaded_groups(shard: CoordinatorShard) -> None:
    """Members of a loaded group must heartbeat within their session, as after a heartbeat,
    and those revoking partitions must finish within their rebalance timeout."""
    coordinator = shard.runtime
    for group in shard.groups.values():
        if not isinstance(group, ConsumerGroup):
            continue
        for member_id, member in group.members.items():
            _arm_session(coordinator, shard, group.group_id, member_id)
            if member.state == MemberState.UNREVOKED_PARTITIONS:
                outcome = HeartbeatOutcome(
                    [],
                    ConsumerGroupHeartbeatResponse(),
                    arm_rebalance=(member_id, member.member_epoch, member.rebalance_timeout_ms),
                )
                _set_timers(coordinator, shard, group.group_id, outcome)


def _heartbeat_error(
    _request: ConsumerGroupHeartbeatRequest, code: int, message: str
) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(error_code=code, error_message=message)


# --- ConsumerGroupDescribe --------------------------------------------------------------------


def consumer_group_describe(
    coordinator: GroupCoordinator, request: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    image = coordinator.broker.controller.image()
    return ConsumerGroupDescribeResponse(
        [_describe(coordinator, image, group_id) for group_id in request.group_ids]
    )


def _describe(
    coordinator: GroupCoordinator, image: ClusterImage, group_id: str
) -> DescribedConsumerGroup:
    try:
        with coordinator.locked_shard(group_id) as shard:
            group = shard.groups.get(group_id)
            if group is None or group.is_dead():
                raise GroupIdNotFoundError(f"Group {group_id} not found.")
            if not isinstance(group, ConsumerGroup):
                raise GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")
            return describe(group, image)
    except TierlogError as err:
        return DescribedConsumerGroup(
            group_id, error_code=error_code_of(err), error_message=str(err), group_state="Dead"
        )


def describe(group: ConsumerGroup, image: ClusterImage) -> DescribedConsumerGroup:
    """The group as ConsumerGroupDescribe shows it, topics named."""
    names = group.topic_names()

    def name_of(topic: Uuid) -> str:
        if topic in names:
            return names[topic]
        found = image.topic_by_id(topic)
        return "" if found is None else found.name

    def described(partitions: Iterable[tuple[Uuid, frozenset[int]]]) -> DescribedAssignment:
        return DescribedAssignment(
            [DescribedTopicPartitions(t, name_of(t), sorted(p)) for t, p in sorted(partitions)]
        )

    return DescribedConsumerGroup(
        group.group_id,
        group_state=group.state_name,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor(),
        members=[
            DescribedMember(
                member.member_id,
                member.member_epoch,
                member.client_id,
                member.client_host,
                instance_id=member.instance_id,
                rack_id=member.rack_id,
                subscribed_topic_names=member.subscribed_topic_names,
                subscribed_topic_regex=member.subscribed_topic_regex,
                assignment=described(member.assigned),
                target_assignment=described(group.target_of(member.member_id).items()),
            )
            for member in sorted(group.members.values(), key=lambda m: m.member_id)
        ],
    )


def _describe_error(
    request: ConsumerGroupDescribeRequest, code: int, message: str
) -> ConsumerGroupDescribeResponse:
    return ConsumerGroupDescribeResponse(
        [
            DescribedConsumerGroup(g, error_code=code, error_message=message)
            for g in request.group_ids
        ]
    )


register_handler(ConsumerGroupHeartbeatRequest, consumer_group_heartbeat, _heartbeat_error)
register_handler(ConsumerGroupDescribeRequest, consumer_group_describe, _describe_error)
for _version in cr.KEY_VERSIONS:
    register_replayer(_version, _replay)
register_load_hook(_arm_loaded_groups)
