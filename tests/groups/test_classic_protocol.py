"""The classic protocol over the wire, error paths included, against one listening broker."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tierlog.cluster import EmbeddedCluster
from tierlog.groups.subscriptions import assigned_partitions

from tests.waiting import wait_until

from .conftest import GroupClient, connect, groups_ready

NONE = 0
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82


def _stable_one(client: GroupClient, group: str, **kwargs: Any) -> tuple[str, int]:
    """One member joins and syncs; (member id, generation)."""
    joined = client.join_twice(group, **kwargs)
    assert joined.error_code == NONE, joined
    synced = client.sync(group, joined.generation_id, joined.member_id, {joined.member_id: {}})
    assert synced.error_code == NONE
    return joined.member_id, joined.generation_id


def test_first_join_gets_a_member_id_then_leads_generation_one(client: GroupClient) -> None:
    first = client.join("g")
    assert first.error_code == MEMBER_ID_REQUIRED
    assert first.member_id.startswith("raw-test-")
    joined = client.join("g", first.member_id)
    assert (joined.error_code, joined.generation_id) == (NONE, 1)
    assert joined.leader == joined.member_id == first.member_id
    assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
    assert [m.member_id for m in joined.members] == [first.member_id]
    assignment = {"t": [0, 1, 2, 3]}
    synced = client.sync("g", 1, first.member_id, {first.member_id: assignment})
    assert synced.error_code == NONE
    assert assigned_partitions(synced.assignment) == {"t": (0, 1, 2, 3)}
    assert client.heartbeat("g", 1, first.member_id) == NONE
    (described,) = client.describe("g")
    assert (described.group_state, described.protocol_data) == ("Stable", "range")
    assert [m.member_id for m in described.members] == [first.member_id]
    assert described.members[0].client_host == "/127.0.0.1"


def test_before_version_4_a_join_needs_no_member_id(client: GroupClient) -> None:
    joined = client.join("old", version=3)
    assert (joined.error_code, joined.generation_id) == (NONE, 1)
    assert joined.member_id


def test_join_refusals(cluster: EmbeddedCluster, client: GroupClient) -> None:
    assert client.join("g", session_ms=50).error_code == INVALID_SESSION_TIMEOUT
    assert client.join("g", session_ms=1_800_001).error_code == INVALID_SESSION_TIMEOUT
    assert client.join("", version=3).error_code == 24  # INVALID_GROUP_ID
    member, _ = _stable_one(client, "g")
    other = client.join("g", protocol_type="connect", version=3)
    assert other.error_code == INCONSISTENT_GROUP_PROTOCOL
    other = client.join("g", protocol="roundrobin", version=3)
    assert other.error_code == INCONSISTENT_GROUP_PROTOCOL
    assert client.join("g", "nobody").error_code == UNKNOWN_MEMBER_ID
    assert client.join("missing", "nobody").error_code == UNKNOWN_MEMBER_ID
    assert member


def test_group_max_size(make_cluster: Callable[..., EmbeddedCluster]) -> None:
    cluster = groups_ready(make_cluster(group_max_size=1))
    with connect(cluster) as client:
        _stable_one(client, "small")
        assert client.join("small").error_code == GROUP_MAX_SIZE_REACHED


def test_sync_and_heartbeat_fencing(client: GroupClient) -> None:
    member, generation = _stable_one(client, "g")
    assert client.sync("g", generation + 1, member).error_code == ILLEGAL_GENERATION
    assert client.sync("g", generation, "nobody").error_code == UNKNOWN_MEMBER_ID
    assert client.heartbeat("g", generation - 1, member) == ILLEGAL_GENERATION
    assert client.heartbeat("g", generation, "nobody") == UNKNOWN_MEMBER_ID
    assert client.heartbeat("nothing", 1, member) == UNKNOWN_MEMBER_ID
    assert client.heartbeat("g", generation, member) == NONE


def test_a_second_member_rebalances_the_group(cluster: EmbeddedCluster) -> None:
    with connect(cluster) as a, connect(cluster) as b, ThreadPoolExecutor(2) as pool:
        a_id, gen1 = _stable_one(a, "g")
        first = b.join("g")
        b_id = first.member_id
        b_join = pool.submit(b.join, "g", b_id)
        # The group waits for a to rejoin; a's heartbeat says so.
        wait_until(lambda: a.heartbeat("g", gen1, a_id) == REBALANCE_IN_PROGRESS, "rebalance")
        a_join = a.join("g", a_id)
        b_joined = b_join.result(timeout=10)
        assert a_join.generation_id == b_joined.generation_id == gen1 + 1
        assert a_join.leader == a_id  # the leader stays
        assert sorted(m.member_id for m in a_join.members) == sorted([a_id, b_id])
        assert b_joined.members == []
        # The follower's sync waits for the leader's assignment.
        b_sync = pool.submit(b.sync, "g", gen1 + 1, b_id)
        plan = {a_id: {"t": [0, 1]}, b_id: {"t": [2, 3]}}
        assert a.sync("g", gen1 + 1, a_id, plan).error_code == NONE
        assert assigned_partitions(b_sync.result(timeout=10).assignment) == {"t": (2, 3)}
        # The old generation can no longer commit; the new one can.
        codes = a.commit("g", {("t", 0): 5}, generation=gen1, member_id=a_id)
        assert codes == {("t", 0): ILLEGAL_GENERATION}
        codes = a.commit("g", {("t", 0): 5}, generation=gen1 + 1, member_id=a_id)
        assert codes == {("t", 0): NONE}


def test_a_member_whose_session_expires_leaves(cluster: EmbeddedCluster) -> None:
    with connect(cluster) as a, connect(cluster) as b, ThreadPoolExecutor(2) as pool:
        a_id, _ = _stable_one(a, "g", session_ms=10_000)
        b_first = b.join("g", session_ms=300)
        b_join = pool.submit(b.join, "g", b_first.member_id, session_ms=300)
        a_join = a.join("g", a_id, session_ms=10_000)
        gen = b_join.result(timeout=10).generation_id
        assert a_join.generation_id == gen
        a.sync("g", gen, a_id, {a_id: {"t": [0, 1]}, b_first.member_id: {"t": [2, 3]}})
        # b never heartbeats: after its 300 ms session a is told to rejoin, alone.
        wait_until(lambda: a.heartbeat("g", gen, a_id) == REBALANCE_IN_PROGRESS, "expiry")
        rejoined = a.join("g", a_id, session_ms=10_000)
        assert rejoined.generation_id == gen + 1
        assert [m.member_id for m in rejoined.members] == [a_id]
        assert b.heartbeat("g", gen, b_first.member_id) == UNKNOWN_MEMBER_ID


def test_static_member_rejoins_without_a_rebalance(client: GroupClient) -> None:
    member, generation = _stable_one(client, "static", instance="host-1")
    rejoined = client.join("static", instance="host-1")
    assert rejoined.error_code == NONE
    assert rejoined.generation_id == generation  # no rebalance
    assert rejoined.member_id != member and rejoined.member_id.startswith("host-1-")
    assert rejoined.skip_assignment  # the leader keeps the assignment it had
    assert [m.member_id for m in rejoined.members] == [rejoined.member_id]
    # Before v9 a rejoining static leader is named no leader, so it does not assign again.
    older = client.join("static", instance="host-1", version=8)
    assert (older.error_code, older.generation_id) == (NONE, generation)
    assert (older.leader, older.members) == (rejoined.member_id, [])
    assert client.heartbeat("static", generation, rejoined.member_id, instance="host-1") == (
        FENCED_INSTANCE_ID
    )
    rejoined = older
    assert client.heartbeat("static", generation, member, instance="host-1") == (FENCED_INSTANCE_ID)
    assert client.heartbeat("static", generation, rejoined.member_id, instance="host-1") == NONE
    codes = client.leave("static", (member, "host-1")).members
    assert [c.error_code for c in codes] == [FENCED_INSTANCE_ID]
    codes = client.leave("static", ("", "host-1")).members
    assert [c.error_code for c in codes] == [NONE]
    (described,) = client.describe("static")
    assert described.group_state == "Empty"


def test_leave_many_members_at_once(cluster: EmbeddedCluster) -> None:
    with connect(cluster) as a, connect(cluster) as b, ThreadPoolExecutor(1) as pool:
        a_id, _ = _stable_one(a, "g")
        b_id = b.join("g").member_id
        b_join = pool.submit(b.join, "g", b_id)
        a.join("g", a_id)
        b_join.result(timeout=10)
        answer = a.leave("g", (a_id, None), (b_id, None), ("ghost", None))
        assert answer.error_code == NONE
        assert [(m.member_id, m.error_code) for m in answer.members] == [
            (a_id, NONE),
            (b_id, NONE),
            ("ghost", UNKNOWN_MEMBER_ID),
        ]
        (described,) = a.describe("g")
        assert (described.group_state, described.members) == ("Empty", [])


def test_leave_before_version_3_answers_at_the_top(client: GroupClient) -> None:
    assert client.leave("nothing", ("ghost", None)).error_code == UNKNOWN_MEMBER_ID
    member, _ = _stable_one(client, "g")
    assert client.leave("g", ("ghost", None), version=1).error_code == UNKNOWN_MEMBER_ID
    assert client.leave("g", (member, None), version=1).error_code == NONE


def test_list_describe_and_filter_by_state(client: GroupClient) -> None:
    _stable_one(client, "busy")
    assert client.commit("idle", {("t", 0): 1}) == {("t", 0): NONE}
    listed = client.list_groups()
    assert listed.error_code == NONE
    found = {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in listed.groups}
    assert found["busy"] == ("consumer", "Stable", "classic")
    assert found["idle"] == ("", "Empty", "classic")
    assert {g.group_id for g in client.list_groups(["stable"]).groups} == {"busy"}
    assert {g.group_id for g in client.list_groups(version=2).groups} >= {"busy", "idle"}
    unknown, busy = client.describe("unknown", "busy")
    assert (unknown.error_code, unknown.group_state, unknown.members) == (NONE, "Dead", [])
    assert busy.group_state == "Stable"
    unknown, busy = client.describe("unknown", "busy", version=6)
    assert (unknown.error_code, unknown.group_state) == (69, "Dead")  # GROUP_ID_NOT_FOUND
    assert "does not exist" in unknown.error_message
    assert (busy.error_code, busy.group_state) == (NONE, "Stable")


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_dropped(
    cluster: EmbeddedCluster,
) -> None:
    with connect(cluster) as a, connect(cluster) as b, ThreadPoolExecutor(1) as pool:
        a_id, gen = _stable_one(a, "g", rebalance_ms=300)
        b_first = b.join("g", rebalance_ms=300)
        b_join = pool.submit(b.join, "g", b_first.member_id, rebalance_ms=300)
        # a is told to rejoin and never does: the rebalance completes without it.
        assert a.heartbeat("g", gen, a_id) in (NONE, REBALANCE_IN_PROGRESS)
        joined = b_join.result(timeout=10)
        assert (joined.error_code, joined.generation_id) == (NONE, gen + 1)
        assert joined.leader == b_first.member_id
        assert [m.member_id for m in joined.members] == [b_first.member_id]
        assert a.heartbeat("g", gen, a_id) == UNKNOWN_MEMBER_ID


def test_a_join_waiting_for_its_rebalance_ends_when_its_client_hangs_up(
    cluster: EmbeddedCluster,
) -> None:
    with connect(cluster) as a, connect(cluster) as b, ThreadPoolExecutor(1) as pool:
        slow = {"rebalance_ms": 120_000, "session_ms": 120_000}
        _stable_one(a, "g", **slow)
        b_first = b.join("g", **slow)
        port = b.sock.getsockname()[1]
        # a never rejoins, so b's join would wait for a's two-minute timeouts.
        waiting = pool.submit(b.join, "g", b_first.member_id, **slow)

        def serving_b() -> bool:
            return any(t.name.endswith(f":{port}") for t in threading.enumerate())

        wait_until(serving_b, "b's connection to be served")
        time.sleep(0.5)
        assert not waiting.done(), "b's join was answered at once"
        b.sock.shutdown(socket.SHUT_RDWR)
        wait_until(lambda: not serving_b(), "b's connection thread to end", timeout=10)
        assert waiting.exception(timeout=10) is not None  # b read no answer


def test_followers_are_dropped_when_the_leader_never_assigns(cluster: EmbeddedCluster) -> None:
    with connect(cluster) as a, connect(cluster) as b, ThreadPoolExecutor(1) as pool:
        a_id, gen = _stable_one(a, "g", rebalance_ms=300)
        b_id = b.join("g", rebalance_ms=300).member_id
        b_join = pool.submit(b.join, "g", b_id, rebalance_ms=300)
        led = a.join("g", a_id, rebalance_ms=300)
        assert (led.leader, led.generation_id) == (a_id, gen + 1)
        assert b_join.result(timeout=10).generation_id == gen + 1
        # The follower syncs; the leader never does: past the rebalance timeout the leader is
        # dropped and the waiting follower told to rejoin, which it then does alone.
        assert b.sync("g", gen + 1, b_id).error_code == REBALANCE_IN_PROGRESS
        rejoined = b.join("g", b_id, rebalance_ms=300)
        assert [m.member_id for m in rejoined.members] == [b_id]
        assert rejoined.generation_id == gen + 2
        assert a.heartbeat("g", gen + 1, a_id) == UNKNOWN_MEMBER_ID


def test_a_follower_that_never_syncs_is_dropped(cluster: EmbeddedCluster) -> None:
    with connect(cluster) as a, connect(cluster) as b, ThreadPoolExecutor(1) as pool:
        a_id, gen = _stable_one(a, "g", rebalance_ms=300, session_ms=10_000)
        b_id = b.join("g", rebalance_ms=300, session_ms=10_000).member_id
        b_join = pool.submit(b.join, "g", b_id, rebalance_ms=300, session_ms=10_000)
        a.join("g", a_id, rebalance_ms=300, session_ms=10_000)
        assert b_join.result(timeout=10).generation_id == gen + 1
        assert a.sync(
            "g", gen + 1, a_id, {a_id: {"t": [0, 1]}, b_id: {"t": [2, 3]}}
        ).error_code == (NONE)
        # b heartbeats but never syncs: at the rebalance timeout it is dropped.
        wait_until(lambda: b.heartbeat("g", gen + 1, b_id) == UNKNOWN_MEMBER_ID, "b dropped")
        assert a.heartbeat("g", gen + 1, a_id) == REBALANCE_IN_PROGRESS
        rejoined = a.join("g", a_id, rebalance_ms=300, session_ms=10_000)
        assert [m.member_id for m in rejoined.members] == [a_id]
