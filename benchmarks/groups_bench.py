"""The group coordinator: rebalance times and OffsetCommit throughput, over the listener.

One broker listens on a free port; the members are raw protocol clients (kafka-python's message
classes over sockets, in threads of this process), so the figures are the coordinator's and
not a client library's timers.

* Rebalance, 10 members joining: from the first JoinGroup until all ten have their assignment
  in one generation, with ``group.initial.rebalance.delay.ms`` 0 and with Kafka's default 3000
  (what a new group pays by default). Reported only.
* Rebalance, one of ten leaving: from its LeaveGroup until the nine others have their new
  assignment (they learn of it from a heartbeat, every 20 ms here). Reported only.
* OffsetCommit throughput: one client committing one partition per request (acks=all into
  ``__consumer_offsets``), against the same client producing the same record (key and value as
  the commit writes them) one per request with acks=all into a plain topic. Target: 0.5.
* The log cleaner's figures (``groups_cleaner.py``), when that module exists.

``--quick`` commits a tenth as many times and measures each rebalance once instead of three
times (medians).
"""

from __future__ import annotations

import socket
import struct
import tempfile
import threading
import time
from pathlib import Path
from statistics import median
from typing import Any

from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.producer.produce import ProduceRequest
from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.groups.offsets import CommittedOffset, OffsetStore
from tierlog.groups.subscriptions import encode_assignment, encode_subscription
from tierlog.model import TopicPartition
from tierlog.records import RecordBatchBuilder

from . import groups_cleaner
from .report import row

MEMBERS = 10
PARTITIONS = 10
TOPIC = "bench"
KAFKA_INITIAL_DELAY_MS = 3000


class _Connection:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.correlation = 0

    def call(self, request: Any, version: int) -> Any:
        self.correlation += 1
        request.API_VERSION = version
        request.with_header(correlation_id=self.correlation, client_id="bench")
        self.sock.sendall(request.encode(header=True, framed=True))
        (size,) = struct.unpack(">i", self._exactly(4))
        response_class = request.header.get_response_class()
        return response_class.decode(self._exactly(size), version=version, header=True)

    def _exactly(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.sock.close()


class _Member(threading.Thread):
    """Joins, syncs, heartbeats every 20 ms and rejoins when told to, until stopped."""

    def __init__(self, bootstrap: str, group: str) -> None:
        super().__init__(daemon=True)
        self.conn = _Connection(bootstrap)
        self.group = group
        self.member_id = ""
        self.generation = -1
        self.size = 0
        self.synced = threading.Condition()
        self.stopping = threading.Event()

    def _join(self) -> None:
        r = JoinGroupRequest
        while True:
            answer = self.conn.call(
                r(
                    group_id=self.group,
                    session_timeout_ms=10_000,
                    rebalance_timeout_ms=10_000,
                    member_id=self.member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=[
                        r.JoinGroupRequestProtocol(
                            name="range", metadata=encode_subscription([TOPIC])
                        )
                    ],
                    reason=None,
                ),
                9,
            )
            self.member_id = answer.member_id
            if answer.error_code == 0:
                break
        assignments = []
        if answer.members:  # the leader assigns round-robin
            ids = sorted(m.member_id for m in answer.members)
            for n, member in enumerate(ids):
                mine = [p for p in range(PARTITIONS) if p % len(ids) == n]
                assignments.append(
                    SyncGroupRequest.SyncGroupRequestAssignment(
                        member_id=member, assignment=encode_assignment({TOPIC: mine})
                    )
                )
        synced = self.conn.call(
            SyncGroupRequest(
                group_id=self.group,
                generation_id=answer.generation_id,
                member_id=self.member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments=assignments,
            ),
            5,
        )
        if synced.error_code == 0:
            with self.synced:
                self.generation, self.size = answer.generation_id, len(answer.members)
                self.synced.notify_all()

    def run(self) -> None:
        self._join()
        while not self.stopping.wait(0.02):
            code = self.conn.call(
                HeartbeatRequest(
                    group_id=self.group,
                    generation_id=self.generation,
                    member_id=self.member_id,
                    group_instance_id=None,
                ),
                4,
            ).error_code
            if code != 0:
                self._join()

    def leave(self) -> None:
        self.stopping.set()
        self.join(10)
        r = LeaveGroupRequest
        self.conn.call(
            r(
                group_id=self.group,
                members=[r.MemberIdentity(member_id=self.member_id, group_instance_id=None)],
            ),
            5,
        )
        self.conn.close()


def _generation_of(members: list[_Member]) -> int | None:
    """The generation all ``members`` are synced in, if they agree."""
    generations = {m.generation for m in members}
    return generations.pop() if len(generations) == 1 else None


def _wait_all_synced(members: list[_Member], after: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        generation = _generation_of(members)
        if generation is not None and generation > after:
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the group did not settle")
        time.sleep(0.001)


def _rebalances(bootstrap: str, group: str) -> tuple[float, float]:
    """(ms for 10 members to join, ms for the rest to settle after one leaves)."""
    members = [_Member(bootstrap, group) for _ in range(MEMBERS)]
    started = time.perf_counter()
    for member in members:
        member.start()
    _wait_all_synced(members, 0)
    joined = time.perf_counter() - started
    # The leader's view: one generation of ten members.
    generation = _generation_of(members)
    assert generation is not None
    leaving, staying = members[0], members[1:]
    started = time.perf_counter()
    leaving.leave()
    _wait_all_synced(staying, generation)
    left = time.perf_counter() - started
    for member in staying:
        member.leave()
    return joined * 1000, left * 1000


def _commit_rate(bootstrap: str, count: int) -> tuple[float, float]:
    """(commits/s, produces/s of the same records), one client, one request at a time."""
    conn = _Connection(bootstrap)
    try:
        r = OffsetCommitRequest
        started = time.perf_counter()
        for n in range(count):
            answer = conn.call(
                r(
                    group_id="bench-commits",
                    generation_id_or_member_epoch=-1,
                    member_id="",
                    group_instance_id=None,
                    topics=[
                        r.OffsetCommitRequestTopic(
                            name=TOPIC,
                            partitions=[
                                r.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                    partition_index=n % PARTITIONS,
                                    committed_offset=n,
                                    committed_leader_epoch=-1,
                                    committed_metadata="",
                                )
                            ],
                        )
                    ],
                ),
                8,
            )
            assert answer.topics[0].partitions[0].error_code == 0
        commits = count / (time.perf_counter() - started)
        p = ProduceRequest
        started = time.perf_counter()
        for n in range(count):
            record = OffsetStore.record(
                "bench-commits",
                TopicPartition(TOPIC, n % PARTITIONS),
                CommittedOffset(n, -1, "", int(time.time() * 1000)),
            )
            builder = RecordBatchBuilder()
            builder.append(int(time.time() * 1000), record.key, record.value)
            answer = conn.call(
                p(
                    transactional_id=None,
                    acks=-1,
                    timeout_ms=10_000,
                    topic_data=[
                        p.TopicProduceData(
                            name="baseline",
                            partition_data=[
                                p.TopicProduceData.PartitionProduceData(
                                    index=n % PARTITIONS, records=builder.build()
                                )
                            ],
                        )
                    ],
                ),
                9,
            )
            assert answer.responses[0].partition_responses[0].error_code == 0
        produces = count / (time.perf_counter() - started)
    finally:
        conn.close()
    return commits, produces


def _cluster(data_dir: Path, delay_ms: int) -> EmbeddedCluster:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "group.initial.rebalance.delay.ms": str(delay_ms),
        "offsets.topic.num.partitions": "10",
    }
    cluster = EmbeddedCluster(1, data_dir, settings, listen=True)
    cluster.start()
    Admin(cluster.transport).create_topics(
        [NewTopic(TOPIC, PARTITIONS, 1), NewTopic("baseline", PARTITIONS, 1)]
    )
    conn = _Connection(cluster.bootstrap_servers)
    try:
        request = FindCoordinatorRequest(key_type=0, coordinator_keys=["warm-up"])
        assert conn.call(request, 4).coordinators[0].error_code == 0
    finally:
        conn.close()
    coordinator = cluster.broker(0).group_coordinator
    assert coordinator is not None and coordinator.wait_loaded()
    return cluster


def run(quick: bool) -> list[dict[str, Any]]:
    repetitions = 1 if quick else 3
    commits = 2_000 if quick else 20_000
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tierlog-groups-bench-") as tmp:
        cluster = _cluster(Path(tmp) / "no-delay", 0)
        try:
            timings = [_rebalances(cluster.bootstrap_servers, f"g{n}") for n in range(repetitions)]
            commit_rate, produce_rate = _commit_rate(cluster.bootstrap_servers, commits)
        finally:
            cluster.stop()
        cluster = _cluster(Path(tmp) / "kafka-delay", KAFKA_INITIAL_DELAY_MS)
        try:
            delayed = _rebalances(cluster.bootstrap_servers, "delayed")[0]
        finally:
            cluster.stop()
    join_ms = median(t[0] for t in timings)
    leave_ms = median(t[1] for t in timings)
    print(
        f"  10 members join in {join_ms:.1f} ms (delay 0), {delayed:.1f} ms with Kafka's default "
        f"{KAFKA_INITIAL_DELAY_MS} ms initial delay; one leaves, the rest settle in "
        f"{leave_ms:.1f} ms"
    )
    print(
        f"  OffsetCommit {commit_rate:,.0f}/s vs produce of the same records {produce_rate:,.0f}/s"
    )
    rows += [
        row(
            f"rebalance: 10 members join, initial delay 0 (vs Kafka's default "
            f"{KAFKA_INITIAL_DELAY_MS} ms)",
            join_ms,
            "ms",
            delayed,
            None,
            higher_is_better=False,
        ),
        row(
            "rebalance: 1 of 10 members leaves (vs the 10 joining)",
            leave_ms,
            "ms",
            join_ms,
            None,
            higher_is_better=False,
        ),
        row(
            "OffsetCommit, one partition per request, acks=all",
            commit_rate,
            "commits/s",
            produce_rate,
            0.5,
        ),
    ]
    rows += _cleaner_rows(quick)
    return rows


def _cleaner_rows(quick: bool) -> list[dict[str, Any]]:
    """The log cleaner's figures (``groups_cleaner.py``)."""
    cleaner_rows: list[dict[str, Any]] = groups_cleaner.rows(quick)
    return cleaner_rows
