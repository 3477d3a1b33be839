"""What ``tierlog groups`` does, over the Kafka protocol, as Kafka's consumer-groups tool does it.

Everything goes through a listener (``--bootstrap-server``) with kafka-python's admin client:
ListGroups, DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit and DeleteGroups, so the tool
works against any broker that speaks the protocol. Log-end offsets come from ListOffsets, which
answers for the whole log, so a committed offset that now lies in the remote tier shows its
true lag like any other.

Kafka's rules kept here: offsets are reset only while the group is inactive (Empty, or Dead: a
group that does not exist yet); a target before the log start or past the log end is clamped to
it; ``--to-datetime`` finds the first offset at or after that time, and the log end when there
is none; without ``--execute`` a reset is only planned and shown.
"""

from __future__ import annotations

import datetime as dt
import socket
import time
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__all__ = [
    "ConsumerGroups",
    "GroupDescription",
    "GroupsToolError",
    "MemberRow",
    "OffsetRow",
    "ResetStrategy",
    "parse_datetime",
    "parse_topic_scope",
]

#: How long a retriable error (a coordinator loading or moving) is retried.
_RETRY_S = 15.0
_RETRIABLE = ("CoordinatorLoadInProgress", "CoordinatorNotAvailable", "NotCoordinator")
#: What DescribeGroups answers for a group the coordinator does not know.
DEAD = "Dead"
_INACTIVE = ("Empty", DEAD)


class GroupsToolError(Exception):
    """A request the tool cannot carry out, said in one line (the CLI prints it)."""


@attrs.frozen
class OffsetRow:
    """One line of ``describe``; None shows as ``-``."""

    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None


@attrs.frozen
class MemberRow:
    consumer_id: str
    group_instance_id: str | None
    host: str
    client_id: str
    partitions: tuple[tuple[str, int], ...]


@attrs.frozen
class GroupDescription:
    group: str
    state: str
    members: tuple[MemberRow, ...]
    offsets: tuple[OffsetRow, ...]


@attrs.frozen
class ResetStrategy:
    """Where to move the offsets: ``earliest``, ``latest``, ``datetime`` (``value`` in epoch
    ms) or ``offset`` (``value`` the offset)."""

    kind: str = attrs.field(
        validator=attrs.validators.in_(("earliest", "latest", "datetime", "offset"))
    )
    value: int = 0


def parse_datetime(text: str) -> int:
    """``YYYY-MM-DDTHH:mm:SS[.sss]`` with an optional zone (``Z``, ``+01:00``) as epoch ms;
    without a zone the local one, as Kafka's tool reads it."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise GroupsToolError(
            f"cannot read the datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss, optionally "
            "followed by a zone such as Z or +01:00"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # the local zone
    return int(moment.timestamp() * 1000)


def parse_topic_scope(spec: str) -> tuple[str, tuple[int, ...] | None]:
    """``topic`` (every partition) or ``topic:0,2`` (those partitions)."""
    topic, sep, rest = spec.partition(":")
    if not topic:
        raise GroupsToolError(f"--topic {spec!r} names no topic")
    if not sep:
        return topic, None
    try:
        partitions = tuple(sorted({int(part) for part in rest.split(",")}))
    except ValueError:
        raise GroupsToolError(
            f"--topic {spec!r}: partitions are comma-separated numbers, as in {topic}:0,1"
        ) from None
    if not partitions or partitions[0] < 0:
        raise GroupsToolError(f"--topic {spec!r}: partitions are non-negative numbers")
    return topic, partitions


class ConsumerGroups:
    """A connection to a cluster for the group commands; close it when done."""

    def __init__(self, bootstrap_servers: str, *, timeout_ms: int = 30_000) -> None:
        from kafka.admin import KafkaAdminClient
        from kafka.errors import KafkaError

        self._kafka_error = KafkaError
        _check_reachable(bootstrap_servers)
        try:
            self._admin: Any = KafkaAdminClient(
                bootstrap_servers=bootstrap_servers,
                client_id="tierlog-groups",
                request_timeout_ms=timeout_ms,
            )
        except KafkaError as err:
            raise GroupsToolError(f"cannot reach {bootstrap_servers}: {_reason(err)}") from None

    def close(self) -> None:
        self._admin.close()

    def __enter__(self) -> ConsumerGroups:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        deadline = time.monotonic() + _RETRY_S
        while True:
            try:
                return fn(*args)
            except self._kafka_error as err:
                if not getattr(err, "retriable", False) or time.monotonic() > deadline:
                    raise GroupsToolError(f"{what} failed: {_reason(err)}") from None
            time.sleep(0.2)

    # --- list ---------------------------------------------------------------------------------

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every group, by id."""
        groups = self._call("listing groups", self._admin.list_groups)
        return sorted((g["group_id"], g.get("group_state") or "") for g in groups)

    # --- describe -----------------------------------------------------------------------------

    def _described(self, group: str) -> Mapping[str, Any]:
        """DescribeGroups for one group; a coordinator still loading or moving is asked again
        for a while, as Kafka's admin client does."""
        deadline = time.monotonic() + _RETRY_S
        while True:
            described = self._call("describing the group", self._admin.describe_groups, [group])
            info: Mapping[str, Any] = described[group]
            error = info.get("error")
            if not error:
                return info
            if "GroupIdNotFound" in str(error):  # DescribeGroups v6+; earlier versions say Dead
                return {"group_id": group, "group_state": DEAD, "members": []}
            if not any(name in str(error) for name in _RETRIABLE) or time.monotonic() > deadline:
                raise GroupsToolError(f"describing group {group!r} failed: {error}")
            time.sleep(0.2)

    def state(self, group: str) -> str:
        return str(self._described(group)["group_state"])

    def describe(self, group: str) -> GroupDescription:
        """Members, their assignments and every committed offset with its log end and lag.

        :raises GroupsToolError: the group does not exist.
        """
        info = self._described(group)
        committed = self.committed(group)
        if info["group_state"] == DEAD and not committed:
            raise GroupsToolError(f"consumer group {group!r} does not exist")
        members = tuple(_member(m) for m in info["members"])
        owner = {tp: m for m in members for tp in m.partitions}
        partitions = sorted(set(owner) | set(committed))
        ends = self.log_end_offsets(partitions)
        rows = []
        for tp in partitions:
            current = committed.get(tp)
            end = ends.get(tp)
            member = owner.get(tp)
            rows.append(
                OffsetRow(
                    group,
                    tp[0],
                    tp[1],
                    current,
                    end,
                    None if current is None or end is None else end - current,
                    member.consumer_id if member else None,
                    member.host if member else None,
                    member.client_id if member else None,
                )
            )
        return GroupDescription(group, str(info["group_state"]), members, tuple(rows))

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        fetched = self._call("fetching committed offsets", self._admin.list_group_offsets, group)
        offsets = fetched.get(group, {})
        return {(tp.topic, tp.partition): om.offset for tp, om in offsets.items() if om.offset >= 0}

    def log_end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        from kafka.admin import OffsetSpec

        return self._offsets({tp: OffsetSpec.LATEST for tp in partitions})

    def _offsets(self, specs: Mapping[tuple[str, int], Any]) -> dict[tuple[str, int], int]:
        from kafka import TopicPartition

        if not specs:
            return {}
        asked = {
            TopicPartition(topic, partition): spec for (topic, partition), spec in specs.items()
        }
        answer = self._call("listing offsets", self._admin.list_partition_offsets, asked)
        return {(tp.topic, tp.partition): found.offset for tp, found in answer.items()}

    # --- reset --------------------------------------------------------------------------------

    def partitions_of(
        self, group: str, topics: Iterable[tuple[str, tuple[int, ...] | None]], all_topics: bool
    ) -> list[tuple[str, int]]:
        """The partitions a reset covers: those named, every partition of a topic named alone,
        or with ``all_topics`` every partition the group has an offset for."""
        chosen: set[tuple[str, int]] = set()
        if all_topics:
            chosen |= set(self.committed(group))
        wanted = list(topics)
        if wanted:
            known = self._call(
                "reading topics", self._admin.describe_topics, [t for t, _ in wanted]
            )
            counts = {t["name"]: (t["error_code"], len(t["partitions"])) for t in known}
            for topic, partitions in wanted:
                error, count = counts.get(topic, (3, 0))
                if error:
                    raise GroupsToolError(f"topic {topic!r} does not exist")
                for partition in partitions if partitions is not None else range(count):
                    if partition >= count:
                        raise GroupsToolError(
                            f"topic {topic!r} has {count} partitions; there is no partition "
                            f"{partition}"
                        )
                    chosen.add((topic, partition))
        return sorted(chosen)

    def plan_reset(
        self, group: str, partitions: list[tuple[str, int]], strategy: ResetStrategy
    ) -> dict[tuple[str, int], int]:
        """The new offset of each partition (nothing is changed).

        :raises GroupsToolError: the group is active.
        """
        from kafka.admin import OffsetSpec

        state = self.state(group)
        if state not in _INACTIVE:
            raise GroupsToolError(
                f"offsets of group {group!r} can only be reset while it is inactive, but its "
                f"state is {state}: stop its consumers first"
            )
        if not partitions:
            raise GroupsToolError(f"nothing to reset: group {group!r} has no offsets there")
        earliest = self._offsets({tp: OffsetSpec.EARLIEST for tp in partitions})
        latest = self._offsets({tp: OffsetSpec.LATEST for tp in partitions})
        if strategy.kind == "earliest":
            return earliest
        if strategy.kind == "latest":
            return latest
        if strategy.kind == "datetime":
            found = self._offsets({tp: strategy.value for tp in partitions})
            return {tp: found[tp] if found.get(tp, -1) >= 0 else latest[tp] for tp in partitions}
        return {tp: min(max(strategy.value, earliest[tp]), latest[tp]) for tp in partitions}

    def execute_reset(self, group: str, plan: Mapping[tuple[str, int], int]) -> None:
        """Commits ``plan`` for the group.

        :raises GroupsToolError: naming each partition the coordinator refused.
        """
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        offsets = {
            TopicPartition(topic, partition): OffsetAndMetadata(offset, "", -1)
            for (topic, partition), offset in plan.items()
        }
        answer = self._call("committing offsets", self._admin.alter_group_offsets, group, offsets)
        failed = [
            f"{tp.topic}-{tp.partition}: {error.__name__}"
            for tp, error in sorted(answer.items())
            if getattr(error, "errno", 0)
        ]
        if failed:
            raise GroupsToolError(
                f"the coordinator refused offsets of {group!r}: " + ", ".join(failed)
            )

    # --- delete -------------------------------------------------------------------------------

    def delete(self, groups: list[str]) -> dict[str, str | None]:
        """Each group and why its deletion failed, or None for a deleted one."""
        answer = self._call("deleting groups", self._admin.delete_groups, groups)
        return {
            group: None if result in ("OK", None) else _deletion_error(str(result))
            for group, result in answer.items()
        }


def _check_reachable(bootstrap_servers: str, timeout_s: float = 5.0) -> None:
    """Fails at once, naming the addresses, when no bootstrap server accepts a connection
    (the admin client would retry for its whole timeout and say less)."""
    errors = []
    for address in filter(None, (a.strip() for a in bootstrap_servers.split(","))):
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit():
            raise GroupsToolError(f"bootstrap server {address!r} is not host:port")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
            return
        except OSError as err:
            errors.append(f"{address}: {err.strerror or err}")
    raise GroupsToolError(f"cannot reach {bootstrap_servers}: " + "; ".join(errors))


def _member(raw: Mapping[str, Any]) -> MemberRow:
    assignment = raw.get("member_assignment") or {}
    partitions = tuple(
        sorted(
            (entry["topic"], partition)
            for entry in assignment.get("assigned_partitions", [])
            for partition in entry["partitions"]
        )
    )
    return MemberRow(
        raw["member_id"],
        raw.get("group_instance_id"),
        raw.get("client_host") or "",
        raw.get("client_id") or "",
        partitions,
    )


_DELETION_ERRORS = {
    "GroupIdNotFoundError": "the group does not exist",
    "NonEmptyGroupError": "the group is not empty: it still has active members",
}


def _deletion_error(name: str) -> str:
    return _DELETION_ERRORS.get(name, name)


def _reason(err: BaseException) -> str:
    return str(err) or type(err).__name__
