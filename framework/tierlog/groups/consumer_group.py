"""A consumer-protocol group (KIP-848): its epochs, members, target assignment and topics.

The group changes only by replaying its records (``consumer_records.py``), both when a
heartbeat writes them and when a coordinator loads ``__consumer_offsets``: so a coordinator
that takes a partition over rebuilds exactly the groups its predecessor had. Three epochs move
it along: the *group epoch* rises whenever membership, subscriptions or the subscribed topics
change; the *assignment epoch* is the group epoch the target assignment was computed at; each
member's epoch is the assignment epoch it has reconciled to.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

from ..errors import (
    FencedMemberEpochError,
    StaleMemberEpochError,
    UnknownMemberIdError,
)
from ..model import Uuid
from . import protocol as gp
from .consumer_member import ConsumerGroupMember, MemberState, freeze_partitions
from .group import Group, GroupType
from .records import CoordinatorRecord
from .subscriptions import encode_assignment, encode_subscription


class ConsumerGroupState(enum.Enum):
    """The states of a consumer-protocol group, with Kafka's names."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@attrs.frozen
class TopicMetadata:
    """A subscribed topic as the group last saw it; a change in it moves the group epoch."""

    topic_id: Uuid
    name: str
    num_partitions: int


class ConsumerGroup(Group):
    """One consumer-protocol group of a coordinator shard; runs under the shard's lock."""

    def __init__(self, group_id: str, default_assignor: str = "uniform") -> None:
        self.group_id = group_id
        self.default_assignor = default_assignor
        """The assignor used when no member asks for one (``group.consumer.assignors``)."""
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        """instance id -> member id"""
        self.target: dict[str, dict[Uuid, frozenset[int]]] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.partition_holders: dict[tuple[Uuid, int], tuple[str, int]] = {}
        """Who holds each partition now: the member and its epoch."""
        self.dead = False
        self._state_timestamp: int | None = None

    # --- the Group interface --------------------------------------------------------------

    @property
    def group_type(self) -> GroupType:
        return GroupType.CONSUMER

    @property
    def protocol_type(self) -> str:
        return "consumer"

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def state_name(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return not self.members

    def is_dead(self) -> bool:
        return self.dead

    def subscribed_topics(self) -> frozenset[str] | None:
        return frozenset(self.subscription_metadata)

    def current_state_timestamp(self) -> int | None:
        return self._state_timestamp

    def touch(self, now_ms: int) -> None:
        """The group changed at ``now_ms`` (offsets of an empty group expire from then)."""
        self._state_timestamp = now_ms

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation_or_epoch: int
    ) -> None:
        """A commit with epoch -1 and no member id comes from outside the group (an admin tool,
        a consumer that assigns itself) and is accepted; otherwise the member must exist and
        commit at its own epoch."""
        if generation_or_epoch < 0 and not member_id:
            return
        self._check_epoch(member_id, generation_or_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        if member_epoch < 0 and not member_id:
            return
        self._check_epoch(member_id or "", member_epoch)

    def _check_epoch(self, member_id: str, epoch: int) -> None:
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {self.group_id!r}")
        if epoch > member.member_epoch:
            raise FencedMemberEpochError(
                f"member {member_id!r} sent epoch {epoch}, ahead of its epoch "
                f"{member.member_epoch} in group {self.group_id!r}"
            )
        if epoch < member.member_epoch:
            raise StaleMemberEpochError(
                f"member {member_id!r} sent epoch {epoch}, behind its epoch "
                f"{member.member_epoch} in group {self.group_id!r}"
            )

    def describe(self) -> gp.DescribedGroup:
        """The group as DescribeGroups shows it: members' subscriptions and assignments in the
        consumer protocol's bytes, so classic tools can read them; the assignor's name as the
        protocol."""
        names = self.topic_names()
        members = []
        for member in self.members.values():
            assignment = {
                names[topic]: sorted(parts) for topic, parts in member.assigned if topic in names
            }
            members.append(
                gp.DescribedGroupMember(
                    member_id=member.member_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    member_metadata=encode_subscription(sorted(member.subscribed_topic_names)),
                    member_assignment=encode_assignment(assignment),
                    group_instance_id=member.instance_id,
                )
            )
        return gp.DescribedGroup(
            group_id=self.group_id,
            group_state=self.state_name,
            protocol_type=self.protocol_type,
            protocol_data=self.assignor(),
            members=members,
        )

    def tombstones(self) -> list[CoordinatorRecord]:
        from .consumer_records import group_tombstones

        return group_tombstones(self)

    def close(self, error_code: int) -> None:
        """Nothing waits in a consumer-protocol group: every heartbeat is answered at once."""

    # --- reading --------------------------------------------------------------------------

    def topic_names(self) -> dict[Uuid, str]:
        return {meta.topic_id: meta.name for meta in self.subscription_metadata.values()}

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def partition_epoch(self, topic: Uuid, partition: int) -> int:
        holder = self.partition_holders.get((topic, partition))
        return -1 if holder is None else holder[1]

    def target_of(self, member_id: str) -> dict[Uuid, frozenset[int]]:
        return self.target.get(member_id, {})

    def assignor(self) -> str:
        """The assignor the group uses: the one most members ask for, else the default."""
        return self.preferred_assignor() or self.default_assignor

    def preferred_assignor(self) -> str | None:
        """The assignor most members ask for (ties to the first by name), None if none asks."""
        votes: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        if not votes:
            return None
        return min(votes, key=lambda name: (-votes[name], name))

    # --- replay: the only way the group changes -------------------------------------------

    def replay_group_epoch(self, epoch: int) -> None:
        self.group_epoch = epoch

    def replay_subscription_metadata(self, topics: Iterable[TopicMetadata]) -> None:
        self.subscription_metadata = {topic.name: topic for topic in topics}

    def replay_member(self, member: ConsumerGroupMember | None, member_id: str) -> None:
        """A member's subscription record: the member as it is now, or None once it left."""
        old = self.members.get(member_id)
        if old is not None:
            self._release(old)
            if (
                old.instance_id is not None
                and self.static_members.get(old.instance_id) == member_id
            ):
                del self.static_members[old.instance_id]
        if member is None:
            self.members.pop(member_id, None)
            return
        if old is not None:
            member = attrs.evolve(
                member,
                member_epoch=old.member_epoch,
                previous_member_epoch=old.previous_member_epoch,
                state=old.state,
                assigned=old.assigned,
                pending_revocation=old.pending_revocation,
            )
        self.members[member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member_id
        self._hold(member)

    def replay_target_epoch(self, epoch: int) -> None:
        self.assignment_epoch = epoch

    def replay_target_member(
        self, member_id: str, partitions: dict[Uuid, frozenset[int]] | None
    ) -> None:
        if partitions is None:
            self.target.pop(member_id, None)
        else:
            self.target[member_id] = freeze_partitions(partitions)

    def replay_current_assignment(
        self,
        member_id: str,
        epoch: int,
        previous_epoch: int,
        state: MemberState,
        assigned: dict[Uuid, frozenset[int]],
        pending_revocation: dict[Uuid, frozenset[int]],
    ) -> None:
        """A member's reconciliation record; it may come before the member's subscription
        record (a new member), so the member is made if need be."""
        old = self.members.get(member_id) or ConsumerGroupMember(member_id)
        self._release(old)
        updated = attrs.evolve(
            old,
            member_epoch=epoch,
            previous_member_epoch=previous_epoch,
            state=state,
            assigned=assigned,
            pending_revocation=pending_revocation,
        )
        self.members[member_id] = updated
        self._hold(updated)

    def replay_current_assignment_removed(self, member_id: str) -> None:
        member = self.members.get(member_id)
        if member is not None:
            self._release(member)
            self.members[member_id] = attrs.evolve(
                member, member_epoch=0, previous_member_epoch=0, assigned={}, pending_revocation={}
            )

    def _hold(self, member: ConsumerGroupMember) -> None:
        for tp in member.owned():
            self.partition_holders[tp] = (member.member_id, member.member_epoch)

    def _release(self, member: ConsumerGroupMember) -> None:
        for tp in member.owned():
            holder = self.partition_holders.get(tp)
            if holder is not None and holder[0] == member.member_id:
                del self.partition_holders[tp]
