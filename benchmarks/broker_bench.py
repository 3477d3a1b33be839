"""What the broker layers cost: produce and consume through the client on a one-broker embedded
cluster vs the partition log alone on the same bytes, both measured in the same run.

* produce: ``Producer.send`` of 1 KiB records with Kafka's producer defaults (idempotent,
  ``acks=all``, ``batch.size`` 16 KiB, ``linger.ms`` 5) and a final ``flush``, vs
  ``PartitionLog.append_as_leader`` of the very batches the broker wrote, copied out of its log
  (so the baseline does the same header, CRC and producer-sequence checks);
* consume: ``Consumer.poll`` from the beginning until every record came back as a
  ``ConsumerRecord``, vs ``PartitionLog.read`` of the baseline log in 1 MiB fetches (Kafka's
  ``max.partition.fetch.bytes``), batches left undecoded as a broker serves them;
* end to end: both together, bytes over the sum of the two times.

The gap is everything between the application and the log: the producer's accumulator and
sender thread, request encoding, the in-process transport, the broker's request handling and
the consumer's record decoding. No target is set for these rows (``target`` and ``ok`` are None).

``run(quick)`` returns rows ``{name, value, unit, baseline, ratio, target, ok}`` with
``ratio = value / baseline``. Figures are medians of repetitions that alternate between the
cluster and the bare log, each on a fresh topic or log, with the page cache written back first.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tierlog.client import Admin, Consumer, NewTopic, Producer
from tierlog.cluster import EmbeddedCluster
from tierlog.log import PartitionLog
from tierlog.model import TopicPartition
from tierlog.records import iter_batches

KIB = 1024
MIB = 1024 * KIB
RECORD_SIZE = KIB
#: Kafka's ``max.partition.fetch.bytes``: what one consumer fetch asks of a partition.
FETCH_SIZE = MIB


def _row(name: str, value: float, baseline: float) -> dict[str, Any]:
    return {
        "name": name,
        "value": round(value, 3),
        "unit": "MiB/s",
        "baseline": round(baseline, 3),
        "ratio": round(value / baseline if baseline else 0.0, 3),
        "target": None,
        "ok": None,
    }


def _broker_batches(log_dir: Path) -> list[bytearray]:
    """The batches the broker wrote to ``log_dir``, each copied into its own buffer."""
    batches = []
    for segment in sorted(log_dir.glob("*.log")):
        data = segment.read_bytes()
        batches.extend(bytearray(batch.raw) for batch in iter_batches(data))
    return batches


def _through_cluster(
    producer: Producer, consumer: Consumer, topic: str, values: list[bytes]
) -> tuple[float, float]:
    """Seconds to produce ``values`` to ``topic`` and to consume them all back."""
    tp = TopicPartition(topic, 0)
    producer.partitions_for(topic)  # metadata is fetched before the clock starts
    start = time.perf_counter()
    for value in values:
        producer.send(topic, value, partition=0)
    producer.flush()
    produced = time.perf_counter() - start

    consumer.assign([tp])
    consumer.seek_to_beginning([tp])
    consumer.position(tp)
    count = len(values)
    start = time.perf_counter()
    received = 0
    while received < count:
        received += len(consumer.poll(timeout_ms=1000))
    consumed = time.perf_counter() - start
    if received != count:
        raise AssertionError(f"consumed {received} records, produced {count}")
    return produced, consumed


def _through_log(directory: Path, batches: list[bytearray]) -> tuple[float, float]:
    """Seconds to append ``batches`` to a fresh partition log and to read them all back."""
    log = PartitionLog.open(directory, {"segment.bytes": 1 << 30})
    try:
        append = log.append_as_leader
        start = time.perf_counter()
        for batch in batches:
            append(batch, 0)
        appended = time.perf_counter() - start

        read = log.read
        end = log.log_end_offset
        offset = 0
        start = time.perf_counter()
        while offset < end:
            offset = read(offset, FETCH_SIZE).next_offset
        return appended, time.perf_counter() - start
    finally:
        log.close()
        shutil.rmtree(directory, ignore_errors=True)


def run(quick: bool) -> list[dict[str, Any]]:
    """Produce, consume and end-to-end rows; see the module docstring."""
    volume = (8 if quick else 64) * MIB
    repetitions = 3 if quick else 5
    count = volume // RECORD_SIZE
    # Sixteen distinct incompressible values in turn, as log_bench rotates its buffers.
    pool = [os.urandom(RECORD_SIZE) for _ in range(16)]
    values = [pool[i & 15] for i in range(count)]
    timings: dict[str, list[float]] = {k: [] for k in ("produce", "consume", "append", "read")}
    root = Path(tempfile.mkdtemp(prefix="tierlog-bench-"))
    try:
        with EmbeddedCluster(size=1, data_dir=root / "cluster") as cluster:
            with Admin(cluster.transport) as admin:
                admin.create_topics([NewTopic(f"bench{rep}", 1, 1) for rep in range(repetitions)])
            producer = Producer(cluster.transport)
            consumer = Consumer(cluster.transport, {"auto.offset.reset": "earliest"})
            try:
                for rep in range(repetitions):
                    topic = f"bench{rep}"
                    os.sync()
                    produced, consumed = _through_cluster(producer, consumer, topic, values)
                    batches = _broker_batches(root / "cluster" / "broker-0" / "logs" / f"{topic}-0")
                    os.sync()
                    appended, read = _through_log(root / f"base{rep}-0", batches)
                    timings["produce"].append(produced)
                    timings["consume"].append(consumed)
                    timings["append"].append(appended)
                    timings["read"].append(read)
            finally:
                consumer.close()
                producer.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)

    median = {k: statistics.median(v) for k, v in timings.items()}
    end_to_end = statistics.median(
        p + c for p, c in zip(timings["produce"], timings["consume"], strict=True)
    )
    bare = statistics.median(a + r for a, r in zip(timings["append"], timings["read"], strict=True))
    mib = volume / MIB
    label = f"{RECORD_SIZE // KIB} KiB records"
    return [
        _row(
            f"broker produce via client, {label} (vs log append)",
            mib / median["produce"],
            mib / median["append"],
        ),
        _row(
            f"broker consume via client, {label} (vs log read)",
            mib / median["consume"],
            mib / median["read"],
        ),
        _row(
            f"broker produce+consume end to end, {label} (vs log append+read)",
            mib / end_to_end,
            mib / bare,
        ),
    ]


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    results = run(quick)
    for row in results:
        print(
            f"{row['name']}: {row['value']} {row['unit']} (baseline {row['baseline']}, "
            f"ratio {row['ratio']})"
        )
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(results, indent=2))
