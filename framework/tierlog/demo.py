"""The end-to-end demo behind ``tierlog demo``, on embedded defaults.

An embedded one-broker cluster runs on local directories with tiering switched on (the fsspec
storage plugin on a local directory, the built-in metadata manager) and listens for Kafka clients
on a free port of 127.0.0.1. Everything a user would do goes through that listener with a real
Kafka client library, kafka-python: an admin client creates a three-partition tiered topic and a
producer writes a keyed workload to it. The broker's remote log manager tiers every rolled
segment on its own (COPY_SEGMENT_STARTED, upload, COPY_SEGMENT_FINISHED) and local retention then
deletes the local copies; the demo waits for both, looking into the broker. A consumer then reads
everything back from the earliest offset, from the remote tier first and the local one after,
and every record is checked byte for byte against what was produced.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import kafka
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KafkaNewTopic

from .cluster import EmbeddedCluster
from .metrics import MetricName
from .model import RemoteLogSegmentState, TopicIdPartition
from .server.broker import Broker
from .wire import APIS

TOPIC = "orders"
PARTITIONS = 3
INIT_PRODUCER_ID = 22
Progress = Callable[[str, int, int], None]


def idempotence_served() -> bool:
    """kafka-python's idempotent producer (its default) needs InitProducerId; the demo turns it
    on as soon as the listener serves that API."""
    return INIT_PRODUCER_ID in APIS


@attrs.define
class DemoReport:
    """What the demo did and measured, for the summary table."""

    records: int = 0
    consumed: int = 0
    produce_seconds: float = 0.0
    consume_seconds: float = 0.0
    local_segments: int = 0
    local_bytes: int = 0
    tiered_segments: int = 0
    tiered_bytes: int = 0
    remote_objects: int = 0
    remote_object_bytes: int = 0
    remote_records_verified: int = 0
    remote_fetches: int = 0
    remote_fetch_p50_ms: float = 0.0
    remote_fetch_p99_ms: float = 0.0
    tiering_seconds: float = 0.0
    storage_plugin: str = ""
    metadata_plugin: str = ""
    remote_url: str = ""
    bootstrap_servers: str = ""
    client: str = ""
    wire_requests: dict[str, int] = attrs.field(factory=dict)
    notes: list[str] = attrs.field(factory=list)


def demo_settings(data_dir: Path) -> dict[str, object]:
    """Embedded defaults: tiering on, fsspec storage under ``<data_dir>/remote``, a listener on
    a free port of the loopback address."""
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.name": "fsspec",
        "rsm.config.url": (data_dir / "remote").resolve().as_uri(),
        "rsm.config.chunk.size": str(256 * 1024),
        "rsm.config.compression": "zstd",
        "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "200",
    }


def workload(records: int, seed: int = 7) -> list[tuple[bytes, bytes]]:
    """Keyed orders: 50 customers, values of ~200 bytes that compress like real JSON."""
    rng = random.Random(seed)
    orders = []
    for n in range(records):
        customer = f"customer-{rng.randint(1, 50):02d}"
        value = (
            f'{{"order": {n}, "customer": "{customer}", "items": {rng.randint(1, 9)}, '
            f'"amount": {rng.randint(100, 99_999) / 100}, "note": "{rng.getrandbits(256):064x}"}}'
        )
        orders.append((customer.encode(), value.encode()))
    return orders


def create_topic(bootstrap: str, segment_bytes: int) -> None:
    """The tiered topic, created over the wire (CreateTopics) as any Kafka admin tool would."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="tierlog-demo")
    try:
        configs = {
            "segment.bytes": str(segment_bytes),
            "remote.storage.enable": "true",
            "local.retention.bytes": "1",
        }
        admin.create_topics([KafkaNewTopic(TOPIC, PARTITIONS, 1, topic_configs=configs)])
    finally:
        admin.close()


def produce(bootstrap: str, orders: list[tuple[bytes, bytes]], step: Progress) -> None:
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id="tierlog-demo",
        compression_type="zstd",
        batch_size=64 * 1024,  # fewer, larger requests: the client's send loop is the bottleneck
        linger_ms=10,
        acks="all",
        enable_idempotence=idempotence_served(),
    )
    try:
        futures = []
        for n, (key, value) in enumerate(orders, 1):
            futures.append(producer.send(TOPIC, value, key=key))
            if n % 1000 == 0 or n == len(orders):
                step("producing", n, len(orders))
        producer.flush()
        for future in futures:
            future.get(timeout=60)  # raises what the broker answered for a failed batch
    finally:
        producer.close()


def consume(bootstrap: str, expected: int, step: Progress) -> dict[int, list[Any]]:
    """Every record of every partition, from the earliest offset (no group: ``assign``)."""
    by_partition: dict[int, list[Any]] = {n: [] for n in range(PARTITIONS)}
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id="tierlog-demo",
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=5000,
    )
    try:
        consumer.assign([kafka.TopicPartition(TOPIC, n) for n in range(PARTITIONS)])
        got, idle = 0, 0
        while got < expected and idle < 50:
            batches = consumer.poll(timeout_ms=200)
            idle = 0 if batches else idle + 1
            for partition, records in batches.items():
                by_partition[partition.partition].extend(records)
                got += len(records)
            step("consuming", got, expected)
    finally:
        consumer.close()
    return by_partition


def check_consumed(orders: list[tuple[bytes, bytes]], by_partition: dict[int, list[Any]]) -> int:
    """Each partition holds its keys' orders in send order, with nothing lost or added."""
    seen = sorted((r.key, r.value) for records in by_partition.values() for r in records)
    if seen != sorted(orders):
        raise RuntimeError("the records consumed differ from the records produced")
    for records in by_partition.values():
        offsets = [r.offset for r in records]
        if offsets and offsets != list(range(offsets[0], offsets[0] + len(offsets))):
            raise RuntimeError("a partition's offsets have gaps or repeats")
    return len(seen)


def _tiered_partitions(broker: Broker) -> list[tuple[TopicIdPartition, Any]]:
    found = []
    for tp in broker.hosted_partitions():
        replica = broker.partition(tp)
        if replica is not None and replica.topic_id is not None and tp.topic == TOPIC:
            found.append((TopicIdPartition(replica.topic_id, tp), replica.log))
    return found


def wait_for_tiering(broker: Broker, step: Progress, timeout_s: float = 300.0) -> None:
    """Waits until every rolled segment is tiered and its local copy deleted."""
    partitions = _tiered_partitions(broker)
    deadline = time.monotonic() + timeout_s
    most = 0
    while True:
        pending = sum(len(plog.segments()) - 1 for _, plog in partitions)
        most = max(most, pending)
        step("tiering and deleting local copies", most - pending, most)
        if pending == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{pending} rolled segments are still local after {timeout_s}s")
        time.sleep(0.1)


def describe_tiers(broker: Broker, report: DemoReport) -> None:
    host = broker.plugin_host
    if host is None:
        raise RuntimeError(f"broker {broker.broker_id} is not running")
    report.storage_plugin = host.chosen["RemoteStorageManager"]
    report.metadata_plugin = host.chosen["RemoteLogMetadataManager"]
    report.local_segments = report.local_bytes = 0
    report.tiered_segments = report.tiered_bytes = 0
    for partition, plog in _tiered_partitions(broker):
        report.local_segments += plog.segment_count
        report.local_bytes += plog.size
        for segment in host.metadata.list_remote_log_segments(partition):
            if segment.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
                report.tiered_segments += 1
                report.tiered_bytes += segment.segment_size_in_bytes


def remote_fetch_figures(broker: Broker, report: DemoReport) -> None:
    host = broker.plugin_host
    assert host is not None
    for n in range(PARTITIONS):
        tags = {"topic": TOPIC, "partition": str(n)}
        meter = host.metrics.get(
            MetricName("BrokerTopicMetrics", "RemoteFetchRequestsPerSec", tags)
        )
        report.remote_fetches += int(meter.snapshot()["count"]) if meter is not None else 0  # type: ignore[index]
    timer = host.metrics.get(MetricName("RemoteLogManager", "RemoteLogReaderFetchRateAndTimeMs"))
    if timer is not None:
        snapshot = timer.snapshot()
        assert isinstance(snapshot, dict)
        report.remote_fetch_p50_ms = float(snapshot.get("p50", 0.0))
        report.remote_fetch_p99_ms = float(snapshot.get("p99", 0.0))


def wire_request_counts(cluster: EmbeddedCluster, report: DemoReport) -> None:
    """Requests the listener answered, per API (Kafka's ``RequestMetrics`` meters)."""
    counts: dict[str, int] = {}
    for name, value in cluster.metrics(
        cluster.broker_ids[0], "RequestMetrics", "RequestsPerSec"
    ).items():
        request = dict(name.tags)["request"]
        assert isinstance(value, dict)
        counts[request] = counts.get(request, 0) + int(value["count"])
    report.wire_requests = counts


def run_demo(
    data_dir: Path,
    *,
    records: int = 30_000,
    segment_bytes: int = 256 * 1024,
    progress: Progress | None = None,
) -> DemoReport:
    """Create, produce, tier, consume back from both tiers and verify, all through the Kafka
    listener of an embedded cluster."""
    step = progress or (lambda _what, _done, _total: None)
    report = DemoReport(records=records)
    settings = demo_settings(data_dir)
    report.remote_url = str(settings["rsm.config.url"])
    orders = workload(records)
    report.client = f"kafka-python {kafka.__version__}" + (
        " (idempotent)" if idempotence_served() else ""
    )
    cluster = EmbeddedCluster(size=1, data_dir=data_dir / "cluster", config=settings, listen=True)
    with cluster:
        broker = cluster.broker(cluster.broker_ids[0])
        bootstrap = report.bootstrap_servers = cluster.bootstrap_servers
        create_topic(bootstrap, segment_bytes)
        started = time.perf_counter()
        produce(bootstrap, orders, step)
        report.produce_seconds = time.perf_counter() - started
        started = time.perf_counter()
        wait_for_tiering(broker, step)
        report.tiering_seconds = time.perf_counter() - started
        describe_tiers(broker, report)
        local_starts = {
            tp.partition: plog.local_log_start_offset for tp, plog in _tiered_partitions(broker)
        }
        started = time.perf_counter()
        consumed = consume(bootstrap, records, step)
        report.consume_seconds = time.perf_counter() - started
        report.consumed = check_consumed(orders, consumed)
        report.remote_records_verified = sum(
            1
            for n, records_of in consumed.items()
            for record in records_of
            if record.offset < local_starts[n]
        )
        remote_fetch_figures(broker, report)
        wire_request_counts(cluster, report)
    remote_files = [p for p in (data_dir / "remote").rglob("*") if p.is_file()]
    report.remote_objects = len(remote_files)
    report.remote_object_bytes = sum(p.stat().st_size for p in remote_files)
    return report


def summary_rows(report: DemoReport) -> list[tuple[str, Any]]:
    return [
        ("bootstrap servers", report.bootstrap_servers),
        ("Kafka client", report.client),
        (
            "requests served: Produce / Fetch",
            f"{report.wire_requests.get('Produce', 0)} / {report.wire_requests.get('Fetch', 0)}",
        ),
        ("records produced / consumed", f"{report.records} / {report.consumed}"),
        ("produce throughput", f"{report.records / max(report.produce_seconds, 1e-9):,.0f} rec/s"),
        ("consume throughput", f"{report.consumed / max(report.consume_seconds, 1e-9):,.0f} rec/s"),
        ("tiering and local deletion", f"{report.tiering_seconds:.1f} s"),
        ("local tier: segments / bytes", f"{report.local_segments} / {report.local_bytes:,}"),
        ("remote tier: segments / bytes", f"{report.tiered_segments} / {report.tiered_bytes:,}"),
        (
            "remote objects / stored bytes",
            f"{report.remote_objects} / {report.remote_object_bytes:,}",
        ),
        ("storage plugin", report.storage_plugin),
        ("metadata plugin", report.metadata_plugin),
        ("remote location", report.remote_url),
        (
            "remote fetches / p50 / p99 latency",
            f"{report.remote_fetches} / {report.remote_fetch_p50_ms:.2f} ms"
            f" / {report.remote_fetch_p99_ms:.2f} ms",
        ),
        ("records consumed from the remote tier", report.remote_records_verified),
    ]
