"""Dangling COPY_SEGMENT_STARTED segments: Kafka's rules for uploads nobody here is copying.

A leader that loses its leadership in the middle of an upload finishes that upload: the new
leader sees the segment in COPY_SEGMENT_STARTED without copying it itself. Deleting it then
would let the upload land after the deletion and leave objects no metadata refers to, so a
dangling segment is only deleted once retention reaches it, and the deposed leader uploads no
further segment.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from tierlog import hookimpl
from tierlog.client import Admin, AlterConfig, ConfigResource, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import RemoteStorageNotReadyError
from tierlog.model import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
    TopicPartition,
)
from tierlog.server import protocol as p
from tierlog.testing.crash import count_file_orphans

from tests.server.conftest import Client, batch
from tests.waiting import wait_until

from .conftest import tiered_settings

pytest.importorskip("tierlog_fsspec")

TP = TopicPartition("t", 0)
STARTED = RemoteLogSegmentState.COPY_SEGMENT_STARTED
FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED


@attrs.frozen
class Copy:
    broker_id: int
    segment_id: str


class HeldUpload:
    """Holds the first upload the ``holder`` broker starts, before any byte of it is written,
    until ``release`` is set, and every upload of the brokers in ``paused`` until ``resume`` is;
    records every upload started, with the broker that started it."""

    def __init__(self, holder: int) -> None:
        self.holder = holder
        self.held = threading.Event()
        self.release = threading.Event()
        self.paused: set[int] = set()
        self.resume = threading.Event()
        self.segment: RemoteLogSegmentMetadata | None = None
        self.copies: list[Copy] = []
        self._lock = threading.Lock()

    @hookimpl(wrapper=True)
    def tierlog_copy_log_segment_data(
        self, remote_log_segment_metadata: Any, log_segment_data: Any
    ) -> Generator[None, Any, Any]:
        metadata = remote_log_segment_metadata
        with self._lock:
            self.copies.append(Copy(metadata.broker_id, str(metadata.remote_log_segment_id.id)))
            hold = metadata.broker_id == self.holder and self.segment is None
            if hold:
                self.segment = metadata
        if hold:
            self.held.set()
            self.release.wait(60)
        elif metadata.broker_id in self.paused:
            self.resume.wait(60)
        return (yield)

    def started_by(self, broker_id: int) -> list[Copy]:
        with self._lock:
            return [c for c in self.copies if c.broker_id == broker_id]


@pytest.fixture
def held() -> Iterator[HeldUpload]:
    upload = HeldUpload(holder=0)
    yield upload
    upload.release.set()
    upload.resume.set()


@pytest.fixture
def cluster(tmp_path: Path, held: HeldUpload) -> Iterator[EmbeddedCluster]:
    running = EmbeddedCluster(
        2,
        tmp_path / "data",
        tiered_settings(tmp_path / "remote", **{"replica.lag.time.max.ms": "30000"}),
        extra_plugins={"held": held},
    )
    running.start()
    try:
        yield running
    finally:
        held.release.set()
        held.resume.set()
        running.stop()


def _tip(cluster: EmbeddedCluster, broker_id: int) -> TopicIdPartition:
    replica = cluster.broker(broker_id).partition(TP)
    assert replica is not None and replica.topic_id is not None
    return TopicIdPartition(replica.topic_id, TP)


def _listed(cluster: EmbeddedCluster, broker_id: int) -> list[RemoteLogSegmentMetadata]:
    """The broker's remote segments of TP; none while a new leader's metadata still loads."""
    host = cluster.broker(broker_id).plugin_host
    assert host is not None
    try:
        return list(host.metadata.list_remote_log_segments(_tip(cluster, broker_id)))
    except RemoteStorageNotReadyError:
        return []


def _wait_expirations(cluster: EmbeddedCluster, broker_id: int, count: int) -> None:
    """Returns once the broker's expiration task for the partition has run ``count`` more
    times as its leader."""
    rlm = cluster.broker(broker_id).remote_log_manager
    assert rlm is not None
    tip = _tip(cluster, broker_id)
    seen: list[float] = []

    def ran() -> bool:
        tasks = rlm.led_partitions().get(tip)
        idle = tasks is not None and not tasks.expire_running
        if idle and (not seen or seen[-1] != tasks.expire_due):  # type: ignore[union-attr]
            seen.append(tasks.expire_due)  # type: ignore[union-attr]
        return len(seen) > count

    wait_until(ran, f"{count} expiration runs on broker {broker_id}")


def _lead_on_0_with_1_preferred(cluster: EmbeddedCluster, client: Client) -> None:
    """The topic's preferred replica is broker 1, but broker 0 leads it (after a failover)."""
    configs = {"segment.bytes": "4096"}
    with Admin(cluster.transport) as admin:
        admin.create_topics([NewTopic("t", replica_assignment={0: (1, 0)}, configs=configs)])
    wait_until(lambda: client.leader("t") == 1, "broker 1 leads")
    cluster.stop_broker(1)
    wait_until(lambda: client.leader("t") == 0, "broker 0 leads")
    cluster.start_broker(1)
    wait_until(
        lambda: set(client.metadata("t").topics[0].partitions[0].isr_nodes) == {0, 1},
        "broker 1 back in the ISR",
    )


def _fill(client: Client, batches: int) -> None:
    for n in range(batches):
        response = client.produce("t", 0, batch(10, tag=f"b{n}", value_size=100))
        assert response.error_code == p.NONE


def test_a_deposed_leaders_upload_lands_referenced_and_it_uploads_nothing_more(
    cluster: EmbeddedCluster, held: HeldUpload, tmp_path: Path
) -> None:
    client = Client(cluster)
    _lead_on_0_with_1_preferred(cluster, client)
    _fill(client, 30)
    # Tiering starts with every rolled segment waiting: broker 0's copy task has more to
    # upload after the one held.
    with Admin(cluster.transport) as admin:
        admin.alter_configs(
            {ConfigResource.topic("t"): [AlterConfig("remote.storage.enable", "true")]}
        )
    assert held.held.wait(30), "broker 0 started an upload"
    assert held.segment is not None
    segment_id = held.segment.remote_log_segment_id
    held.paused.add(1)  # the new leader's own uploads wait: broker 0 finds work left to do

    with Admin(cluster.transport) as admin:
        outcome = admin.elect_leaders(p.ElectionType.PREFERRED, [TP])
    assert outcome[TP] is None
    wait_until(lambda: client.leader("t") == 1, "broker 1 leads again")
    # The new leader lists the upload broker 0 began, and lets it be while it runs.
    wait_until(
        lambda: any(s.remote_log_segment_id == segment_id for s in _listed(cluster, 1)),
        "the upload listed on broker 1",
    )
    _wait_expirations(cluster, 1, 5)
    assert [s.state for s in _listed(cluster, 1) if s.remote_log_segment_id == segment_id] == [
        STARTED
    ]
    copies_by_0 = len(held.started_by(0))

    held.release.set()
    # The upload ends and its COPY_SEGMENT_FINISHED reaches the new leader's metadata.
    wait_until(
        lambda: (
            [s.state for s in _listed(cluster, 1) if s.remote_log_segment_id == segment_id]
            == [FINISHED]
        ),
        "the deposed leader's upload finished",
    )
    _wait_expirations(cluster, 1, 5)
    # Broker 0 uploaded nothing after the held upload; broker 1 tiers the rest itself.
    assert len(held.started_by(0)) == copies_by_0 == 1
    held.resume.set()
    wait_until(
        lambda: len([s for s in _listed(cluster, 1) if s.state is FINISHED]) >= 5,
        "broker 1 tiering",
    )
    _wait_expirations(cluster, 1, 5)
    live = {str(s.remote_log_segment_id.id) for s in _listed(cluster, 1)}
    assert count_file_orphans(tmp_path / "remote")(lambda: live) == 0


def test_a_dangling_upload_is_deleted_once_the_log_start_offset_passes_it(
    cluster: EmbeddedCluster, held: HeldUpload, tmp_path: Path
) -> None:
    """An upload abandoned by another broker stays until retention reaches it, as in Kafka."""
    held.release.set()  # nothing is held here
    client = Client(cluster)
    client.create("t", 1, 2, segment_bytes="4096", remote_storage_enable="true")
    leader = client.leader("t")
    _fill(client, 30)
    finished = wait_until(
        lambda: (done := [s for s in _listed(cluster, leader) if s.state is FINISHED])[2:] and done,
        "three segments tiered",
    )
    # Another broker's upload of the first tiered range, begun and never finished.
    first = min(finished, key=lambda s: s.start_offset)
    host = cluster.broker(leader).plugin_host
    assert host is not None
    dangling = attrs.evolve(
        first,
        remote_log_segment_id=RemoteLogSegmentId.generate_new(first.topic_id_partition),
        state=STARTED,
        custom_metadata=None,
        broker_id=1 - leader,
    )
    host.metadata.add_remote_log_segment_metadata(dangling)
    objects = tmp_path / "remote"
    for path in list(objects.rglob(f"*{first.remote_log_segment_id.id}*")):
        target = path.name.replace(
            str(first.remote_log_segment_id.id), str(dangling.remote_log_segment_id.id)
        )
        path.with_name(target).write_bytes(path.read_bytes())

    _wait_expirations(cluster, leader, 5)
    listed = {s.remote_log_segment_id: s.state for s in _listed(cluster, leader)}
    assert listed[dangling.remote_log_segment_id] is STARTED
    assert list(objects.rglob(f"*{dangling.remote_log_segment_id.id}*"))

    with Admin(cluster.transport) as admin:
        admin.delete_records({TP: first.end_offset + 1})
    wait_until(
        lambda: (
            dangling.remote_log_segment_id
            not in {s.remote_log_segment_id for s in _listed(cluster, leader)}
        ),
        "the dangling upload deleted",
    )
    assert not list(objects.rglob(f"*{dangling.remote_log_segment_id.id}*"))
    live = {str(s.remote_log_segment_id.id) for s in _listed(cluster, leader)}
    assert count_file_orphans(objects)(lambda: live) == 0
    # What the count would see of an upload that lost its metadata.
    kept = next(objects.rglob("*.log"))
    kept.with_name(f"{first.start_offset:020d}-stray.log").touch()
    assert count_file_orphans(objects)(lambda: live) == 1
