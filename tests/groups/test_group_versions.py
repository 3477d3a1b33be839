"""Every version of every group API the listener advertises, sent raw, answered correctly."""

from __future__ import annotations

import pytest
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from kafka.protocol.consumer.group import HeartbeatRequest
from tierlog.wire import APIS

from .conftest import GroupClient

NONE = 0


def _versions(key: int) -> list[int]:
    api = APIS[key]
    return list(range(api.min_version, api.max_version + 1))


def _stable(client: GroupClient, group: str) -> tuple[str, int]:
    joined = client.join_twice(group)
    client.sync(group, joined.generation_id, joined.member_id, {joined.member_id: {"t": [0]}})
    return joined.member_id, joined.generation_id


@pytest.mark.parametrize("version", _versions(11))
def test_join_group(client: GroupClient, version: int) -> None:
    group = f"join-{version}"
    joined = client.join(group, version=version)
    if version >= 4:
        assert joined.error_code == 79  # MEMBER_ID_REQUIRED
        joined = client.join(group, joined.member_id, version=version)
    assert (joined.error_code, joined.generation_id) == (NONE, 1)
    assert joined.leader == joined.member_id
    assert joined.protocol_name == "range"
    assert [m.member_id for m in joined.members] == [joined.member_id]


@pytest.mark.parametrize("version", _versions(14))
def test_sync_group(client: GroupClient, version: int) -> None:
    group = f"sync-{version}"
    joined = client.join_twice(group)
    synced = client.sync(
        group,
        joined.generation_id,
        joined.member_id,
        {joined.member_id: {"t": [1]}},
        version=version,
    )
    assert synced.error_code == NONE
    assert synced.assignment.endswith(b"\x00\x00\x00\x01\xff\xff\xff\xff")


@pytest.mark.parametrize("version", _versions(12))
def test_heartbeat(client: GroupClient, version: int) -> None:
    member, generation = _stable(client, f"hb-{version}")
    request = HeartbeatRequest(
        group_id=f"hb-{version}", generation_id=generation, member_id=member, group_instance_id=None
    )
    assert client.call(request, version).error_code == NONE


@pytest.mark.parametrize("version", _versions(13))
def test_leave_group(client: GroupClient, version: int) -> None:
    member, _ = _stable(client, f"leave-{version}")
    answer = client.leave(f"leave-{version}", (member, None), version=version)
    assert answer.error_code == NONE
    if version >= 3:
        assert [(m.member_id, m.error_code) for m in answer.members] == [(member, NONE)]
    (described,) = client.describe(f"leave-{version}")
    assert described.group_state == "Empty"


@pytest.mark.parametrize("version", _versions(8))
def test_offset_commit(client: GroupClient, version: int) -> None:
    group = f"commit-{version}"
    assert client.commit(group, {("t", 0): version, ("t", 1): 2}, version=version) == {
        ("t", 0): NONE,
        ("t", 1): NONE,
    }
    assert client.fetch_offsets(group)[1][("t", 0)][0] == version


@pytest.mark.parametrize("version", _versions(9))
def test_offset_fetch(client: GroupClient, version: int) -> None:
    group = f"fetch-{version}"
    client.commit(group, {("t", 2): 20}, metadata="meta")
    error, found = client.fetch_offsets(group, [("t", 2), ("t", 3)], version=version)
    assert error == NONE
    assert found == {("t", 2): (20, "meta", NONE), ("t", 3): (-1, "", NONE)}
    if version >= 2:  # null topics: every partition with an offset
        assert client.fetch_offsets(group, None, version=version)[1] == {
            ("t", 2): (20, "meta", NONE)
        }


@pytest.mark.parametrize("version", _versions(15))
def test_describe_groups(client: GroupClient, version: int) -> None:
    member, _ = _stable(client, f"describe-{version}")
    request = DescribeGroupsRequest(
        groups=[f"describe-{version}"], include_authorized_operations=False
    )
    (described,) = client.call(request, version).groups
    assert (described.error_code, described.group_state) == (NONE, "Stable")
    assert (described.protocol_type, described.protocol_data) == ("consumer", "range")
    assert [m.member_id for m in described.members] == [member]
    assert described.members[0].client_id == "raw-test"


@pytest.mark.parametrize("version", _versions(16))
def test_list_groups(client: GroupClient, version: int) -> None:
    _stable(client, f"list-{version}")
    request = ListGroupsRequest(states_filter=[], types_filter=[])
    answer = client.call(request, version)
    assert answer.error_code == NONE
    listed = {g.group_id: g for g in answer.groups}
    assert listed[f"list-{version}"].protocol_type == "consumer"
    if version >= 4:
        assert listed[f"list-{version}"].group_state == "Stable"


@pytest.mark.parametrize("version", _versions(42))
def test_delete_groups(client: GroupClient, version: int) -> None:
    client.commit(f"delete-{version}", {("t", 0): 1})
    request = DeleteGroupsRequest(groups_names=[f"delete-{version}", "never"])
    results = {r.group_id: r.error_code for r in client.call(request, version).results}
    assert results == {f"delete-{version}": NONE, "never": 69}  # GROUP_ID_NOT_FOUND


@pytest.mark.parametrize("version", _versions(47))
def test_offset_delete(client: GroupClient, version: int) -> None:
    client.commit("offset-delete", {("t", 0): 1, ("t", 1): 1})
    answer = client.delete_offsets("offset-delete", "t", [0])
    assert answer.error_code == NONE
    assert client.fetch_offsets("offset-delete")[1] == {("t", 1): (1, "", NONE)}
