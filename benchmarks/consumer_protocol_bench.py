"""The consumer group protocol (KIP-848): rebalance times against the classic protocol's, and
the server-side assignors.

One broker listens on a free port; members are raw protocol clients in threads of this process
(as in ``groups_bench``), heartbeating every 20 ms, so the figures are the coordinator's.

* Rebalance, 10 members joining: from the first ConsumerGroupHeartbeat until all ten are at one
  epoch, each owning its share and no partition owned twice; baseline: the classic protocol's
  ten members joining (JoinGroup and SyncGroup, initial delay 0) in the same run. Reported only.
* Rebalance, one of ten leaving: from its leave heartbeat until the nine have taken its
  partitions; baseline: the classic protocol's LeaveGroup in the same run. Reported only.
* The uniform assignor moving one member into a group of 100 over 1,000 partitions (sticky),
  against range assigning the same group from nothing. Reported only.

``--quick`` measures each rebalance once instead of three times (medians).
"""

from __future__ import annotations

import tempfile
import threading
import time
import uuid
from pathlib import Path
from statistics import median
from typing import Any

from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.groups.assignors import MemberSpec, RangeAssignor, UniformAssignor
from tierlog.model import Uuid
from tierlog.wire.schemas import ConsumerGroupHeartbeatRequest

from .groups_bench import _Connection, _rebalances
from .report import row

MEMBERS = 10
PARTITIONS = 10
TOPIC = "bench"


class _Member(threading.Thread):
    """Heartbeats every 20 ms, reporting back whatever it was last given."""

    def __init__(self, bootstrap: str, group: str) -> None:
        super().__init__(daemon=True)
        self.conn = _Connection(bootstrap)
        self.group = group
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: list[Any] = []
        self.stopping = threading.Event()

    def _beat(self, **fields: Any) -> Any:
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch, **fields
        )
        answer = self.conn.call(request, 1)
        if answer.error_code != 0:
            raise RuntimeError(f"heartbeat failed with error {answer.error_code}")
        self.epoch = answer.member_epoch
        if answer.assignment is not None:
            cls = ConsumerGroupHeartbeatRequest.TopicPartitions
            self.owned = [
                cls(topic_id=tp.topic_id, partitions=tp.partitions)
                for tp in answer.assignment.topic_partitions
            ]
        return answer

    def run(self) -> None:
        self._beat(rebalance_timeout_ms=10_000, subscribed_topic_names=[TOPIC], topic_partitions=[])
        while not self.stopping.wait(0.02):
            self._beat(topic_partitions=list(self.owned))

    def partitions(self) -> list[int]:
        return [p for tp in self.owned for p in tp.partitions]

    def leave(self) -> None:
        self.stopping.set()
        self.join(10)
        self.epoch = -1
        self._beat()
        self.conn.close()


def _settled(members: list[_Member], after: int) -> int | None:
    """The epoch all ``members`` agree on past ``after``, once they split every partition."""
    epochs = {m.epoch for m in members}
    owned = sorted(p for m in members for p in m.partitions())
    if len(epochs) == 1 and owned == list(range(PARTITIONS)):
        epoch = epochs.pop()
        if epoch > after:
            return epoch
    return None


def _wait_settled(members: list[_Member], after: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while (epoch := _settled(members, after)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError("the group did not settle")
        time.sleep(0.001)
    return epoch


def _consumer_rebalances(bootstrap: str, group: str) -> tuple[float, float]:
    members = [_Member(bootstrap, group) for _ in range(MEMBERS)]
    started = time.perf_counter()
    for member in members:
        member.start()
    epoch = _wait_settled(members, 0)
    joined = time.perf_counter() - started
    leaving, staying = members[0], members[1:]
    started = time.perf_counter()
    leaving.leave()
    _wait_settled(staying, epoch)
    left = time.perf_counter() - started
    for member in staying:
        member.leave()
    return joined * 1000, left * 1000


def _assignor_times() -> tuple[float, float]:
    """(ms for uniform to fit one new member into 100 holding 1,000 partitions, ms for range
    to assign the 101 from nothing)."""
    topics = [Uuid.random() for _ in range(10)]
    counts = {topic: 100 for topic in topics}
    subscribed = frozenset(topics)
    members = {f"m{n:03}": MemberSpec(subscribed) for n in range(100)}
    uniform = UniformAssignor()
    settled = uniform.assign(members, counts)
    grown = {m: MemberSpec(subscribed, settled[m]) for m in members}
    grown["new"] = MemberSpec(subscribed)
    started = time.perf_counter()
    uniform.assign(grown, counts)
    sticky = time.perf_counter() - started
    started = time.perf_counter()
    RangeAssignor().assign(grown, counts)
    fresh = time.perf_counter() - started
    return sticky * 1000, fresh * 1000


def _warm_up(cluster: EmbeddedCluster) -> None:
    """Creates ``__consumer_offsets`` and waits for its partitions to load."""
    conn = _Connection(cluster.bootstrap_servers)
    try:
        request = FindCoordinatorRequest(key_type=0, coordinator_keys=["warm-up"])
        assert conn.call(request, 4).coordinators[0].error_code == 0
    finally:
        conn.close()
    coordinator = cluster.broker(0).group_coordinator
    assert coordinator is not None and coordinator.wait_loaded()


def run(quick: bool) -> list[dict[str, Any]]:
    repetitions = 1 if quick else 3
    with tempfile.TemporaryDirectory(prefix="tierlog-kip848-bench-") as tmp:
        cluster = EmbeddedCluster(
            1,
            Path(tmp),
            {
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "group.initial.rebalance.delay.ms": "0",
                "offsets.topic.num.partitions": "10",
                "group.consumer.heartbeat.interval.ms": "20",
                "group.consumer.min.heartbeat.interval.ms": "1",
            },
            listen=True,
        )
        cluster.start()
        try:
            Admin(cluster.transport).create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
            _warm_up(cluster)
            classic = [_rebalances(cluster.bootstrap_servers, f"c{n}") for n in range(repetitions)]
            modern = [
                _consumer_rebalances(cluster.bootstrap_servers, f"k{n}") for n in range(repetitions)
            ]
        finally:
            cluster.stop()
    classic_join, classic_leave = median(t[0] for t in classic), median(t[1] for t in classic)
    join_ms, leave_ms = median(t[0] for t in modern), median(t[1] for t in modern)
    sticky_ms, range_ms = _assignor_times()
    print(
        f"  consumer protocol: 10 members settle in {join_ms:.1f} ms (classic {classic_join:.1f} "
        f"ms); one leaves, the rest settle in {leave_ms:.1f} ms (classic {classic_leave:.1f} ms)"
    )
    print(
        f"  uniform, 1 joining 100 over 1,000 partitions: {sticky_ms:.1f} ms; "
        f"range from nothing {range_ms:.1f} ms"
    )
    return [
        row(
            "consumer protocol: 10 members join (vs classic)",
            join_ms,
            "ms",
            classic_join,
            None,
            higher_is_better=False,
        ),
        row(
            "consumer protocol: 1 of 10 members leaves (vs classic)",
            leave_ms,
            "ms",
            classic_leave,
            None,
            higher_is_better=False,
        ),
        row(
            "uniform assignor: 1 joins 100 members, 1,000 partitions (vs range from nothing)",
            sticky_ms,
            "ms",
            range_ms,
            None,
            higher_is_better=False,
        ),
    ]
