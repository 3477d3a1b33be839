"""OffsetCommit, OffsetFetch, OffsetDelete and DeleteGroups over the wire, and offset expiry."""

from __future__ import annotations

import pytest
from tierlog.client import Admin
from tierlog.cluster import EmbeddedCluster
from tierlog.groups import GroupCoordinator
from tierlog.groups.classic_group import now_ms
from tierlog.groups.retention import expire_offsets

from tests.waiting import wait_until

from .conftest import GroupClient, connect, create_topic

NONE = 0
OFFSET_METADATA_TOO_LARGE = 12
UNKNOWN_TOPIC_OR_PARTITION = 3
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
GROUP_SUBSCRIBED_TO_TOPIC = 86
INVALID_GROUP_ID = 24


def _member(client: GroupClient, group: str, *, sync: bool = True) -> tuple[str, int]:
    joined = client.join_twice(group)
    assert joined.error_code == NONE
    if sync:
        synced = client.sync(group, joined.generation_id, joined.member_id, {})
        assert synced.error_code == NONE
    return joined.member_id, joined.generation_id


def test_simple_commits_and_fetches_in_every_shape(client: GroupClient) -> None:
    codes = client.commit("simple", {("t", 0): 10, ("t", 1): 20}, metadata="m")
    assert codes == {("t", 0): NONE, ("t", 1): NONE}
    error, found = client.fetch_offsets("simple")
    assert (error, found) == (NONE, {("t", 0): (10, "m", NONE), ("t", 1): (20, "m", NONE)})
    for version in (1, 2, 5, 7, 8, 9):
        _, found = client.fetch_offsets("simple", [("t", 1), ("t", 3)], version=version)
        assert found == {("t", 1): (20, "m", NONE), ("t", 3): (-1, "", NONE)}, version
    for version in (2, 3, 6, 9):
        codes = client.commit("simple", {("t", 2): version}, version=version)
        assert codes == {("t", 2): NONE}
        assert client.fetch_offsets("simple", [("t", 2)])[1][("t", 2)][0] == version


def test_commit_refusals_per_partition(client: GroupClient) -> None:
    codes = client.commit("g", {("t", 0): 1, ("nope", 0): 1, ("t", 99): 1})
    assert codes == {
        ("t", 0): NONE,
        ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 99): UNKNOWN_TOPIC_OR_PARTITION,
    }
    codes = client.commit("g", {("t", 1): 1}, metadata="x" * 4097)
    assert codes == {("t", 1): OFFSET_METADATA_TOO_LARGE}
    assert client.commit("g", {("t", 1): 1}, metadata="x" * 4096) == {("t", 1): NONE}
    assert client.commit("none-such", {("t", 0): 1}, generation=3, member_id="m") == {
        ("t", 0): GROUP_ID_NOT_FOUND
    }
    assert client.commit("none-such", {("t", 0): 1}, generation=3, member_id="m", version=8) == {
        ("t", 0): ILLEGAL_GENERATION
    }


def test_names_no_partition_can_have_are_refused_per_partition(client: GroupClient) -> None:
    codes = client.commit("odd", {("t", 0): 1, ("", 0): 1, ("t", -1): 1, ("x" * 40_000, 0): 1})
    assert codes == {
        ("t", 0): NONE,
        ("", 0): UNKNOWN_TOPIC_OR_PARTITION,
        ("t", -1): UNKNOWN_TOPIC_OR_PARTITION,
        ("x" * 40_000, 0): UNKNOWN_TOPIC_OR_PARTITION,
    }
    _, found = client.fetch_offsets("odd", [("t", 0), ("", 0), ("t", -2)])
    assert found == {("t", 0): (1, "", NONE), ("", 0): (-1, "", NONE), ("t", -2): (-1, "", NONE)}
    deleted = client.delete_offsets("odd", "", [0])
    assert [p.error_code for t in deleted.topics for p in t.partitions] == [
        UNKNOWN_TOPIC_OR_PARTITION
    ]
    assert client.fetch_offsets("odd", [("t", 0)])[1] == {("t", 0): (1, "", NONE)}


def test_a_group_id_longer_than_a_record_key_holds_is_invalid(client: GroupClient) -> None:
    # Keys store the id with a 16-bit length: 32,767 bytes fit, one more does not.
    longest = "g" * 32_767
    assert client.commit(longest, {("t", 0): 7}) == {("t", 0): NONE}
    assert client.fetch_offsets(longest, [("t", 0)])[1] == {("t", 0): (7, "", NONE)}
    too_long = "é" * 16_384  # 32,768 bytes in UTF-8
    assert client.commit(too_long, {("t", 0): 7}) == {("t", 0): INVALID_GROUP_ID}
    assert client.fetch_offsets(too_long, [("t", 0)])[0] == INVALID_GROUP_ID


def test_commits_are_fenced_by_generation_and_member(client: GroupClient) -> None:
    member, generation = _member(client, "g", sync=False)
    # Between join and sync the assignment may still change.
    commit = {("t", 0): 5}
    assert client.commit("g", commit, generation=generation, member_id=member) == {
        ("t", 0): REBALANCE_IN_PROGRESS
    }
    client.sync("g", generation, member, {})
    assert client.commit("g", commit) == {("t", 0): UNKNOWN_MEMBER_ID}  # a simple commit
    assert client.commit("g", commit, generation=generation, member_id="other") == {
        ("t", 0): UNKNOWN_MEMBER_ID
    }
    assert client.commit("g", commit, generation=generation + 1, member_id=member) == {
        ("t", 0): ILLEGAL_GENERATION
    }
    assert client.commit("g", commit, generation=generation, member_id=member) == {("t", 0): NONE}


def test_offset_delete_and_group_delete(client: GroupClient) -> None:
    member, _ = _member(client, "g")
    client.commit("g", {("t", 0): 1, ("u", 0): 2}, generation=1, member_id=member)
    answer = client.delete_offsets("g", "t", [0])
    assert answer.error_code == NONE
    assert [p.error_code for p in answer.topics[0].partitions] == [GROUP_SUBSCRIBED_TO_TOPIC]
    assert client.delete_groups("g") == {"g": NON_EMPTY_GROUP}
    client.leave("g", (member, None))
    answer = client.delete_offsets("g", "t", [0])
    assert [p.error_code for p in answer.topics[0].partitions] == [NONE]
    assert client.fetch_offsets("g")[1] == {}  # "u" never existed as a topic: not committed
    assert client.delete_offsets("missing", "t", [0]).error_code == GROUP_ID_NOT_FOUND
    client.commit("g", {("t", 1): 3})
    assert client.delete_groups("g", "missing") == {"g": NONE, "missing": GROUP_ID_NOT_FOUND}
    assert client.fetch_offsets("g") == (NONE, {})
    assert "g" not in {g.group_id for g in client.list_groups().groups}


def _coordinator(cluster: EmbeddedCluster, broker_id: int = 0) -> GroupCoordinator:
    coordinator = cluster.broker(broker_id).group_coordinator
    assert coordinator is not None
    return coordinator


def test_offsets_of_an_empty_group_expire_after_the_retention(
    cluster: EmbeddedCluster, client: GroupClient
) -> None:
    member, _ = _member(client, "kept")
    client.commit("kept", {("t", 0): 7}, generation=1, member_id=member)
    client.commit("idle", {("t", 0): 7})
    coordinator = _coordinator(cluster)
    retention = coordinator.offsets_retention_ms
    later = now_ms() + retention + 1
    removed = sum(expire_offsets(s, retention, now=later) for s in coordinator.shards())
    assert removed == 1
    assert client.fetch_offsets("idle") == (NONE, {})
    assert client.fetch_offsets("kept")[1] == {("t", 0): (7, "", NONE)}  # it has a member
    assert "idle" not in {g.group_id for g in client.list_groups().groups}
    # Tombstones: the expiry holds across a restart.
    cluster.restart_broker(0)
    assert _coordinator(cluster).wait_loaded()
    with connect(cluster) as again:
        assert again.fetch_offsets("idle") == (NONE, {})
        assert again.fetch_offsets("kept")[1] == {("t", 0): (7, "", NONE)}


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_groups_and_offsets_survive_a_restart(cluster: EmbeddedCluster, clean: bool) -> None:
    with connect(cluster) as client:
        member, generation = _member(client, "g")
        client.commit("g", {("t", 0): 11, ("t", 3): 33}, generation=generation, member_id=member)
        client.commit("s", {("t", 1): 5})
        client.commit("gone", {("t", 1): 5})
        assert client.delete_groups("gone") == {"gone": NONE}
    cluster.restart_broker(0, clean=clean)
    assert _coordinator(cluster).wait_loaded()
    with connect(cluster) as client:
        assert client.fetch_offsets("g")[1] == {("t", 0): (11, "", NONE), ("t", 3): (33, "", NONE)}
        assert client.fetch_offsets("s")[1] == {("t", 1): (5, "", NONE)}
        assert client.fetch_offsets("gone") == (NONE, {})
        listed = {g.group_id: g.group_state for g in client.list_groups().groups}
        assert listed == {"g": "Stable", "s": "Empty"}
        (described,) = client.describe("g")
        assert (described.group_state, [m.member_id for m in described.members]) == (
            "Stable",
            [member],
        )
        # The member carries on in its generation.
        assert client.heartbeat("g", generation, member) == NONE
        assert client.commit("g", {("t", 0): 12}, generation=generation, member_id=member) == {
            ("t", 0): NONE
        }


def test_the_coordinator_lists_committed_offsets_per_group(
    cluster: EmbeddedCluster, client: GroupClient
) -> None:
    client.commit("a", {("t", 0): 3, ("t", 1): 4}, metadata="x")
    client.commit("b", {("t", 2): 5})
    offsets = _coordinator(cluster).committed_offsets()
    assert {g: {tp.partition: c.offset for tp, c in o.items()} for g, o in offsets.items()} == {
        "a": {0: 3, 1: 4},
        "b": {2: 5},
    }
    assert offsets["a"][next(iter(offsets["a"]))].metadata == "x"


def test_coordinator_metrics(cluster: EmbeddedCluster, client: GroupClient) -> None:
    group = "group-coordinator-metrics"

    def count(name: str) -> int:
        value = cluster.metric(0, group, name)
        assert isinstance(value, dict)
        return int(value["count"])

    member, generation = _member(client, "m")
    client.commit("m", {("t", 0): 1, ("t", 1): 1}, generation=generation, member_id=member)
    client.commit("s", {("t", 2): 1})
    assert cluster.metric(0, group, "group-count", protocol="classic") == 2
    assert cluster.metric(0, group, "offset-count") == 3
    assert count("offset-commit-rate") == 3
    assert count("group-completed-rebalance-rate") == 1
    client.leave("m", (member, None))
    assert client.delete_groups("m") == {"m": NONE}
    assert count("offset-deletion-rate") == 2
    assert cluster.metric(0, group, "offset-count") == 1
    assert cluster.metric(0, group, "group-count", protocol="classic") == 1


def test_offsets_of_a_deleted_topic_are_deleted(
    cluster: EmbeddedCluster, client: GroupClient
) -> None:
    create_topic(cluster, "doomed", 2)
    client.commit("g", {("doomed", 0): 5, ("doomed", 1): 6, ("t", 0): 7})
    Admin(cluster.transport).delete_topics(["doomed"])
    wait_until(lambda: client.fetch_offsets("g")[1] == {("t", 0): (7, "", NONE)}, "the deletion")
    cluster.restart_broker(0)  # tombstones: the deletion holds
    assert _coordinator(cluster).wait_loaded()
    with connect(cluster) as again:
        assert again.fetch_offsets("g")[1] == {("t", 0): (7, "", NONE)}
