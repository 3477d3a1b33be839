"""Three brokers in three processes, coordinated through a real ZooKeeper: how fast a crash is
survived, what the processes cost in throughput, and how long a controller takes over.

A one-node ZooKeeper (Debian's, as a child process) and a :class:`ProcessCluster` of three
``tierlog run --broker-id N`` processes on free ports of 127.0.0.1, tiering through the fsspec
plugin as the cluster tests do, with ``zookeeper.session.timeout.ms`` = :data:`SESSION_TIMEOUT_MS`.
One ZooKeeper node rather than three: the figures depend on the session timeout, not on the
ensemble's size, and two fewer JVMs leave the two cores to the brokers.

* Failover: SIGKILL the leader of a one-partition topic (RF 3, ``min.insync.replicas=2``; never
  the controller, whose loss is the takeover figure), and time until a confluent-kafka producer
  (``acks=all``) that keeps sending has a record acknowledged by the new leader; then restart the
  killed broker and wait for it to rejoin the ISR. Baseline: the session timeout, which a crash
  must wait out. Target: within the timeout plus :data:`ELECTION_ALLOWANCE_S`. The same after
  SIGTERM (controlled shutdown), which waits for no timeout; reported only.
* Throughput: confluent-kafka produces 1 KiB records with ``acks=all`` to a 3-partition RF-3
  topic (``min.insync.replicas=2``) and reads them back, on the three processes and on a
  three-broker embedded cluster in one process (``tierlog run --brokers 3``), the baseline.
  The clients run in child processes (``benchmarks.wire_clients``).
* Controller takeover: with topics totalling :data:`TAKEOVER_PARTITIONS` partitions (RF 3),
  SIGKILL the controller's process and time (a) a new ``/controller`` in ZooKeeper, (b) a live
  leader in ZooKeeper for every partition the dead broker led, (c) every live broker's Metadata
  naming those leaders. Baseline: the session timeout. Then the same after SIGTERM of the new
  controller (a controlled handover), reported only.

``--quick`` repeats the failover three times (SIGTERM twice), produces a fifth of the records,
and takes over with 300 partitions.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import re
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from statistics import median
from typing import Any, Final, NamedTuple

from tierlog.coordination import paths
from tierlog.coordination.zookeeper_server import (
    ZooKeeperEnsemble,
    ZooKeeperNotInstalledError,
    check_installed,
)
from tierlog.testing.processes import (
    BrokerProcessError,
    ProcessCluster,
    tiered_settings,
    wait_until,
)

from .report import row
from .wire_bench import client, rate

#: Short enough that a crash is survived quickly, long enough for a busy 2-core machine (the
#: cluster tests use the same); Kafka's default is 18 s.
SESSION_TIMEOUT_MS: Final = 6000
#: What a failover may take beyond the session timeout: the controller noticing the expired
#: session, electing, and pushing LeaderAndIsr and UpdateMetadata, and the client's metadata
#: refresh and retry backoff, each well under a second on an idle machine.
ELECTION_ALLOWANCE_S: Final = 3.0
#: A controlled shutdown moves leaderships before the broker goes: a producer should wait
#: well under a session timeout (this share of it) for its next acknowledgement.
CONTROLLED_TARGET: Final = 0.25
#: The issue's figure for the controller takeover; ``--quick`` uses the smaller one, since the
#: brokers need minutes to create and settle a thousand partitions on a busy 2-core machine.
TAKEOVER_PARTITIONS: Final = 1000
QUICK_TAKEOVER_PARTITIONS: Final = 300
#: How long the takeover waits for the cluster to settle on its partitions before measuring
#: anyway (a busy machine's followers may keep timing out and the ISRs churning).
SETTLE_S: Final = 90.0
TAKEOVER_TOPICS: Final = 10
RECORD_SIZE: Final = 1024
BROKERS: Final = 3
_ROOT: Final = Path(__file__).resolve().parent.parent
_SERVING: Final = re.compile(r"^tierlog: \d+ broker\(s\) serving", re.M)
_BOOTSTRAP: Final = re.compile(r"^tierlog: bootstrap servers (\S+)$", re.M)


def cluster_settings(bucket: Path) -> dict[str, object]:
    """The kit's tiered settings, with Kafka's default ``replica.lag.time.max.ms`` (30 s), not
    the tests' 4 s: with a thousand partitions on two busy cores, followers take longer than
    that to start fetching and the ISRs would churn through the measurements."""
    return tiered_settings(bucket)


def missing_requirement() -> str | None:
    """Why this benchmark cannot run here, or None."""
    try:
        check_installed()
    except ZooKeeperNotInstalledError as err:
        return str(err)
    if importlib.util.find_spec("confluent_kafka") is None:
        return "confluent-kafka is not installed (pip install -c constraints.txt confluent-kafka)"
    return None


# --- the clients ---------------------------------------------------------------------------------


def admin_client(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create_topics(bootstrap: str, topics: list[Any], timeout_s: float = 120.0) -> None:
    """Creates ``NewTopic``s through a real client and waits for every answer."""
    admin = admin_client(bootstrap)  # held: dropping it cancels the pending answers
    futures = admin.create_topics(topics, request_timeout=timeout_s)
    for future in futures.values():
        future.result(timeout=timeout_s)


class TimedProducer:
    """A confluent-kafka producer (``acks=all``) that records when each record is acknowledged,
    so the first acknowledgement after a failure can be read off."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        self.acknowledged: list[float] = []
        self.errors: list[str] = []
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 0,
                "message.timeout.ms": 120_000,
                "retry.backoff.ms": 50,
                "retry.backoff.max.ms": 250,
                "topic.metadata.refresh.fast.interval.ms": 50,
                "on_delivery": self._delivered,
            }
        )

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is None:
            self.acknowledged.append(time.monotonic())
        else:
            self.errors.append(str(err))

    def send_and_wait(self, topic: str, partition: int, timeout_s: float = 60.0) -> None:
        self._producer.produce(topic, b"x" * 100, partition=partition)
        if self._producer.flush(timeout_s):
            raise RuntimeError(f"no acknowledgement from {topic}-{partition} in {timeout_s}s")

    def keep_sending(
        self, topic: str, partition: int, done: Callable[[], bool], timeout_s: float
    ) -> None:
        """Sends one record every 20 ms, as a steady producer would, until ``done()`` (asked
        every 100 ms); then waits for what is in flight."""
        deadline = time.monotonic() + timeout_s
        for tick in itertools.count():
            if tick % 5 == 0 and done():
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}-{partition}: not done after {timeout_s:.0f}s")
            self._producer.produce(topic, b"x" * 100, partition=partition)
            self._producer.poll(0.02)
        self._producer.flush(30)

    def outage(self, since: float) -> tuple[float, float]:
        """Seconds from ``since`` to the first acknowledgement, and the longest time without one
        from ``since`` on (for a controlled shutdown the old leader may acknowledge first)."""
        after = [since, *(t for t in self.acknowledged if t >= since)]
        if len(after) < 2:
            raise RuntimeError("no acknowledgement after the stop")
        return after[1] - since, max(b - a for a, b in itertools.pairwise(after))

    def close(self) -> None:
        self._producer.flush(30)


def metadata_leaders(bootstrap: str, timeout_s: float = 10.0) -> dict[tuple[str, int], int]:
    """What one broker's Metadata (v1, every topic) names as each partition's leader: asked of
    that broker alone, which a Kafka client library would not promise."""
    from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse

    host, port = bootstrap.rsplit(":", 1)
    request = MetadataRequest[1](topics=None)
    request.with_header(correlation_id=1, client_id="cluster-bench")
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        reader = sock.makefile("rb")
        size = int.from_bytes(reader.read(4), "big", signed=True)
        frame = reader.read(size)
    response = MetadataResponse[1].decode(frame, version=1, header=True)
    return {
        (topic.name, partition.partition_index): partition.leader_id
        for topic in response.topics
        for partition in topic.partitions
    }


def throughput(bootstrap: str, topic: str, count: int) -> tuple[float, float]:
    """Records/s producing ``count`` 1 KiB records to a new 3-partition RF-3 topic, and
    reading them all back."""
    from confluent_kafka.admin import NewTopic

    create_topics(bootstrap, [NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])
    produced = rate(
        client(
            "confluent_produce",
            bootstrap=bootstrap,
            topic=topic,
            count=count,
            size=RECORD_SIZE,
            idempotent=True,
        )
    )
    consumed = rate(
        client("confluent_consume", bootstrap=bootstrap, topic=topic, partitions=3, count=count)
    )
    return produced, consumed


# --- the one-process baseline --------------------------------------------------------------------


@contextlib.contextmanager
def embedded_cluster(directory: Path, settings: dict[str, object]) -> Iterator[str]:
    """``tierlog run --brokers 3`` in a child process with a listener; its bootstrap servers.
    The process is killed on the way out whatever happens."""
    directory.mkdir(parents=True)
    config = directory / "server.properties"
    lines = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(directory / "logs")}
    lines.update({key: _property(value) for key, value in settings.items()})
    config.write_text("".join(f"{key}={value}\n" for key, value in lines.items()))
    output = directory / "tierlog.out"
    with output.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tierlog", "run", "--config", str(config), "--brokers", "3"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:

        def serving() -> str | None:
            text = output.read_text(errors="replace")
            if process.poll() is not None:
                raise BrokerProcessError(f"tierlog run --brokers 3 exited:\n{text[-3000:]}")
            found = _BOOTSTRAP.search(text)
            return found.group(1) if found and _SERVING.search(text) else None

        bootstrap = wait_until(serving, 90, "the embedded cluster to serve")
        assert bootstrap is not None
        yield bootstrap
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class Failover(NamedTuple):
    """One failover as a producer saw it, in seconds from the stop."""

    first_acknowledged: float
    longest_without: float
    stopped_controller: bool


class Takeover(NamedTuple):
    """A controller's end as seen from outside, in seconds from the signal (None: not seen)."""

    controller: int
    partitions_it_led: int
    new_controller: float | None
    new_leaders: float | None
    in_metadata: float | None

    @property
    def complete(self) -> bool:
        return None not in (self.new_controller, self.new_leaders, self.in_metadata)

    def __str__(self) -> str:
        def at(value: float | None) -> str:
            return "not seen" if value is None else f"{value:.2f} s"

        return (
            f"broker {self.controller} led {self.partitions_it_led} partitions; new /controller "
            f"{at(self.new_controller)}, its partitions' new leaders in ZooKeeper "
            f"{at(self.new_leaders)}, in every live broker's Metadata {at(self.in_metadata)}"
        )


# --- the benchmark -------------------------------------------------------------------------------


class ClusterBench:
    """The three broker processes and the figures measured on them."""

    def __init__(self, cluster: ProcessCluster, quick: bool) -> None:
        self.cluster = cluster
        self.quick = quick
        self.session_s = cluster.session_timeout_ms / 1000
        self.rows: list[dict[str, Any]] = []
        self._rounds = 0

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers(
            exclude=tuple(b.broker_id for b in self.cluster if not b.running)
        )

    def controller(self) -> int:
        found: list[int] = []

        def elected() -> bool:
            holder = self.cluster.controller_id()
            found[:] = [] if holder is None else [holder]
            return bool(found)

        wait_until(elected, 60, "a controller")
        return found[0]

    def wait_in_sync(self, topic: str, partitions: int, timeout_s: float = 120.0) -> None:
        """Until every partition of ``topic`` has a leader and all its replicas in the ISR."""

        def full() -> bool:
            return all(
                len(self.cluster.isr(topic, p)) == BROKERS and self.cluster.leader(topic, p) >= 0
                for p in range(partitions)
            )

        wait_until(full, timeout_s, f"every replica of {topic} in its ISR", interval_s=0.2)

    # --- failover -------------------------------------------------------------------------------

    def failover_topic(self) -> tuple[str, int]:
        """A fresh one-partition topic whose preferred leader is a broker other than the
        controller (the brokers take turns), in sync; its name and leader."""
        from confluent_kafka.admin import NewTopic

        controller = self.controller()
        others = [b for b in sorted(self.cluster.brokers) if b != controller]
        victim = others[self._rounds % len(others)]
        self._rounds += 1
        topic = f"failover-{self._rounds}"
        replicas = [victim, *(b for b in sorted(self.cluster.brokers) if b != victim)]
        create_topics(
            self.bootstrap,
            [
                NewTopic(
                    topic,
                    1,
                    -1,  # the count is the assignment's: librdkafka wants -1 here, 1 above
                    replica_assignment=[replicas],
                    config={"min.insync.replicas": "2"},
                )
            ],
        )
        self.wait_in_sync(topic, 1)
        leader = wait_until(
            lambda: self.cluster.leader(topic, 0) == victim, 30, f"{victim} to lead {topic}"
        )
        assert leader
        return topic, victim

    def failover_round(self, stop: Callable[[int], None]) -> Failover:
        """Stop the leader with ``stop`` under a steady ``acks=all`` producer; then bring it
        back and wait until it is in the ISR again."""
        topic, leader = self.failover_topic()
        broker = self.cluster.broker(leader)
        producer = TimedProducer(self.cluster.bootstrap_servers())
        moved_at: list[float] = []

        def done() -> bool:
            """A new leader in ZooKeeper, and an acknowledgement since."""
            if not moved_at and self.cluster.leader(topic, 0) not in (leader, -1):
                moved_at.append(time.monotonic())
            return bool(moved_at) and producer.acknowledged[-1] > moved_at[0]

        try:
            producer.send_and_wait(topic, 0)
            was_controller = self.cluster.controller_id() == leader
            since = time.monotonic()
            stop(leader)
            producer.keep_sending(topic, 0, done, 4 * self.session_s + 60)
        finally:
            producer.close()
        first, longest = producer.outage(since)
        broker.wait_stopped(60)
        self.cluster.restart(leader)
        self.wait_in_sync(topic, 1)
        return Failover(first, longest, was_controller)

    def failover_rows(self) -> None:
        kills = 3 if self.quick else 7
        terms = 2 if self.quick else 4
        killed = [self.failover_round(self._kill) for _ in range(kills)]
        termed = [self.failover_round(self._terminate) for _ in range(terms)]
        if any(f.stopped_controller for f in killed + termed):
            print("  note: a stopped leader had become the controller meanwhile")
        crash_target = self.session_s + ELECTION_ALLOWANCE_S
        print(
            f"  leader SIGKILL ({kills} times), first acks=all produce after "
            f"{_seconds(f.first_acknowledged for f in killed)} s; session timeout "
            f"{self.session_s:.1f} s, target <= {crash_target:.1f} s"
        )
        print(
            f"  leader SIGTERM ({terms} times), first acks=all produce after "
            f"{_seconds(f.first_acknowledged for f in termed)} s (the old leader's, until it "
            f"hands over); longest wait for one {_seconds(f.longest_without for f in termed)} s; "
            f"target <= {CONTROLLED_TARGET * self.session_s:.1f} s"
        )
        first_after_kill = [f.first_acknowledged for f in killed]
        longest_after_term = [f.longest_without for f in termed]
        for label, figures, target in (
            ("leader SIGKILL -> first acks=all produce", first_after_kill, crash_target),
            (
                "leader SIGTERM -> longest wait for an acks=all produce",
                longest_after_term,
                CONTROLLED_TARGET * self.session_s,
            ),
        ):
            for how, value in (("median", median(figures)), ("max", max(figures))):
                self.rows.append(
                    row(
                        f"failover, {label}, {how}",
                        value,
                        "s",
                        self.session_s,
                        None if target is None else target / self.session_s,
                        higher_is_better=False,
                    )
                )

    def _kill(self, broker_id: int) -> None:
        self.cluster.broker(broker_id).kill()

    def _terminate(self, broker_id: int) -> None:
        self.cluster.broker(broker_id).send_terminate()

    # --- throughput -----------------------------------------------------------------------------

    def throughput_rows(self, embedded: tuple[float, float], count: int) -> None:
        produced, consumed = throughput(self.bootstrap, "throughput", count)
        base_produced, base_consumed = embedded
        mb = RECORD_SIZE / 1e6
        label = f"{count:,} x 1 KiB, RF 3, acks=all"
        for verb, ours, base in (
            ("produce", produced, base_produced),
            ("consume", consumed, base_consumed),
        ):
            print(
                f"  {verb} {label}: 3 processes {ours:,.0f} rec/s ({ours * mb:.1f} MB/s), "
                f"one process {base:,.0f} rec/s ({base * mb:.1f} MB/s)"
            )
            self.rows += [
                row(f"3 processes {verb} {label}", ours, "rec/s", base, None),
                row(f"3 processes {verb} {label}", ours * mb, "MB/s", base * mb, None),
            ]

    # --- controller takeover --------------------------------------------------------------------

    def takeover_partitions(self, partitions: int) -> list[tuple[str, int]]:
        """Creates :data:`TAKEOVER_TOPICS` topics of ``partitions`` in all (RF 3) and waits
        until the cluster has settled on them."""
        from confluent_kafka.admin import NewTopic

        per_topic = partitions // TAKEOVER_TOPICS
        names = [f"takeover-{n}" for n in range(TAKEOVER_TOPICS)]
        start = time.monotonic()
        create_topics(self.bootstrap, [NewTopic(name, per_topic, 3) for name in names], 300)
        created = time.monotonic() - start
        every = [(name, p) for name in names for p in range(per_topic)]
        unsettled = self.wait_settled(every, SETTLE_S)
        print(
            f"  {partitions:,} partitions (RF 3): created in {created:.1f} s; "
            + (
                f"still unsettled after {SETTLE_S:.0f} s, measured as it is: {unsettled}"
                if unsettled
                else f"every replica hosted, in its ISR and in every broker's Metadata after "
                f"{time.monotonic() - start:.1f} s"
            )
        )
        return every

    def wait_settled(self, partitions: list[tuple[str, int]], timeout_s: float) -> str | None:
        """Waits until every broker hosts a replica of each of ``partitions`` (all have RF 3),
        each has all its replicas in its ISR, and every broker's Metadata names ZooKeeper's
        leaders: a controller killed earlier would leave its successor work that is not the
        takeover's. Returns what is still unsettled after ``timeout_s`` (None: settled); the
        measurement then goes on, with a note, rather than report nothing."""
        deadline = time.monotonic() + timeout_s
        while True:
            states = self.partition_states(partitions)
            shrunk = sum(len(state["isr"]) != BROKERS for state in states.values())
            behind = []
            for broker in self.cluster:
                hosted = broker.metric("ReplicaManager", "PartitionCount")
                leaders = metadata_leaders(broker.bootstrap)
                stale = sum(leaders.get(tp) != state["leader"] for tp, state in states.items())
                if hosted < len(partitions) or stale:
                    behind.append(f"broker {broker.broker_id} hosts {hosted:.0f}, {stale} stale")
            if not shrunk and not behind:
                return None
            if time.monotonic() > deadline:
                return f"{shrunk} partitions with a shrunk ISR; {'; '.join(behind) or '-'}"
            time.sleep(1.0)

    def partition_states(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], Any]:
        """Every partition's state znode, read with pipelined requests (one round trip's wait
        rather than one per partition)."""
        zk = self.cluster.zk
        pending = {
            tp: zk.get_async(f"{paths.BROKER_TOPICS}/{tp[0]}/partitions/{tp[1]}/state")
            for tp in partitions
        }
        return {tp: json.loads(result.get(timeout=30)[0]) for tp, result in pending.items()}

    def takeover(self, stop: Callable[[int], None], partitions: list[tuple[str, int]]) -> Takeover:
        """Stops the controller with ``stop`` and watches the cluster from outside until the
        partitions it led have new leaders everywhere."""
        old = self.controller()
        moving = {tp for tp, s in self.partition_states(partitions).items() if s["leader"] == old}
        live = [b for b in self.cluster if b.broker_id != old]
        since = time.monotonic()
        stop(old)
        deadline = since + 4 * self.session_s + 60
        controller = metadata = None
        leaders = None if moving else 0.0
        remaining = set(moving)
        stale: dict[int, list[tuple[str, int]]] = {}
        # The three are watched together: brokers may learn the new leaders (from the old
        # controller, in a controlled shutdown) before a new controller is elected.
        while time.monotonic() < deadline and None in (controller, leaders, metadata):
            if controller is None and self.cluster.controller_id() not in (None, old):
                controller = time.monotonic() - since
            if remaining:
                states = self.partition_states(sorted(remaining))
                remaining = {tp for tp, s in states.items() if s["leader"] in (old, -1)}
                if not remaining:
                    leaders = time.monotonic() - since
            if metadata is None:
                for broker in live:
                    named = metadata_leaders(broker.bootstrap)
                    stale[broker.broker_id] = sorted(
                        tp for tp in moving if named.get(tp, -1) in (old, -1)
                    )
                if not any(stale.values()):
                    metadata = time.monotonic() - since
            time.sleep(0.05)
        self.cluster.broker(old).wait_stopped(max(1.0, deadline - time.monotonic()))
        result = Takeover(old, len(moving), controller, leaders, metadata)
        if not result.complete:
            left = {b: (len(tps), tps[:3]) for b, tps in stale.items() if tps}
            print(
                f"  takeover unfinished after {deadline - since:.0f} s: {result}; "
                f"{len(remaining)} partitions without a live leader in ZooKeeper; brokers "
                f"still naming broker {old} in Metadata (count, first few): {left}"
            )
        return result

    def takeover_rows(self) -> None:
        count = QUICK_TAKEOVER_PARTITIONS if self.quick else TAKEOVER_PARTITIONS
        if count != TAKEOVER_PARTITIONS:
            print(f"  note: --quick takes the controller over with {count} partitions, not 1,000")
        partitions = self.takeover_partitions(count)
        killed = self.takeover(self._kill, partitions)
        print(f"  controller SIGKILL: {killed}; session timeout {self.session_s:.1f} s")
        start = time.monotonic()
        self.cluster.restart(killed.controller)
        unsettled = self.wait_settled(partitions, SETTLE_S)
        rejoined = time.monotonic() - start
        print(
            "  the killed controller restarted; "
            + (
                f"still unsettled after {SETTLE_S:.0f} s, measured as it is: {unsettled}"
                if unsettled
                else f"every replica back in its ISR after {rejoined:.1f} s"
            )
        )
        if not unsettled:
            self.rows.append(
                row(
                    f"restart of a broker hosting {len(partitions):,} partitions -> every "
                    "replica back in its ISR",
                    rejoined,
                    "s",
                    None,
                    None,
                    higher_is_better=False,
                )
            )
        handed = self.takeover(self._terminate, partitions)
        print(f"  controller SIGTERM: {handed}")
        label = f"controller takeover, {len(partitions):,} partitions"
        crash_target = (self.session_s + ELECTION_ALLOWANCE_S) / self.session_s
        for how, takeover, target in (
            ("SIGKILL", killed, crash_target),
            ("SIGTERM", handed, None),
        ):
            for what, value in (
                ("new /controller", takeover.new_controller),
                ("new leaders in ZooKeeper", takeover.new_leaders),
                ("new leaders in every broker's Metadata", takeover.in_metadata),
            ):
                if value is None:
                    print(f"  no figure for {how} -> {what}: not seen before the deadline")
                    continue
                self.rows.append(
                    row(
                        f"{label}, {how} -> {what}",
                        value,
                        "s",
                        self.session_s,
                        target,
                        higher_is_better=False,
                    )
                )


def run(quick: bool) -> list[dict[str, Any]]:
    reason = missing_requirement()
    if reason:
        print(f"  skipped: {reason}")
        return []
    count = 40_000 if quick else 200_000
    with tempfile.TemporaryDirectory(prefix="tierlog-cluster-bench-") as tmp:
        root = Path(tmp)
        settings = cluster_settings(root / "bucket")
        (root / "bucket").mkdir()
        with embedded_cluster(root / "embedded", settings) as bootstrap:
            start = time.monotonic()
            embedded = throughput(bootstrap, "throughput", count)
            print(f"  one process measured in {time.monotonic() - start:.1f} s")
        with (
            ZooKeeperEnsemble(root / "zookeeper", 1) as zookeeper,
            ProcessCluster(
                root / "brokers",
                zookeeper.connect_string,
                BROKERS,
                settings=settings,
                session_timeout_ms=SESSION_TIMEOUT_MS,
            ) as cluster,
        ):
            bench = ClusterBench(cluster, quick)
            for section in (
                lambda: bench.throughput_rows(embedded, count),
                bench.failover_rows,
                bench.takeover_rows,
            ):
                try:
                    section()
                except Exception:  # one broken section must not hide the others' figures
                    print(f"  failed:\n{traceback.format_exc()}\n{cluster.outputs()}")
    return bench.rows


def _seconds(figures: Iterable[float]) -> str:
    return ", ".join(f"{s:.2f}" for s in figures)


def _property(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
