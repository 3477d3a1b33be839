"""The checks a consumer group heartbeat passes before it changes anything, with Kafka's
errors and messages: the request's own fields, then the member's epoch against the group's."""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import FencedMemberEpochError, InvalidRequestError, UnsupportedAssignorError
from ..model import Uuid
from .consumer_member import JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH, ConsumerGroupMember
from .consumer_protocol import ConsumerGroupHeartbeatRequest
from .consumer_target import compile_regex
from .records import MAX_KEY_STRING_BYTES


def validate(request: ConsumerGroupHeartbeatRequest, assignors: tuple[str, ...]) -> None:
    """Kafka's checks on a heartbeat before the group is looked at."""
    if not request.group_id:
        raise InvalidRequestError("GroupId can't be empty.")
    if request.instance_id == "":
        raise InvalidRequestError("InstanceId can't be empty.")
    if request.rack_id == "":
        raise InvalidRequestError("RackId can't be empty.")
    if len(request.member_id.encode()) > MAX_KEY_STRING_BYTES:
        raise InvalidRequestError(f"MemberId is longer than {MAX_KEY_STRING_BYTES} bytes.")
    epoch = request.member_epoch
    if epoch > 0 or epoch == LEAVE_EPOCH:
        if not request.member_id:
            raise InvalidRequestError("MemberId can't be empty.")
    elif epoch == JOIN_EPOCH:
        if request.api_version >= 1 and not request.member_id:
            raise InvalidRequestError("MemberId can't be empty.")
        if request.rebalance_timeout_ms == -1:
            raise InvalidRequestError("RebalanceTimeoutMs must be provided in first request.")
        if request.topic_partitions is None or request.topic_partitions:
            raise InvalidRequestError("TopicPartitions must be empty when (re-)joining.")
        if not request.subscribed_topic_names and not request.subscribed_topic_regex:
            raise InvalidRequestError(
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
            )
    elif epoch == STATIC_LEAVE_EPOCH:
        if not request.member_id:
            raise InvalidRequestError("MemberId can't be empty.")
        if request.instance_id is None:
            raise InvalidRequestError("InstanceId can't be null.")
    else:
        raise InvalidRequestError(f"MemberEpoch {epoch} is invalid.")
    assignor = request.server_assignor
    if assignor is not None and assignor not in assignors:
        raise UnsupportedAssignorError(
            f"ServerAssignor {assignor} is not supported. Supported assignors: "
            f"{', '.join(assignors)}."
        )
    if request.subscribed_topic_regex:
        compile_regex(request.subscribed_topic_regex)


def _is_subset(
    owned: Mapping[Uuid, frozenset[int]] | None, of: Mapping[Uuid, frozenset[int]]
) -> bool:
    if owned is None:
        return False
    return all(parts <= of.get(topic, frozenset()) for topic, parts in owned.items())


def check_member_epoch(
    member: ConsumerGroupMember, epoch: int, owned: Mapping[Uuid, frozenset[int]] | None
) -> None:
    """A member is fenced if it is ahead of the coordinator, or behind it unless it is one
    epoch behind with nothing it should not have (the answer moving it on was lost)."""
    if epoch > member.member_epoch:
        raise FencedMemberEpochError(
            f"The consumer group member has a greater member epoch ({epoch}) than the one known "
            f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
            "partitions and rejoin."
        )
    if epoch < member.member_epoch and (
        epoch != member.previous_member_epoch or not _is_subset(owned, member.assigned_partitions)
    ):
        raise FencedMemberEpochError(
            f"The consumer group member has a smaller member epoch ({epoch}) than the one known "
            f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
            "partitions and rejoin."
        )
