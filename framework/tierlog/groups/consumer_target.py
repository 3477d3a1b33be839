"""The target assignment of a consumer-protocol group, and the topics it is computed over.

The group epoch moves when the subscribed topics change (one created, one deleted, partitions
added), so the subscribed topics are looked up on every heartbeat; when the group epoch is past
the assignment epoch, the group's assignor computes a new target from every member's
subscription and current target, and only the members whose target changed get a record.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol

from ..errors import InvalidRegularExpressionError
from ..model import Uuid
from . import consumer_records as cr
from .assignors import ASSIGNORS, MemberSpec
from .consumer_group import ConsumerGroup, TopicMetadata
from .consumer_member import ConsumerGroupMember
from .records import CoordinatorRecord


class TopicsView(Protocol):
    """The cluster's topics as the coordinator sees them."""

    def topic(self, name: str) -> TopicMetadata | None: ...

    def names(self) -> Iterable[str]:
        """Every topic a regular expression may match (internal topics left out)."""
        ...


def compile_regex(pattern: str) -> re.Pattern[str]:
    """A subscription pattern, matched against whole topic names as Kafka's RE2/J does."""
    try:
        return re.compile(pattern)
    except re.error as err:
        raise InvalidRegularExpressionError(
            f"SubscribedTopicRegex {pattern!r} is not a valid regular expression: {err}"
        ) from None


def subscribed_names(member: ConsumerGroupMember, topics: TopicsView) -> set[str]:
    """The topics a member subscribes to: its names and whatever its pattern matches."""
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        pattern = compile_regex(member.subscribed_topic_regex)
        names.update(name for name in topics.names() if pattern.fullmatch(name))
    return names


def subscription_metadata(
    members: Iterable[ConsumerGroupMember], topics: TopicsView
) -> dict[str, TopicMetadata]:
    """The existing topics some member subscribes to, as they are now."""
    wanted: set[str] = set()
    for member in members:
        wanted |= subscribed_names(member, topics)
    found = {}
    for name in sorted(wanted):
        meta = topics.topic(name)
        if meta is not None:
            found[name] = meta
    return found


def target_assignment(
    group: ConsumerGroup,
    members: Mapping[str, ConsumerGroupMember],
    targets: dict[str, dict[Uuid, frozenset[int]]],
    metadata: Mapping[str, TopicMetadata],
    topics: TopicsView,
    default_assignor: str,
    records: list[CoordinatorRecord],
) -> dict[str, dict[Uuid, frozenset[int]]]:
    """The new target assignment, with a record for each member whose target changed."""
    votes: dict[str, int] = {}
    for member in members.values():
        if member.server_assignor:
            votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
    name = min(votes, key=lambda n: (-votes[n], n)) if votes else default_assignor
    assignor = ASSIGNORS[name]
    specs = {
        member_id: MemberSpec(
            frozenset(
                metadata[topic].topic_id
                for topic in subscribed_names(member, topics)
                if topic in metadata
            ),
            targets.get(member_id, {}),
            member.instance_id,
            member.rack_id,
        )
        for member_id, member in members.items()
    }
    counts = {meta.topic_id: meta.num_partitions for meta in metadata.values()}
    result = assignor.assign(specs, counts)
    for member_id in sorted(result):
        if result[member_id] != targets.get(member_id, {}) or member_id not in targets:
            records.append(cr.target_member_record(group.group_id, member_id, result[member_id]))
    return dict(result)
