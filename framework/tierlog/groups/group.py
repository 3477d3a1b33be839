"""What every group is to the coordinator, whichever protocol its members speak.

A group id belongs to one group type at a time (Kafka 4: ``classic`` or ``consumer``). Listing,
describing, deleting, and committing or fetching offsets work for every type through this
base; each type says how it validates a commit and what it looks like described.
"""

from __future__ import annotations

import abc
import enum

from ..errors import GroupIdNotFoundError, NonEmptyGroupError
from . import protocol as gp
from .records import CoordinatorRecord, GroupMetadataKey
from .subscriptions import CONSUMER_PROTOCOL_TYPE


class GroupType(enum.Enum):
    CLASSIC = "classic"
    CONSUMER = "consumer"


class GroupState(enum.Enum):
    """The states of a classic group, with Kafka's names (what ListGroups shows)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class Group(abc.ABC):
    """One group of one shard; its methods run under the shard's lock."""

    group_id: str

    @property
    @abc.abstractmethod
    def group_type(self) -> GroupType: ...

    @property
    @abc.abstractmethod
    def state_name(self) -> str:
        """The state as ListGroups and DescribeGroups name it."""

    @property
    @abc.abstractmethod
    def protocol_type(self) -> str: ...

    @abc.abstractmethod
    def is_empty(self) -> bool:
        """No members: the group may be deleted and its offsets expire."""

    @abc.abstractmethod
    def is_dead(self) -> bool: ...

    @abc.abstractmethod
    def subscribed_topics(self) -> frozenset[str] | None:
        """Topics some member subscribes to; None if the group cannot tell."""

    @abc.abstractmethod
    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation_or_epoch: int
    ) -> None:
        """Raises the error an OffsetCommit from this member must get, if any."""

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Raises the error an OffsetFetch from this member must get (v9+), if any."""
        return  # a classic group does not check who fetches

    def validate_offset_delete(self) -> None:
        """Raises the error an OffsetDelete must get: only groups of the consumer protocol
        type, or groups with no members, have offsets deleted (Kafka's rule)."""
        if self.is_dead():
            raise GroupIdNotFoundError(f"group {self.group_id!r} does not exist")
        if not self.is_empty() and self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise NonEmptyGroupError(
                f"group {self.group_id!r} has members and is not a consumer group"
            )

    @abc.abstractmethod
    def describe(self) -> gp.DescribedGroup: ...

    def listed(self) -> gp.ListedGroup:
        return gp.ListedGroup(
            self.group_id, self.protocol_type, self.state_name, self.group_type.value
        )

    @abc.abstractmethod
    def current_state_timestamp(self) -> int | None:
        """When the group last changed state (ms), which offset expiry counts from."""

    def tombstones(self) -> list[CoordinatorRecord]:
        """The records that delete the group itself (not its offsets)."""
        return [CoordinatorRecord(GroupMetadataKey(self.group_id).encode(), None)]

    @abc.abstractmethod
    def close(self, error_code: int) -> None:
        """The shard is going away: every waiting member is answered ``error_code``."""
