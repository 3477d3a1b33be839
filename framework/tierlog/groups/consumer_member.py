"""A member of a consumer-protocol group (KIP-848), as the coordinator knows it.

A member is a frozen value: every change makes a new one, so the coordinator can tell from
``old != new`` which record to write, and a group rebuilt from its records equals the group
that wrote them. Its epochs say how far it has reconciled: ``member_epoch`` is the target
assignment epoch it has caught up with, ``previous_member_epoch`` the one before (a heartbeat
carrying it is still accepted, in case the answer that moved the member on was lost).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

import attrs

from ..model import Uuid

TopicPartitions = Mapping[Uuid, frozenset[int]]
"""Partitions by topic id, as the consumer protocol names them; no empty entries."""

JOIN_EPOCH = 0
"""The member epoch of a heartbeat that joins (or rejoins) the group."""

LEAVE_EPOCH = -1
"""The member epoch of a heartbeat that leaves the group."""

STATIC_LEAVE_EPOCH = -2
"""The member epoch of a static member leaving for now, meaning to come back under its
instance id and take its partitions again without a rebalance."""


class MemberState(enum.IntEnum):
    """Where a member is in reconciling towards its target assignment (persisted as int8)."""

    STABLE = 0
    """Caught up with the target assignment epoch."""
    UNREVOKED_PARTITIONS = 1
    """Waiting for the member to give up partitions the target gives to others."""
    UNRELEASED_PARTITIONS = 2
    """At the target epoch but waiting for others to give up partitions it is to have."""
    UNKNOWN = 127


def freeze_partitions(partitions: Mapping[Uuid, Iterable[int]]) -> dict[Uuid, frozenset[int]]:
    """``partitions`` with frozen sets, empty topics left out."""
    return {topic: frozenset(parts) for topic, parts in partitions.items() if parts}


def _frozen_map(
    value: Mapping[Uuid, Iterable[int]] | Iterable[tuple[Uuid, Iterable[int]]],
) -> tuple[tuple[Uuid, frozenset[int]], ...]:
    return tuple(sorted(freeze_partitions(dict(value)).items()))


@attrs.frozen
class ConsumerGroupMember:
    """One member: its subscription, client details, and reconciliation state."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: tuple[tuple[Uuid, frozenset[int]], ...] = attrs.field(
        default=(), converter=_frozen_map
    )
    """The partitions the member owns now (sorted pairs, so the value stays hashable)."""
    pending_revocation: tuple[tuple[Uuid, frozenset[int]], ...] = attrs.field(
        default=(), converter=_frozen_map
    )
    """Partitions the member still owns and must give up before moving on."""

    @property
    def assigned_partitions(self) -> dict[Uuid, frozenset[int]]:
        return dict(self.assigned)

    @property
    def partitions_pending_revocation(self) -> dict[Uuid, frozenset[int]]:
        return dict(self.pending_revocation)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == target_epoch

    def with_epoch(self, epoch: int) -> ConsumerGroupMember:
        """The member moved to ``epoch``, the current one becoming its previous."""
        return attrs.evolve(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)

    def owned(self) -> set[tuple[Uuid, int]]:
        """Every partition the member holds, assigned or pending revocation."""
        return {
            (topic, part)
            for topic, parts in (*self.assigned, *self.pending_revocation)
            for part in parts
        }
