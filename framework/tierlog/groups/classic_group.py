"""A group of the classic protocol: members, generation, state, and what it stores.

Kafka's ``ClassicGroup``: members join (JoinGroup), one generation is formed from those that
did, the leader's assignment is handed out (SyncGroup), and members heartbeat until the next
rebalance. The state machine is Kafka's::

    Empty -> PreparingRebalance -> CompletingRebalance -> Stable -> PreparingRebalance ...
    (any) -> Dead  (deleted, expired, or its shard unloaded)

Members waiting for a JoinGroup or SyncGroup answer hold a future; the rebalance logic
(``classic_protocol.py``) completes it. This module keeps the data and answers the questions
other requests ask of it (offset commit fencing, describe).
"""

from __future__ import annotations

import time
from concurrent.futures import Future

import attrs

from ..errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from . import protocol as gp
from .group import Group, GroupState, GroupType
from .records import CoordinatorRecord, GroupMetadataKey, GroupMetadataValue, MemberMetadata
from .subscriptions import CONSUMER_PROTOCOL_TYPE, subscribed_topics


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@attrs.define(eq=False)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    #: (name, metadata) in the member's order of preference.
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    awaiting_join: Future[gp.JoinGroupResponse] | None = None
    awaiting_sync: Future[gp.SyncGroupResponse] | None = None

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)


class ClassicGroup(Group):
    def __init__(self, group_id: str, *, created_ms: int | None = None) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp: int | None = created_ms
        self.generation_id = 0
        self._protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicMember] = {}
        #: Member ids handed out with MEMBER_ID_REQUIRED and not yet used to join (KIP-394).
        self.pending_members: set[str] = set()
        #: Members of the current generation that have not sent SyncGroup yet.
        self.pending_sync: set[str] = set()
        #: group.instance.id -> member id (KIP-345).
        self.static_members: dict[str, str] = {}
        #: True while the first rebalance of an empty group waits out the initial delay.
        self.initial_delay_active = False
        self.new_member_added = False

    # --- Group --------------------------------------------------------------------------------

    @property
    def group_type(self) -> GroupType:
        return GroupType.CLASSIC

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def protocol_type(self) -> str:
        return self._protocol_type or ""

    @protocol_type.setter
    def protocol_type(self, value: str | None) -> None:
        self._protocol_type = value

    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    def is_dead(self) -> bool:
        return self.state is GroupState.DEAD

    def current_state_timestamp(self) -> int | None:
        return self.state_timestamp

    def subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else frozenset()
        topics: set[str] = set()
        for member in self.members.values():
            subscribed = subscribed_topics(member.metadata(self.protocol_name))
            if subscribed is None:
                return None
            topics |= subscribed
        return frozenset(topics)

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation_or_epoch: int
    ) -> None:
        """Kafka's rules: a simple commit (generation -1, no member) only to an empty group;
        otherwise the member must belong to the current generation, and not while the group
        completes a rebalance (its assignment may be about to change)."""
        if self.is_dead():
            raise CoordinatorNotAvailableError(f"group {self.group_id} is being removed")
        if generation_or_epoch < 0 and self.is_empty():
            return
        if generation_or_epoch >= 0 or member_id or group_instance_id is not None:
            self.check_static(member_id, group_instance_id)
            if member_id not in self.members:
                raise UnknownMemberIdError(f"member {member_id!r} is not in group {self.group_id}")
            if generation_or_epoch != self.generation_id:
                raise IllegalGenerationError(
                    f"generation {generation_or_epoch} of group {self.group_id} is not the "
                    f"current one ({self.generation_id})"
                )
        elif not self.is_empty():
            raise UnknownMemberIdError(
                f"group {self.group_id} has members: a commit without a member id is refused"
            )
        if self.state is GroupState.COMPLETING_REBALANCE:
            raise RebalanceInProgressError(f"group {self.group_id} is rebalancing")

    def check_static(self, member_id: str, group_instance_id: str | None) -> None:
        """FENCED_INSTANCE_ID if another member now holds ``group_instance_id``."""
        if group_instance_id is None:
            return
        holder = self.static_members.get(group_instance_id)
        if holder is not None and holder != member_id:
            raise FencedInstanceIdError(
                f"group.instance.id {group_instance_id!r} of group {self.group_id} now belongs "
                f"to member {holder!r}, not {member_id!r}"
            )

    def describe(self) -> gp.DescribedGroup:
        stable = self.state is GroupState.STABLE
        return gp.DescribedGroup(
            self.group_id,
            group_state=self.state_name,
            protocol_type=self.protocol_type,
            protocol_data=(self.protocol_name or "") if stable else "",
            members=[
                gp.DescribedGroupMember(
                    m.member_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(self.protocol_name) if stable else b"",
                    m.assignment if stable else b"",
                    m.group_instance_id,
                )
                for m in self.members.values()
            ],
        )

    def close(self, error_code: int) -> None:
        for member in self.members.values():
            if member.awaiting_join is not None and not member.awaiting_join.done():
                member.awaiting_join.set_result(
                    gp.JoinGroupResponse(error_code, member_id=member.member_id)
                )
            if member.awaiting_sync is not None and not member.awaiting_sync.done():
                member.awaiting_sync.set_result(gp.SyncGroupResponse(error_code))
            member.awaiting_join = member.awaiting_sync = None

    # --- state --------------------------------------------------------------------------------

    def transition(self, state: GroupState) -> None:
        self.state = state
        self.state_timestamp = now_ms()

    def add_member(self, member: ClassicMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type  # kept once empty, as Kafka does
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.pending_sync.discard(member_id)
        instance = member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> ClassicMember:
        """A static member rejoined under a new member id: the old one is fenced."""
        member = self.members.pop(old_id)
        old_join, old_sync = member.awaiting_join, member.awaiting_sync
        if old_join is not None and not old_join.done():
            old_join.set_result(
                gp.JoinGroupResponse(FencedInstanceIdError.code or 82, member_id=old_id)
            )
        if old_sync is not None and not old_sync.done():
            old_sync.set_result(gp.SyncGroupResponse(FencedInstanceIdError.code or 82))
        member.awaiting_join = member.awaiting_sync = None
        member.member_id = new_id
        self.members[new_id] = member
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def supports(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Kafka's ``supportsProtocols``: same type, and some protocol every member has."""
        names = {name for name, _ in protocols}
        if not names:
            return False
        if not self.members:
            return bool(protocol_type)
        if protocol_type != self.protocol_type:
            return False
        return bool(self.candidate_protocols() & names)

    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        candidates = set(members[0].protocol_names())
        for member in members[1:]:
            candidates &= set(member.protocol_names())
        return candidates

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda name: votes[name])

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(
            m.awaiting_join is not None for m in self.members.values()
        )

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- stored form --------------------------------------------------------------------------

    def metadata_record(self) -> CoordinatorRecord:
        """The group as ``__consumer_offsets`` stores it (GroupMetadataValue)."""
        value = GroupMetadataValue(
            self.protocol_type,
            self.generation_id,
            self.protocol_name,
            self.leader_id,
            self.state_timestamp if self.state_timestamp is not None else now_ms(),
            tuple(
                MemberMetadata(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(self.protocol_name),
                    m.assignment,
                )
                for m in self.members.values()
            ),
        )
        return CoordinatorRecord(GroupMetadataKey(self.group_id).encode(), value.encode())

    @classmethod
    def from_metadata(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """A group as loaded: Stable with its members, or Empty without."""
        group = cls(group_id, created_ms=value.current_state_timestamp)
        group.protocol_type = value.protocol_type
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        for m in value.members:
            group.add_member(
                ClassicMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout,
                    m.session_timeout,
                    value.protocol_type,
                    ((value.protocol or "", m.subscription),),
                    m.assignment,
                )
            )
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        if value.current_state_timestamp >= 0:
            group.state_timestamp = value.current_state_timestamp
        return group
