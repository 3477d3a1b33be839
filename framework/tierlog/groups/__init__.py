"""Kafka's group coordinator: consumer groups and their committed offsets.

Groups and offsets live in the compacted internal topic ``__consumer_offsets``; the leader of a
group's partition of it is the group's coordinator. :class:`GroupCoordinator` (one per broker)
keeps a :class:`CoordinatorShard` for each partition this broker leads, loads it on becoming
leader and drops it on losing leadership. The classic protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup) runs on :class:`ClassicGroup`; offsets, listing, describing and deleting
work for every group type through the :class:`Group` base.

Another group type plugs in at five points: its requests derive from
``protocol.GroupRequest`` and register with ``dispatch.register_handler`` (the broker hands
every ``GroupRequest`` to the coordinator); its groups derive from :class:`Group` and live in
``CoordinatorShard.groups`` beside classic ones; its records use their own key versions, replayed
through ``shard.register_replayer`` at load (``shard.register_load_hook`` arms timers after);
its writes go through ``CoordinatorShard.append`` (acks=all, answered once committed); its
timeouts through ``CoordinatorShard.schedule``.
"""

from __future__ import annotations

from .group import Group, GroupState, GroupType
from .partitioner import group_partition, java_string_hashcode
from .runtime import GroupCoordinator
from .shard import CoordinatorShard

__all__ = [
    "CoordinatorShard",
    "Group",
    "GroupCoordinator",
    "GroupState",
    "GroupType",
    "group_partition",
    "java_string_hashcode",
]
