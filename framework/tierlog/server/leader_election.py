"""Leader elections an operator asks for (ElectLeaders, KIP-460), one partition at a time.

Kafka's rules (``ReplicationControlManager.electLeader``):

- PREFERRED moves leadership back to the first replica of the assignment, the one placement
  meant to lead, after failovers left it elsewhere: ELECTION_NOT_NEEDED if it already leads,
  PREFERRED_LEADER_NOT_AVAILABLE if it is down or not in sync (it would lose data).
- UNCLEAN gives a leaderless partition a leader: a live in-sync replica if there is one, else
  any live replica, whose log becomes the truth (records only the lost ISR had are gone).
  ELECTION_NOT_NEEDED while the partition has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE when no
  replica is alive.

Every election bumps the leader epoch and the partition epoch.
"""

from __future__ import annotations

from collections.abc import Set

import attrs

from ..errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    InvalidRequestError,
    PreferredLeaderNotAvailableError,
)
from ..model import TopicPartition
from . import protocol as p
from .image import PartitionRegistration


def elect(
    tp: TopicPartition, reg: PartitionRegistration, election_type: int, live: Set[int]
) -> PartitionRegistration:
    """The registration after the election; raises the error to answer for ``tp``."""
    if election_type == p.ElectionType.PREFERRED:
        return _preferred(tp, reg, live)
    if election_type == p.ElectionType.UNCLEAN:
        return _unclean(tp, reg, live)
    raise InvalidRequestError(f"unknown election type {election_type} (0 preferred, 1 unclean)")


def _preferred(
    tp: TopicPartition, reg: PartitionRegistration, live: Set[int]
) -> PartitionRegistration:
    preferred = reg.replicas[0]
    if reg.leader == preferred:
        raise ElectionNotNeededError(f"{tp}: the preferred replica {preferred} already leads")
    if preferred not in live or preferred not in reg.isr:
        raise PreferredLeaderNotAvailableError(
            f"{tp}: the preferred replica {preferred} is "
            + ("not alive" if preferred not in live else f"not in the ISR {list(reg.isr)}")
        )
    return _led_by(reg, preferred, reg.isr)


def _unclean(
    tp: TopicPartition, reg: PartitionRegistration, live: Set[int]
) -> PartitionRegistration:
    if reg.leader != p.NO_LEADER:
        raise ElectionNotNeededError(f"{tp} has a leader: {reg.leader}")
    in_sync = next((b for b in reg.isr if b in live), None)
    if in_sync is not None:
        return _led_by(reg, in_sync, reg.isr)
    anyone = next((b for b in reg.replicas if b in live), None)
    if anyone is None:
        raise EligibleLeadersNotAvailableError(f"{tp}: no replica of {list(reg.replicas)} is alive")
    return _led_by(reg, anyone, (anyone,))


def _led_by(reg: PartitionRegistration, leader: int, isr: tuple[int, ...]) -> PartitionRegistration:
    return attrs.evolve(
        reg,
        leader=leader,
        isr=isr,
        leader_epoch=reg.leader_epoch + 1,
        partition_epoch=reg.partition_epoch + 1,
    )
