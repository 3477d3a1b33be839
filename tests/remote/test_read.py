"""The read path: fetches below the local log start are answered from the remote tier."""

from __future__ import annotations

import threading
from collections.abc import Callable

from tierlog.client import Admin, AlterConfig, ConfigResource
from tierlog.errors import OffsetMovedToTieredStorageError, ReplicaNotAvailableError
from tierlog.records import iter_batches
from tierlog.server import protocol as p

from tests.server.conftest import batch, offsets, values
from tests.waiting import wait_until

from .conftest import Tiered


def offloaded(
    tiered: Tiered, topic: str = "t", batches: int = 30, *, replication_factor: int = 1
) -> int:
    """A tiered topic whose local copies of tiered segments are gone; returns the local start."""
    tiered.client.create(
        topic,
        replication_factor=replication_factor,
        segment_bytes="4096",
        remote_storage_enable="true",
        local_retention_bytes="1",
    )
    tiered.fill(topic, batches)
    plog = tiered.log(topic)
    return int(
        wait_until(
            lambda: plog.local_log_start_offset > 50 and plog.local_log_start_offset,
            "local copies of tiered segments deleted",
        )
    )


def test_a_fetch_below_the_local_log_start_is_served_from_remote(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1)
    local_start = offloaded(tiered)
    assert tiered.log("t").log_start_offset == 0
    whole = tiered.client.fetch("t", 0, 0, max_wait_ms=0)
    assert whole.error_code == p.NONE
    got = offsets(whole.records)
    assert got[0] == 0 and got == list(range(got[0], got[0] + len(got)))
    assert got[-1] < local_start
    # the batch holding the offset comes whole; at least one batch even when over max_bytes
    one = tiered.client.fetch("t", 0, 15, max_bytes=1)
    assert [b.base_offset for b in iter_batches(one.records)] == [10]
    assert values(one.records)[0] == b"b1-0"
    size = len(one.records)
    limited = tiered.client.fetch("t", 0, 0, max_bytes=size * 2 + size // 2)
    assert len(list(iter_batches(limited.records))) == 2
    assert {e.kind for e in tiered.history.events} >= {"copy", "fetch", "fetch_index"}


def test_slow_storage_answers_empty_at_the_remote_wait_and_a_raised_wait_succeeds(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1, **{"remote.fetch.max.wait.ms": "200"})
    offloaded(tiered)
    tiered.history.fetch_delay = 3.0
    empty = tiered.client.fetch("t", 0, 0, max_wait_ms=0)
    assert empty.error_code == p.NONE and empty.records == b""
    registry = tiered.cluster.broker(0).plugin_host.metrics  # type: ignore[union-attr]
    assert registry.value("DelayedRemoteFetchMetrics", "ExpiresPerSec")["count"] >= 1  # type: ignore[index]
    with Admin(tiered.cluster.transport) as admin:
        admin.alter_configs(
            {ConfigResource.broker(0): [AlterConfig("remote.fetch.max.wait.ms", "20000")]}
        )
    full = tiered.client.fetch("t", 0, 0, max_wait_ms=0)
    assert full.error_code == p.NONE
    assert offsets(full.records)[0] == 0


def test_local_partitions_come_back_with_a_slow_remote_one(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1, **{"remote.fetch.max.wait.ms": "200"})
    offloaded(tiered)
    tiered.client.create("local")
    tiered.fill("local", 3)
    tiered.history.fetch_delay = 3.0
    request = p.FetchRequest(
        [
            p.FetchTopic("t", [p.FetchPartition(0, 0, 1 << 20)]),
            p.FetchTopic("local", [p.FetchPartition(0, 0, 1 << 20)]),
        ],
        max_wait_ms=0,
    )
    response = tiered.cluster.transport.send(0, request)
    remote, local = (t.partitions[0] for t in response.responses)
    assert remote.error_code == p.NONE and remote.records == b""
    assert local.error_code == p.NONE and len(offsets(local.records)) == 30


def test_a_full_reader_queue_answers_a_retriable_error(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(
        1,
        **{
            "remote.fetch.max.wait.ms": "100",
            "remote.log.reader.threads": "1",
            "remote.log.reader.max.pending.tasks": "1",
        },
    )
    offloaded(tiered)
    tiered.history.fetch_delay = 5.0
    codes = [tiered.client.fetch("t", 0, 0).error_code for _ in range(3)]
    assert codes[:2] == [p.NONE, p.NONE]
    assert codes[2] == ReplicaNotAvailableError.code
    assert ReplicaNotAvailableError.retriable


def test_a_follower_below_the_local_log_start_is_told_to_use_the_remote_tier(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(2)
    offloaded(tiered, replication_factor=2)
    leader = tiered.client.leader("t")
    follower = 1 - leader  # only a replica may fetch as a follower
    request = p.FetchRequest(
        [p.FetchTopic("t", [p.FetchPartition(0, 0, 1 << 20)])], replica_id=follower
    )
    answer = tiered.cluster.transport.send(leader, request).responses[0].partitions[0]
    assert answer.error_code == OffsetMovedToTieredStorageError.code


def test_the_remote_index_cache_stays_within_its_size(make_tiered: Callable[..., Tiered]) -> None:
    tiered = make_tiered(1, **{"remote.log.index.file.cache.total.size.bytes": "1"})
    local_start = offloaded(tiered)
    for offset in range(0, local_start, 30):
        assert tiered.client.fetch("t", 0, offset).records
    directory = tiered.cluster.broker(0).log_dirs[0] / "remote-log-index-cache"
    kept = {f.name.split(".")[0] for f in directory.iterdir()}
    assert len(kept) <= 1  # only the entry just used survives a 1-byte budget


def test_broker_stop_ends_every_remote_thread(make_tiered: Callable[..., Tiered]) -> None:
    tiered = make_tiered(1)
    offloaded(tiered)
    assert tiered.client.fetch("t", 0, 0).records
    tiered.cluster.stop()
    names = [t.name for t in threading.enumerate()]
    assert not [n for n in names if n.startswith(("rlm-", "remote-log-reader"))], names


def test_read_committed_from_remote_gets_the_aborted_transactions(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1)
    tiered.client.create(
        "t", segment_bytes="4096", remote_storage_enable="true", local_retention_bytes="1"
    )
    aborted = batch(5, producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    assert tiered.client.produce("t", 0, aborted).error_code == p.NONE
    assert tiered.client.end_transaction("t", 0, 7, commit=False) == p.NONE
    tiered.fill("t", 30)
    plog = tiered.log("t")
    wait_until(lambda: plog.local_log_start_offset > 50, "local copies deleted")
    committed = tiered.client.fetch("t", 0, 0, isolation_level=p.IsolationLevel.READ_COMMITTED)
    assert committed.error_code == p.NONE
    assert offsets(committed.records)[0] == 0
    assert committed.aborted_transactions == (p.AbortedTransaction(7, 0),)
    uncommitted = tiered.client.fetch("t", 0, 0)
    assert uncommitted.aborted_transactions is None
