"""KIP-1075: ListOffsets by time over remote data waits on the reader pool, not the request."""

from __future__ import annotations

import threading
from collections.abc import Callable

from tierlog.client import Admin, AlterConfig, ConfigResource
from tierlog.errors import ReplicaNotAvailableError, RequestTimedOutError, UnknownServerError
from tierlog.server import protocol as p

from tests.server.conftest import T0, batch, offsets
from tests.waiting import wait_until

from .conftest import Tiered

T = T0 - 60_000
READER = "remote-log-reader"


def tiered_by_time(tiered: Tiered) -> None:
    """Topic ``t``: batch n holds offsets 10n..10n+9 stamped T + 1000n + i, mostly remote-only;
    topic ``local``: 30 records stamped from T0, never tiered."""
    tiered.client.create(
        "t", segment_bytes="4096", remote_storage_enable="true", local_retention_bytes="1"
    )
    for n in range(30):
        answer = tiered.client.produce("t", 0, batch(10, timestamp=T + 1000 * n, value_size=100))
        assert answer.error_code == p.NONE
    plog = tiered.log("t")
    wait_until(lambda: plog.segment_count == 1, "every rolled segment only remote")
    tiered.client.create("local")
    tiered.fill("local", 3)


def both(remote_timestamp: int, local_timestamp: int = T0) -> p.ListOffsetsRequest:
    return p.ListOffsetsRequest(
        [
            p.ListOffsetsTopic("t", [p.ListOffsetsPartition(0, remote_timestamp)]),
            p.ListOffsetsTopic("local", [p.ListOffsetsPartition(0, local_timestamp)]),
        ]
    )


def answers(response: p.ListOffsetsResponse) -> dict[str, p.ListOffsetsPartitionResponse]:
    return {topic.name: topic.partitions[0] for topic in response.topics}


def active_readers(tiered: Tiered) -> object:
    registry = tiered.cluster.broker(0).plugin_host.metrics  # type: ignore[union-attr]
    return registry.value("RemoteStorageThreadPool", "RemoteLogReaderActiveThreads")


def test_a_time_in_the_remote_tier_is_found_by_a_reader_thread(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1)
    tiered_by_time(tiered)
    found = tiered.client.list_offset("t", T + 2005)
    assert (found.error_code, found.offset, found.timestamp) == (p.NONE, 25, T + 2005)
    fetches = tiered.history.of("fetch")
    assert fetches and all(e.thread.startswith(READER) for e in fetches)
    # no remote-only data to search: answered on the request thread, without a remote read
    local = tiered.client.list_offset("local", T0)
    assert (local.error_code, local.offset) == (p.NONE, 0)
    assert len(tiered.history.of("fetch")) == len(fetches)


def test_a_parked_lookup_blocks_neither_its_local_partitions_nor_other_requests(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1)
    tiered_by_time(tiered)
    tiered.history.fetch_delay = 60.0  # until released
    order: list[str] = []
    response: list[p.ListOffsetsResponse] = []

    def list_offsets() -> None:
        response.append(tiered.cluster.transport.send(0, both(T + 2005)))
        order.append("list offsets answered")

    request = threading.Thread(target=list_offsets)
    request.start()
    wait_until(lambda: active_readers(tiered) == 1, "the lookup running on a reader thread")
    assert request.is_alive()
    order.append("lookup parked")
    assert tiered.client.produce("local", 0, batch(5)).error_code == p.NONE
    fetched = tiered.client.fetch("local", 0, 0, max_wait_ms=0)
    assert fetched.error_code == p.NONE and len(offsets(fetched.records)) == 35
    order.append("produce and fetch done")
    assert request.is_alive()
    tiered.history.release.set()
    request.join(30)
    assert order == ["lookup parked", "produce and fetch done", "list offsets answered"]
    got = answers(response[0])
    assert (got["t"].error_code, got["t"].offset, got["t"].timestamp) == (p.NONE, 25, T + 2005)
    assert (got["local"].error_code, got["local"].offset) == (p.NONE, 0)
    assert [e.thread.startswith(READER) for e in tiered.history.of("fetch")] == [True]


def test_a_lookup_past_its_timeout_answers_request_timed_out_for_its_partition_only(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1, **{"remote.list.offsets.request.timeout.ms": "200"})
    tiered_by_time(tiered)
    tiered.history.fetch_delay = 60.0  # until released
    got = answers(tiered.cluster.transport.send(0, both(T + 2005)))
    assert got["t"].error_code == RequestTimedOutError.code
    assert (got["local"].error_code, got["local"].offset) == (p.NONE, 0)
    registry = tiered.cluster.broker(0).plugin_host.metrics  # type: ignore[union-attr]
    expired = registry.value("DelayedRemoteListOffsetsMetrics", "ExpiresPerSec")
    assert expired["count"] == 1  # type: ignore[index]
    # the timeout is a dynamic broker config
    with Admin(tiered.cluster.transport) as admin:
        admin.alter_configs(
            {
                ConfigResource.broker(0): [
                    AlterConfig("remote.list.offsets.request.timeout.ms", "60000")
                ]
            }
        )
    tiered.history.release.set()
    again = tiered.client.list_offset("t", T + 2005)
    assert (again.error_code, again.offset) == (p.NONE, 25)


def test_a_failed_lookup_answers_its_error_and_the_other_partitions_succeed(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1)
    tiered_by_time(tiered)
    tiered.history.fail_fetches = 1
    got = answers(tiered.cluster.transport.send(0, both(T + 2005)))
    assert got["t"].error_code == UnknownServerError.code  # a RemoteStorageError has no code
    assert (got["local"].error_code, got["local"].offset) == (p.NONE, 0)
    assert tiered.client.list_offset("t", T + 2005).offset == 25


def test_a_full_reader_queue_answers_a_retriable_error(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(
        1, **{"remote.log.reader.threads": "1", "remote.log.reader.max.pending.tasks": "1"}
    )
    tiered_by_time(tiered)
    tiered.history.fetch_delay = 60.0  # until released
    waiting = [
        threading.Thread(target=tiered.client.list_offset, args=("t", T + 2005)) for _ in range(2)
    ]
    waiting[0].start()
    wait_until(lambda: active_readers(tiered) == 1, "the reader thread taken")
    waiting[1].start()
    registry = tiered.cluster.broker(0).plugin_host.metrics  # type: ignore[union-attr]
    wait_until(
        lambda: registry.value("RemoteStorageThreadPool", "RemoteLogReaderTaskQueueSize") == 1,
        "the queue full",
    )
    got = answers(tiered.cluster.transport.send(0, both(T + 2005)))
    assert got["t"].error_code == ReplicaNotAvailableError.code
    assert (got["local"].error_code, got["local"].offset) == (p.NONE, 0)
    tiered.history.release.set()
    for thread in waiting:
        thread.join(30)
