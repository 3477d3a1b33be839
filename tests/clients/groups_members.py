"""Subscribed consumers of each library, each polling in a thread of its own (or a process of
its own, to be killed), reporting what it reads and what it is assigned."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading
import time
from typing import Any, ClassVar

import kafka
from tierlog.cluster import EmbeddedCluster
from tierlog.groups import GroupState
from tierlog.groups.classic_group import ClassicGroup
from tierlog.groups.subscriptions import assigned_partitions

from tests.waiting import wait_until

from .conftest import aiokafka, confluent_kafka

#: Heartbeats and sessions short enough that a rebalance takes well under a second.
SESSION_MS = 3000
HEARTBEAT_MS = 300


class Member:
    """A subscribed consumer of ``library`` polling ``topic`` for ``group`` until stopped.

    Every member still polling when its test ends is stopped by :func:`stop_running_members`,
    so a failed test never leaves a consumer retrying against a cluster that is gone."""

    running: ClassVar[set[Member]] = set()

    def __init__(
        self, library: str, bootstrap: str, group: str, topic: str, **settings: object
    ) -> None:
        """``settings``: more of the library's own consumer settings (librdkafka's names for
        confluent-kafka, keyword arguments for the others)."""
        self.library = library
        self.settings = settings
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.read: list[tuple[int, int, bytes]] = []
        self.assignment: frozenset[int] = frozenset()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._commit = threading.Event()
        self._committed = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"member-{library}", daemon=True)
        Member.running.add(self)
        self._thread.start()

    # --- from the test -------------------------------------------------------------------

    def commit(self, timeout: float = 20.0) -> None:
        """Commits what has been read (synchronously, in the polling thread)."""
        self._committed.clear()
        self._commit.set()
        if not self._committed.wait(timeout):
            raise AssertionError(f"{self.library} did not commit within {timeout} s")

    def records(self) -> list[tuple[int, int, bytes]]:
        with self._lock:
            return list(self.read)

    def stop(self) -> None:
        """Closes the consumer (it leaves the group) and waits for its thread."""
        self.halt()
        assert not self._thread.is_alive(), f"{self.library} did not stop"
        assert not self.errors, self.errors

    def halt(self) -> None:
        """Closes the consumer and waits for its thread, asserting nothing."""
        self._stop.set()
        self._thread.join(30)
        Member.running.discard(self)

    # --- the polling thread --------------------------------------------------------------

    def _got(self, partition: int, offset: int, value: bytes) -> None:
        with self._lock:
            self.read.append((partition, offset, value))

    def _run(self) -> None:
        try:
            if self.library == "confluent-kafka":
                self._run_confluent()
            elif self.library == "kafka-python":
                self._run_kafka_python()
            else:
                asyncio.run(self._run_aiokafka())
        except Exception as err:  # reported by stop()
            self.errors.append(f"{type(err).__name__}: {err}")

    def _run_confluent(self) -> None:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "topic.metadata.refresh.interval.ms": 1000,
                **self.settings,
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                message = consumer.poll(0.05)
                if message is not None:
                    if message.error():
                        self.errors.append(str(message.error()))
                    else:
                        self._got(message.partition(), message.offset(), message.value())
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
                if self._commit.is_set():
                    self._commit.clear()
                    if self.read:
                        consumer.commit(asynchronous=False)
                    self._committed.set()
        finally:
            consumer.close()

    def _run_kafka_python(self) -> None:
        consumer = kafka_python_subscriber(
            self.bootstrap,
            self.topic,
            group_id=self.group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            **self.settings,
        )
        try:
            while not self._stop.is_set():
                for tp, messages in consumer.poll(timeout_ms=50).items():
                    for m in messages:
                        self._got(tp.partition, m.offset, m.value)
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
                if self._commit.is_set():
                    try:
                        consumer.commit()
                    except kafka.errors.RebalanceInProgressError:
                        continue  # the next poll completes the rebalance, then it commits
                    self._commit.clear()
                    self._committed.set()
        finally:
            consumer.close()

    async def _run_aiokafka(self) -> None:
        consumer = aiokafka.AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            **self.settings,
        )
        await consumer.start()
        try:
            while not self._stop.is_set():
                batches = await consumer.getmany(timeout_ms=50)
                for tp, messages in batches.items():
                    for m in messages:
                        self._got(tp.partition, m.offset, m.value)
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
                if self._commit.is_set():
                    self._commit.clear()
                    await consumer.commit()
                    self._committed.set()
        finally:
            await consumer.stop()


_PROCESS_MEMBER = """
import sys, time, kafka
bootstrap, group, topic, session, heartbeat = sys.argv[1:6]
consumer = kafka.KafkaConsumer(
    bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
    enable_auto_commit=False, session_timeout_ms=int(session),
    heartbeat_interval_ms=int(heartbeat),
)
while not consumer.partitions_for_topic(topic):  # see kafka_python_subscriber
    time.sleep(0.05)
consumer.subscribe([topic])
last = None
while True:
    consumer.poll(timeout_ms=50)
    now = sorted(tp.partition for tp in consumer.assignment())
    if now != last:
        print(" ".join(map(str, now)) or "-", flush=True)
        last = now
"""


class ProcessMember:
    """A kafka-python consumer in a process of its own, so it can be killed with SIGKILL."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _PROCESS_MEMBER,
                bootstrap,
                group,
                topic,
                str(SESSION_MS),
                str(HEARTBEAT_MS),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.assignment: frozenset[int] = frozenset()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            words = line.split()
            self.assignment = frozenset(int(w) for w in words if w != "-")

    def kill(self) -> None:
        self.process.kill()  # SIGKILL: no LeaveGroup, the session must expire
        self.process.wait(10)
        self._reader.join(10)
        assert self.process.stdout is not None
        self.process.stdout.close()
        self.assignment = frozenset()


class GenerationLog:
    """Samples the coordinator's view of a group: for every stable generation, each member's
    partitions. Read under the shard's lock, from the broker's own state."""

    def __init__(self, cluster: EmbeddedCluster, group: str, topic: str) -> None:
        self.cluster, self.group, self.topic = cluster, group, topic
        self.generations: dict[int, dict[str, tuple[int, ...]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        for broker_id in self.cluster.controller.live_brokers():
            coordinator = self.cluster.broker(broker_id).group_coordinator
            if coordinator is None:
                continue
            for shard in coordinator.shards():
                with shard.lock:
                    group = shard.groups.get(self.group)
                    if isinstance(group, ClassicGroup) and group.state is GroupState.STABLE:
                        self.generations[group.generation_id] = {
                            m.member_id: assigned_partitions(m.assignment).get(self.topic, ())
                            for m in group.members.values()
                        }

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # a broker stopping under the sampler
                self._sample()
            time.sleep(0.005)

    def stop(self) -> dict[int, dict[str, tuple[int, ...]]]:
        self._stop.set()
        self._thread.join(5)
        return self.generations


def kafka_python_subscriber(bootstrap: str, topic: str, **settings: object) -> Any:
    """A kafka-python consumer in a classic group, subscribed once it knows ``topic``.

    A group leader whose metadata lacks the topic assigns nothing and rebalances again on its
    next refresh, and kafka-python 3.0.12 can lose that second assignment when a poll times out
    during it: the member then never reads."""
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, **settings)
    try:
        wait_until(lambda: consumer.partitions_for_topic(topic), f"kafka-python to know {topic}")
    except BaseException:
        consumer.close()
        raise
    consumer.subscribe([topic])
    return consumer


def stop_running_members() -> None:
    """Stops the members a test left polling (it failed before it could stop them)."""
    for member in list(Member.running):
        member.halt()


def split_evenly(assignments: list[frozenset[int]], partitions: int) -> bool:
    """Every partition assigned to exactly one of the members, and each member has some."""
    total: list[int] = []
    for assignment in assignments:
        total += assignment
    return sorted(total) == list(range(partitions)) and all(assignments)
