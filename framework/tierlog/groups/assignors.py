"""The server-side assignors of consumer-protocol groups (KIP-848): ``uniform`` and ``range``.

In the consumer protocol the coordinator, not a group leader, decides who consumes what: each
time the group epoch moves it hands the members' subscriptions and current target assignment to
the assignor the group uses and persists what comes back. An assignor is a pure function of
those inputs, so it is tested alone; the members then converge on its answer through
reconciliation (``consumer_reconciliation.py``).

- ``uniform`` (Kafka's default) spreads every subscribed partition so that no member could take
  a partition from another and leave both closer to even, and keeps each member's partitions
  where that balance allows: a member joining or leaving moves only what it must. As in
  Kafka, members with one subscription between them take a fast path (shares known up front).
- ``range`` gives each member a contiguous range of each topic's partitions, members in the
  order of their ids; members with the same subscriptions get the same partition numbers of
  topics with as many partitions (co-partitioning, for joins across topics).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import attrs

from ..model import Uuid

Assignment = Mapping[Uuid, frozenset[int]]
"""Partitions by topic id; a topic with no partitions is left out."""


@attrs.frozen
class MemberSpec:
    """What an assignor knows of a member: what it subscribes to and what it has now."""

    subscribed_topic_ids: frozenset[Uuid]
    assigned: Assignment = attrs.field(factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None


class Assignor(Protocol):
    """A server-side assignor, chosen by name (``group.consumer.assignors``)."""

    name: str

    def assign(
        self, members: Mapping[str, MemberSpec], partition_counts: Mapping[Uuid, int]
    ) -> dict[str, dict[Uuid, frozenset[int]]]:
        """Every member's new target assignment: each partition of a topic in
        ``partition_counts`` that some member subscribes to, given to exactly one of them."""
        ...


def _freeze(assigned: Mapping[Uuid, set[int]]) -> dict[Uuid, frozenset[int]]:
    return {topic: frozenset(parts) for topic, parts in assigned.items() if parts}


class UniformAssignor:
    """Balanced and sticky: partitions kept where they are unless balance needs them moved."""

    name = "uniform"

    def assign(
        self, members: Mapping[str, MemberSpec], partition_counts: Mapping[Uuid, int]
    ) -> dict[str, dict[Uuid, frozenset[int]]]:
        subscriptions = {spec.subscribed_topic_ids for spec in members.values()}
        if len(subscriptions) == 1:
            return self._homogeneous(members, partition_counts, subscriptions.pop())
        return self._heterogeneous(members, partition_counts)

    @staticmethod
    def _homogeneous(
        members: Mapping[str, MemberSpec],
        partition_counts: Mapping[Uuid, int],
        subscribed: frozenset[Uuid],
    ) -> dict[str, dict[Uuid, frozenset[int]]]:
        """Every member subscribes to the same topics (the usual case), so each one's share is
        known up front: members keep what they have up to it, the rest fills the gaps. Linear
        in partitions and members."""
        every = [
            (topic, part)
            for topic in sorted(subscribed)
            for part in range(partition_counts.get(topic, 0))
        ]
        valid = set(every)
        claimed: set[tuple[Uuid, int]] = set()
        held: dict[str, list[tuple[Uuid, int]]] = {}
        for member in sorted(members):
            mine = []
            for topic, parts in sorted(members[member].assigned.items()):
                for part in sorted(parts):
                    tp = (topic, part)
                    if tp in valid and tp not in claimed:
                        claimed.add(tp)
                        mine.append(tp)
            held[member] = mine
        base, extra = divmod(len(every), len(members))
        # The members holding most get the shares one larger, so fewer partitions move.
        order = sorted(members, key=lambda m: (-len(held[m]), m))
        quota = {member: base + (1 if n < extra else 0) for n, member in enumerate(order)}
        kept = {member: held[member][: quota[member]] for member in members}
        taken = {tp for mine in kept.values() for tp in mine}
        free = iter(tp for tp in every if tp not in taken)
        result: dict[str, dict[Uuid, set[int]]] = {}
        for member in sorted(members):
            mine = kept[member] + [next(free) for _ in range(quota[member] - len(kept[member]))]
            assigned: dict[Uuid, set[int]] = {}
            for topic, part in mine:
                assigned.setdefault(topic, set()).add(part)
            result[member] = assigned
        return {member: _freeze(assigned) for member, assigned in result.items()}

    def _heterogeneous(
        self, members: Mapping[str, MemberSpec], partition_counts: Mapping[Uuid, int]
    ) -> dict[str, dict[Uuid, frozenset[int]]]:
        """Members subscribe to different topics: greedy placement, then single moves from the
        most to the least loaded member that may take a partition."""
        owner: dict[tuple[Uuid, int], str] = {}
        held: dict[str, set[tuple[Uuid, int]]] = {member: set() for member in members}
        order = sorted(members)
        # Keep what each member still may have; a partition claimed twice stays with the first.
        for member in order:
            spec = members[member]
            for topic, parts in sorted(spec.assigned.items()):
                if topic not in spec.subscribed_topic_ids:
                    continue
                count = partition_counts.get(topic, 0)
                for part in sorted(parts):
                    tp = (topic, part)
                    if part < count and tp not in owner:
                        owner[tp] = member
                        held[member].add(tp)
        eligible: dict[Uuid, list[str]] = {}
        for topic in sorted(partition_counts):
            subscribers = [m for m in order if topic in members[m].subscribed_topic_ids]
            if subscribers:
                eligible[topic] = subscribers
        # Unowned partitions go to the least loaded eligible member, the most constrained first.
        unowned = [
            (topic, part)
            for topic, subscribers in eligible.items()
            for part in range(partition_counts[topic])
            if (topic, part) not in owner
        ]
        unowned.sort(key=lambda tp: (len(eligible[tp[0]]), tp[0], tp[1]))
        for tp in unowned:
            member = min(eligible[tp[0]], key=lambda m: (len(held[m]), m))
            owner[tp] = member
            held[member].add(tp)
        self._balance(owner, held, eligible)
        result: dict[str, dict[Uuid, set[int]]] = {member: {} for member in members}
        for (topic, part), member in owner.items():
            result[member].setdefault(topic, set()).add(part)
        return {member: _freeze(assigned) for member, assigned in result.items()}

    @staticmethod
    def _balance(
        owner: dict[tuple[Uuid, int], str],
        held: dict[str, set[tuple[Uuid, int]]],
        eligible: Mapping[Uuid, list[str]],
    ) -> None:
        """Moves one partition at a time from the most loaded member that has one another member
        may take, to the least loaded of those, until no move would bring two members closer;
        each move lowers the sum of squared loads, so this ends."""
        while True:
            move = None
            for giver in sorted(held, key=lambda m: (-len(held[m]), m)):
                for tp in sorted(held[giver], key=lambda t: (t[0], -t[1])):
                    taker = min(eligible[tp[0]], key=lambda m: (len(held[m]), m))
                    if len(held[giver]) - len(held[taker]) > 1:
                        move = giver, tp, taker
                        break
                if move is not None:
                    break
            if move is None:
                return
            giver, tp, taker = move
            held[giver].discard(tp)
            held[taker].add(tp)
            owner[tp] = taker


class RangeAssignor:
    """Contiguous ranges per topic, members in id order: co-partitioned, not sticky."""

    name = "range"

    def assign(
        self, members: Mapping[str, MemberSpec], partition_counts: Mapping[Uuid, int]
    ) -> dict[str, dict[Uuid, frozenset[int]]]:
        result: dict[str, dict[Uuid, set[int]]] = {member: {} for member in members}
        order = sorted(members)
        for topic, count in sorted(partition_counts.items()):
            subscribers = [m for m in order if topic in members[m].subscribed_topic_ids]
            if not subscribers or count <= 0:
                continue
            quota, extra = divmod(count, len(subscribers))
            start = 0
            for index, member in enumerate(subscribers):
                size = quota + (1 if index < extra else 0)
                if size:
                    result[member][topic] = set(range(start, start + size))
                start += size
        return {member: _freeze(assigned) for member, assigned in result.items()}


ASSIGNORS: dict[str, Assignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
"""Every server-side assignor by name, as ``group.consumer.assignors`` lists them."""
