"""tierlog-spark: reading tiered segments with Spark.

One cluster tiers a topic of several partitions (the fsspec plugin on ``file://``, metadata in
``__remote_log_metadata``) until every rolled segment is only in remote storage. Then, in the same
run and on the same records:

* the runtime's ``Consumer`` reads them from the earliest offset (reported, no target);
* one Python process plans, fetches and decodes them as a task would, with no Spark (reported:
  the ceiling per core of any Python data source over these segments);
* the cluster is stopped and Spark reads them through the ``tierlog`` source, offline, as jobs
  do: ``local[2]`` against the same records written once to Parquet and read by the same session
  (target >= 0.5), both with all 14 columns and with a schema naming only the aggregate's
  columns (Parquet prunes columns by itself; a Python data source only through the schema it is
  given), and ``local[2]`` against ``local[1]`` (target >= 1.7).

Every Spark read computes the same aggregate over the record fields a job would use (count,
key and value lengths, max offset and timestamp, header count), so both sources decode every
row and Parquet cannot skip the value column. Each figure is the best of three runs after a
warm-up run.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.report import row

MiB = 1024 * 1024
TOPIC = "bench"


def _settings(root: Path) -> dict[str, str]:
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.name": "fsspec",
        "rsm.config.url": (root / "remote").resolve().as_uri(),
        "remote.log.manager.task.interval.ms": "20",
        "log.retention.check.interval.ms": "50",
        "remote.log.metadata.manager.name": "topic",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.consume.wait.ms": "10000",
    }


def _batch(records: int) -> bytes:
    from tierlog.records import Compression, RecordBatchBuilder

    builder = RecordBatchBuilder(Compression.NONE)
    now = int(time.time() * 1000)
    for i in range(records):
        builder.append(now + i, b"key-%d" % i, os.urandom(50).hex().encode())
    return builder.build()


def _tier(
    root: Path, partitions: int, segments: int, segment_bytes: int
) -> tuple[dict[int, int], float]:
    """Produces ``segments`` full segments per partition and waits until all are tiered.

    Returns the first offset left local per partition, and the seconds the runtime's consumer
    took to read the tiered records.
    """
    from tierlog.client import Admin, NewTopic
    from tierlog.cluster import EmbeddedCluster
    from tierlog.model import TopicPartition
    from tierlog.server import protocol as p

    with EmbeddedCluster(1, root / "data", _settings(root)) as cluster:
        configs = {
            "segment.bytes": str(segment_bytes),
            "remote.storage.enable": "true",
            "local.retention.bytes": "1",
        }
        with Admin(cluster.transport) as admin:
            admin.create_topics([NewTopic(TOPIC, partitions, 1, configs=configs)])
        batch = _batch(500)
        per_partition = segments * segment_bytes // len(batch) + 1
        for _ in range(per_partition):
            data = [p.PartitionProduceData(n, batch) for n in range(partitions)]
            request = p.ProduceRequest(
                acks=-1, timeout_ms=30_000, topic_data=[p.TopicProduceData(TOPIC, data)]
            )
            for answer in cluster.transport.send(0, request).responses[0].partition_responses:
                if answer.error_code != p.NONE:
                    raise RuntimeError(f"produce failed with error {answer.error_code}")
        logs = [
            cluster.broker(0).partition(TopicPartition(TOPIC, n)).log for n in range(partitions)
        ]
        deadline = time.monotonic() + 600
        while True:
            settled = [
                plog.local_log_start_offset == plog.segments()[-1].base_offset
                and plog.highest_offset_in_remote_storage == plog.segments()[-1].base_offset - 1
                for plog in logs
            ]
            if all(settled):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("tiering did not finish in 10 minutes")
            time.sleep(0.05)
        ends = {n: int(plog.local_log_start_offset) for n, plog in enumerate(logs)}
        consumed = _consume(cluster, ends)
    return ends, consumed


def _consume(cluster: Any, ends: dict[int, int]) -> float:
    """Seconds the runtime's consumer takes to read the tiered records of every partition."""
    from tierlog.client import Consumer
    from tierlog.model import TopicPartition

    consumer = Consumer(cluster.transport, {"auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, n) for n in ends])
    read = dict.fromkeys(ends, 0)
    started = time.perf_counter()
    while any(read[n] < ends[n] for n in ends):
        for record in consumer.poll(timeout_ms=500):
            if record.offset < ends[record.partition]:
                read[record.partition] += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def _aggregate(frame: Any) -> tuple[Any, ...]:
    from pyspark.sql import functions as F

    row = frame.agg(
        F.count("*"),
        F.sum(F.length("value")),
        F.sum(F.length("key")),
        F.max("offset"),
        F.max("timestamp"),
        F.sum(F.size("headers")),
    ).collect()[0]
    return tuple(row)


def _best(read: Callable[[], tuple[Any, ...]], expected: int) -> float:
    read()  # warm-up: Python workers, page cache, JIT
    times = []
    for _ in range(3):
        started = time.perf_counter()
        result = read()
        times.append(time.perf_counter() - started)
        if result[0] != expected:
            raise RuntimeError(f"read {result[0]} records, expected {expected}")
    return min(times)


#: The columns ``_aggregate`` reads, as a schema given to the reader (a projection).
AGGREGATE_COLUMNS = (
    "offset long, timestamp timestamp, key binary, value binary, "
    "headers array<struct<key:string,value:binary>>"
)


def _tierlog_frame(
    spark: Any, settings: dict[str, str], log_dir: Path, schema: str | None = None
) -> Any:
    reader = spark.read.format("tierlog")
    if schema is not None:
        reader = reader.schema(schema)
    for key, value in settings.items():
        reader = reader.option(f"tierlog.{key}", value)
    return reader.option("log.dirs", str(log_dir)).option("topics", TOPIC).load()


def _decode_in_process(settings: dict[str, str], log_dir: Path, records: int) -> float:
    """Seconds one Python process takes to plan, fetch and decode every record the way a
    Spark task does, with no Spark: the ceiling of a Python data source per core."""
    from tierlog_spark.datasource import TierlogDataSource

    options = {f"tierlog.{key}": value for key, value in settings.items()}
    source = TierlogDataSource({**options, "log.dirs": str(log_dir), "topics": TOPIC})
    reader = source.reader(source.schema())

    def read() -> tuple[int]:
        return (sum(b.num_rows for task in reader.partitions() for b in reader.read(task)),)

    return _best(read, records)


def run(quick: bool) -> list[dict[str, Any]]:
    from tierlog_spark.session import make_session

    partitions, segments = 4, 6 if quick else 16
    segment_bytes = (1 if quick else 4) * MiB
    with tempfile.TemporaryDirectory(prefix="tierlog-spark-bench-") as scratch:
        root = Path(scratch)
        ends, consumed = _tier(root, partitions, segments, segment_bytes)
        records = sum(ends.values())
        settings, log_dir = _settings(root), root / "data" / "broker-0" / "logs"
        alone = _decode_in_process(settings, log_dir, records)

        spark = make_session(master="local[1]", app_name="tierlog-spark-bench")
        one = _best(lambda: _aggregate(_tierlog_frame(spark, settings, log_dir)), records)
        spark.stop()

        spark = make_session(master="local[2]", app_name="tierlog-spark-bench")
        try:
            frame = _tierlog_frame(spark, settings, log_dir)
            tasks = frame.rdd.getNumPartitions()
            two = _best(lambda: _aggregate(_tierlog_frame(spark, settings, log_dir)), records)
            projected = _best(
                lambda: _aggregate(_tierlog_frame(spark, settings, log_dir, AGGREGATE_COLUMNS)),
                records,
            )
            parquet = str(root / "parquet")
            frame.write.parquet(parquet)
            from_parquet = _best(lambda: _aggregate(spark.read.parquet(parquet)), records)
        finally:
            spark.stop()

    shape = f"{records:,} records, {partitions * segments} segments, {tasks} tasks"
    return [
        row(
            f"spark local[2] tierlog read vs Parquet ({shape})",
            records / two,
            "rec/s",
            records / from_parquet,
            0.5,
        ),
        row(
            "spark local[2] tierlog read of the aggregate's columns (a schema naming them) "
            "vs Parquet",
            records / projected,
            "rec/s",
            records / from_parquet,
            0.5,
        ),
        row(
            "spark local[2] tierlog read vs the runtime's consumer",
            records / two,
            "rec/s",
            records / consumed,
            None,
        ),
        row(
            "fetch and decode in one Python process, no Spark (the ceiling per core) vs Parquet "
            "local[2]",
            records / alone,
            "rec/s",
            records / from_parquet,
            None,
        ),
        row("spark tierlog read: local[2] vs local[1]", records / two, "rec/s", records / one, 1.7),
    ]


if __name__ == "__main__":
    for figure in run("--quick" in sys.argv):
        print(figure)
