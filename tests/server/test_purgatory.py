"""Fetches that wait for min_bytes, and the delayed-operation purgatory under them."""

from __future__ import annotations

import threading
from pathlib import Path

from tierlog.cluster import EmbeddedCluster
from tierlog.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from tierlog.server import protocol as p
from tierlog.server.purgatory import DelayedOperation, DelayedOperationPurgatory

from .conftest import Client, batch, values

#: Longer than any test runs: a fetch that returns completed because of an event, not time.
FOREVER_MS = 600_000


def park_fetch(client: Client, topic: str, offset: int) -> tuple[threading.Thread, list[object]]:
    """Starts a fetch waiting for data at ``offset``; returns once it waits in the purgatory."""
    leader = client.leader(topic)
    purgatory = client.cluster.broker(leader).fetch_purgatory
    assert purgatory is not None
    answers: list[object] = []
    request = p.FetchRequest(
        [p.FetchTopic(topic, [p.FetchPartition(0, offset, 1 << 20)])],
        max_wait_ms=FOREVER_MS,
        min_bytes=1,
    )
    thread = threading.Thread(
        target=lambda: answers.append(client.transport.send(leader, request)), daemon=True
    )
    thread.start()
    while purgatory.watched() == 0 and thread.is_alive():
        threading.Event().wait(0.005)
    return thread, answers


def test_fetch_waits_for_min_bytes_and_completes_on_append(tmp_path: Path) -> None:
    config = {"request.timeout.ms": FOREVER_MS}
    with EmbeddedCluster(1, tmp_path, config) as cluster:
        client = Client(cluster)
        client.create("slow")
        client.produce("slow", 0, batch(1, tag="old"))
        thread, answers = park_fetch(client, "slow", offset=1)

        client.produce("slow", 0, batch(1, tag="new"))
        thread.join()

        purgatory = cluster.broker(0).fetch_purgatory
        assert purgatory is not None
        assert purgatory.expired == 0
    response = answers[0]
    assert isinstance(response, p.FetchResponse)
    data = response.responses[0].partitions[0]
    assert (data.error_code, values(data.records)) == (p.NONE, [b"new-0"])


def test_fetch_returns_what_there_is_when_max_wait_expires(client: Client) -> None:
    client.create("quiet")
    client.produce("quiet", 0, batch(1, tag="only"))

    data = client.fetch("quiet", max_wait_ms=20, min_bytes=1 << 20)

    purgatory = client.cluster.broker(client.leader("quiet")).fetch_purgatory
    assert purgatory is not None
    assert purgatory.expired == 1
    assert (data.error_code, values(data.records)) == (p.NONE, [b"only-0"])


def test_waiting_fetch_is_answered_when_its_broker_shuts_down(tmp_path: Path) -> None:
    config = {"request.timeout.ms": FOREVER_MS}
    with EmbeddedCluster(2, tmp_path, config) as cluster:
        client = Client(cluster)
        request = p.CreateTopicsRequest(
            [p.CreatableTopic("moving", assignments=[p.CreatableReplicaAssignment(0, [1, 0])])]
        )
        client.transport.send(0, request)
        thread, answers = park_fetch(client, "moving", offset=0)

        cluster.stop_broker(1)
        thread.join()

    response = answers[0]
    assert isinstance(response, p.FetchResponse)
    assert response.responses[0].partitions[0].error_code == NotLeaderOrFollowerError.code


class Flag(DelayedOperation):
    def __init__(self, delay_ms: int, ready: list[bool]) -> None:
        super().__init__(delay_ms)
        self.ready = ready
        self.completions = 0
        self.expirations = 0

    def try_complete(self) -> bool:
        return self.ready[0] and self.force_complete()

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expirations += 1


def test_purgatory_completes_only_on_the_watched_key() -> None:
    purgatory: DelayedOperationPurgatory[Flag] = DelayedOperationPurgatory("test")
    try:
        ready = [False]
        operation = Flag(FOREVER_MS, ready)
        assert not purgatory.try_complete_else_watch(operation, ["a", "b"])
        ready[0] = True

        assert purgatory.check_and_complete("other") == 0
        assert not operation.is_completed
        assert purgatory.check_and_complete("b") == 1
        assert purgatory.check_and_complete("a") == 0
        assert (operation.completions, operation.expirations) == (1, 0)
        assert purgatory.watched() == 0
    finally:
        purgatory.shutdown()


def test_purgatory_expires_and_shutdown_completes_the_rest() -> None:
    purgatory: DelayedOperationPurgatory[Flag] = DelayedOperationPurgatory("test")
    short = Flag(1, [False])
    long = Flag(FOREVER_MS, [False])
    purgatory.try_complete_else_watch(short, ["k"])
    purgatory.try_complete_else_watch(long, ["k"])
    short.wait()

    purgatory.shutdown()

    assert (short.completions, short.expirations) == (1, 1)
    assert (long.completions, long.expirations) == (1, 1)
    assert purgatory.expired == 1


def test_waiting_fetch_is_answered_when_its_topic_is_deleted(tmp_path: Path) -> None:
    config = {"request.timeout.ms": FOREVER_MS}
    with EmbeddedCluster(1, tmp_path, config) as cluster:
        client = Client(cluster)
        client.create("vanishing")
        thread, answers = park_fetch(client, "vanishing", offset=0)

        client.transport.send(0, p.DeleteTopicsRequest(["vanishing"]))
        thread.join()

    response = answers[0]
    assert isinstance(response, p.FetchResponse)
    assert response.responses[0].partitions[0].error_code == UnknownTopicOrPartitionError.code


def test_a_delay_longer_than_the_platform_can_wait_does_not_stop_expiration() -> None:
    """A produce may ask to wait 2**63-1 ms: the reaper waits its longest and keeps expiring
    shorter operations."""
    purgatory: DelayedOperationPurgatory[Flag] = DelayedOperationPurgatory("test")
    try:
        endless = Flag((1 << 63) - 1, [False])
        purgatory.try_complete_else_watch(endless, ["k"])
        short = Flag(1, [False])
        purgatory.try_complete_else_watch(short, ["k"])

        assert short.wait(timeout=30)
        assert (short.expirations, endless.is_completed) == (1, False)
    finally:
        purgatory.shutdown()
