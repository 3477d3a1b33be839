"""A tiered partition changes leader, cleanly or by a crash: the new leader serves what was
tiered, continues tiering right after the highest offset its epoch lineage tiered (no gap, no
second upload), no acknowledged record is lost, and the old leader rejoins as a follower."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from tierlog.client import Producer
from tierlog.log import EpochEntry, PartitionLog
from tierlog.model import TopicPartition
from tierlog.testing import Scenario
from tierlog.testing.recording import COPY

from tests.remote.conftest import file_scenario

pytest.importorskip("tierlog_fsspec")

SEGMENT = 4096


def values(count: int, tag: str) -> list[bytes]:
    return [f"{tag}-{n:05d}-".encode() + b"x" * 100 for n in range(count)]


@pytest.fixture
def scenario(tmp_path: Path) -> Iterator[Scenario]:
    with file_scenario(tmp_path, brokers=3) as running:
        yield running


def check_remote_lineage(scenario: Scenario, topic: str, *, crashed: bool = False) -> None:
    """The finished remote segments tile the log from its start to the highest tiered offset,
    and no offset range was uploaded twice.

    ``crashed``: a leader died with an upload under way, which it never marked finished; the
    next leader uploads those offsets again, so only finished uploads are compared.
    """
    segments = sorted(scenario.remote_segments(topic, 0), key=lambda s: s.start_offset)
    assert segments
    log = scenario.log(topic, 0)
    assert segments[0].start_offset == log.log_start_offset == 0
    for before, after in itertools.pairwise(segments):
        assert after.start_offset == before.end_offset + 1, (
            f"remote segments {before.start_offset}..{before.end_offset} and "
            f"{after.start_offset}..{after.end_offset} leave a gap or overlap"
        )
    assert segments[-1].end_offset == log.highest_offset_in_remote_storage
    finished = {s.remote_log_segment_id for s in segments}
    copied = [
        (e.start_offset, e.end_offset)
        for e in scenario.events(topic, 0, COPY)
        if e.succeeded and (not crashed or e.segment_id in finished)
    ]
    assert len(copied) == len(set(copied)), f"a range was uploaded twice: {sorted(copied)}"
    ranges = sorted(copied)
    for before, after in itertools.pairwise(ranges):
        assert after[0] > before[1], f"uploads {before} and {after} overlap"


@pytest.mark.parametrize("replication_factor", [3, 2])
@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_new_leader_continues_tiering_after_the_last_tiered_offset(
    scenario: Scenario, clean: bool, replication_factor: int
) -> None:
    first, second = values(300, "a"), values(300, "b")
    scenario.create_topic(
        "t",
        replication_factor=replication_factor,
        segment_bytes=SEGMENT,
        local_retention_bytes=1,
    )
    replicas = scenario.cluster.controller.image().registration(TopicPartition("t", 0))
    assert replicas is not None
    for broker_id in replicas.replicas:
        scenario.expect_in_isr("t", 0, broker_id)
    scenario.produce("t", 0, first).expect_tiered("t", 0, segments=3).expect_tiered("t", 0)
    old = scenario.leader("t", 0)

    scenario.leader_change("t", 0, clean=clean)
    new = scenario.leader("t", 0)
    assert new != old and new in replicas.replicas
    (
        scenario.consume("t", 0, from_offset=0, expect=first)
        .expect_fetched_from_remote("t", 0)
        .produce("t", 0, second)
        .expect_tiered("t", 0)
        .consume("t", 0, from_offset=0, expect=first + second)
    )
    assert any(
        e.start_offset >= len(first) for e in scenario.events("t", 0, COPY) if e.succeeded
    ), "the new leader uploaded nothing of its own"
    check_remote_lineage(scenario, "t")

    scenario.start_broker(old).expect_caught_up("t", 0, old).expect_leader("t", 0, new)
    check_remote_lineage(scenario, "t")


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_producing_through_a_failover_loses_no_acknowledged_record(
    scenario: Scenario, clean: bool
) -> None:
    scenario.create_topic("t", replication_factor=3, segment_bytes=SEGMENT, local_retention_bytes=1)
    for broker_id in range(3):
        scenario.expect_in_isr("t", 0, broker_id)
    sent: list[tuple[bytes, Future[object]]] = []
    halfway, done = threading.Event(), threading.Event()

    def keep_producing() -> None:
        settings = {"acks": "all", "linger.ms": 0, "batch.size": 1024}
        with Producer(scenario.cluster.transport, settings) as producer:
            n = 0
            while not done.is_set() or n < 400:
                value = f"p-{n:05d}-".encode() + b"x" * 100
                sent.append((value, producer.send("t", value, partition=0)))
                n += 1
                if n == 200:
                    halfway.set()
                if n % 20 == 0:
                    sent[-1][1].result(timeout=60)

    producing = threading.Thread(target=keep_producing, name="failover-producer")
    producing.start()
    try:
        assert halfway.wait(60)
        old = scenario.leader("t", 0)
        scenario.leader_change("t", 0, clean=clean)
    finally:
        done.set()
        producing.join(120)
    assert not producing.is_alive()
    acknowledged = []
    for value, future in sent:
        future.result(timeout=60)  # acks=all with idempotence: every send succeeds in the end
        acknowledged.append(value)
    scenario.expect_tiered("t", 0)
    scenario.consume("t", 0, from_offset=0, expect=acknowledged)
    check_remote_lineage(scenario, "t", crashed=not clean)

    # The old leader truncates what the others never had, and shares the leader's lineage.
    scenario.start_broker(old).expect_caught_up("t", 0, old)
    leader, returned = scenario.log("t", 0), scenario.log("t", 0, old)

    def written(log: PartitionLog) -> list[EpochEntry]:
        return [e for e in log.leader_epoch_cache.entries() if e.start_offset < log.log_end_offset]

    assert returned.log_end_offset == leader.log_end_offset == len(acknowledged)
    assert written(returned) == written(leader)
