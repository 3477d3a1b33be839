"""tierlog-spark: reading tiered segments with Spark, through each of its two readers.

One cluster tiers a topic of several partitions (the fsspec plugin on ``file://``, metadata in
``__remote_log_metadata``) until every rolled segment is only in remote storage. Then, in the same
run and on the same records:

* the runtime's ``Consumer`` reads them from the earliest offset (reported, no target);
* one Python process plans, fetches and decodes them as a Python task would, with no Spark
  (reported: the ceiling per core of any Python data source over these segments);
* the cluster is stopped and Spark reads them through ``format("tierlog")``, offline, as jobs
  do, against the same records written once to Parquet and read by the same session:
  - the JVM reader (``spark.tierlog.reader=jvm``, the default where a JDK built its jar), in
    ``local[2]``: target >= 1.0 of Parquet, both over all 14 columns and over the aggregate's
    columns; and ``local[2]`` against ``local[1]`` (target >= 1.7);
  - the Python reader (``spark.tierlog.reader=python``), reported beside it.
* a smaller topic tiered to S3 (moto's server on loopback) is read by the JVM reader through
  presigned ranges, beside the same records as Parquet in the same bucket read by pyarrow
  (reported: pyspark ships no S3 filesystem for Spark's own Parquet reader).

Every Spark read computes an aggregate over the columns it names (count, lengths, maxima, header
count), so every source decodes every row and Parquet cannot skip a column the figure claims.
Each figure is the best of three runs after a warm-up run.
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
#: The Spark conf choosing the reader behind ``format("tierlog")``.
READER_CONF = "spark.tierlog.reader"


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
    root: Path, partitions: int, segments: int, segment_bytes: int, settings: dict[str, str]
) -> tuple[dict[int, int], float]:
    """Produces ``segments`` full segments per partition and waits until all are tiered.

    Returns the first offset left local per partition, and the seconds the runtime's consumer
    took to read the tiered records.
    """
    from tierlog.client import Admin, NewTopic
    from tierlog.cluster import EmbeddedCluster
    from tierlog.model import TopicPartition
    from tierlog.server import protocol as p

    with EmbeddedCluster(1, root / "data", settings) as cluster:
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
    """The aggregate a job over record fields computes: key and value lengths, offsets,
    timestamps and headers."""
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


def _aggregate_all(frame: Any) -> tuple[Any, ...]:
    """An aggregate over all 14 columns, so that no reader may prune one."""
    from pyspark.sql import functions as F

    row = frame.agg(
        F.count("*"),
        F.sum(F.length("value")),
        F.sum(F.length("key")),
        F.max("offset"),
        F.max("timestamp"),
        F.sum(F.size("headers")),
        F.max("topic"),
        F.max("partition"),
        F.max("timestamp_type"),
        F.max("leader_epoch"),
        F.max("producer_id"),
        F.max("producer_epoch"),
        F.max("sequence"),
        F.max(F.col("is_transactional").cast("int")),
        F.max("segment_id"),
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


def _spark_reads(
    spark: Any, settings: dict[str, str], log_dir: Path, records: int, reader: str
) -> tuple[float, float]:
    """Seconds for the all-columns and the aggregate's-columns reads with ``reader``."""
    spark.conf.set(READER_CONF, reader)
    try:
        every = _best(lambda: _aggregate_all(_tierlog_frame(spark, settings, log_dir)), records)
        # The Python reader learns of a projection only through the schema it is given.
        schema = AGGREGATE_COLUMNS if reader == "python" else None
        some = _best(lambda: _aggregate(_tierlog_frame(spark, settings, log_dir, schema)), records)
    finally:
        spark.conf.unset(READER_CONF)
    return every, some


def _s3_reads(root: Path, quick: bool) -> tuple[float, float, int] | None:
    """(JVM reader seconds, pyarrow Parquet seconds, records) of a topic tiered to moto's S3
    server; None when moto or s3fs is not installed."""
    try:
        import s3fs
        from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    except ImportError:
        return None
    from tierlog_spark.session import make_session

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    root.mkdir(parents=True, exist_ok=True)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        fs = s3fs.S3FileSystem(key="testing", secret="testing", endpoint_url=endpoint)
        fs.mkdir("bench")
        settings = {
            **_settings(root),
            "rsm.config.url": "s3://bench/tiered",
            "rsm.config.storage.endpoint_url": endpoint,
            "rsm.config.storage.key": "testing",
            "rsm.config.storage.secret": "testing",
        }
        ends, _ = _tier(root, 2, 2 if quick else 4, MiB, settings)
        records = sum(ends.values())
        log_dir = root / "data" / "broker-0" / "logs"
        spark = make_session(master="local[2]", app_name="tierlog-spark-bench-s3")
        try:
            spark.conf.set(READER_CONF, "jvm")
            frame = _tierlog_frame(spark, settings, log_dir)
            jvm = _best(lambda: _aggregate_all(_tierlog_frame(spark, settings, log_dir)), records)
            local_parquet = str(root / "parquet")
            frame.write.parquet(local_parquet)
        finally:
            spark.stop()
        fs.put(local_parquet, "bench/parquet", recursive=True)
        parquet = _best(lambda: _pyarrow_aggregate(endpoint, "bench/parquet"), records)
        return jvm, parquet, records
    finally:
        server.stop()


def _pyarrow_aggregate(endpoint: str, path: str) -> tuple[int]:
    """Reads every column of a Parquet dataset on S3 with pyarrow; (rows,)."""
    import pyarrow.dataset as ds
    from pyarrow import fs

    s3 = fs.S3FileSystem(
        access_key="testing",
        secret_key="testing",
        endpoint_override=endpoint.removeprefix("http://"),
        scheme="http",
        region="us-east-1",
    )
    return (ds.dataset(path, filesystem=s3, format="parquet").to_table().num_rows,)


def run(quick: bool) -> list[dict[str, Any]]:
    from tierlog_spark.jvm.build import JarBuildError, build_jar
    from tierlog_spark.session import make_session

    try:
        build_jar()
    except JarBuildError as error:
        raise RuntimeError(f"the JVM reader is what this benchmark measures: {error}") from None
    partitions, segments = 4, 6 if quick else 16
    segment_bytes = (1 if quick else 4) * MiB
    with tempfile.TemporaryDirectory(prefix="tierlog-spark-bench-") as scratch:
        root = Path(scratch)
        ends, consumed = _tier(root, partitions, segments, segment_bytes, _settings(root))
        records = sum(ends.values())
        settings, log_dir = _settings(root), root / "data" / "broker-0" / "logs"
        alone = _decode_in_process(settings, log_dir, records)

        spark = make_session(master="local[1]", app_name="tierlog-spark-bench")
        spark.conf.set(READER_CONF, "jvm")
        one = _best(lambda: _aggregate_all(_tierlog_frame(spark, settings, log_dir)), records)
        spark.stop()

        spark = make_session(master="local[2]", app_name="tierlog-spark-bench")
        try:
            spark.conf.set(READER_CONF, "jvm")
            frame = _tierlog_frame(spark, settings, log_dir)
            tasks = frame.rdd.getNumPartitions()
            parquet = str(root / "parquet")
            frame.write.parquet(parquet)
            spark.conf.unset(READER_CONF)
            parquet_all = _best(lambda: _aggregate_all(spark.read.parquet(parquet)), records)
            parquet_some = _best(lambda: _aggregate(spark.read.parquet(parquet)), records)
            jvm_all, jvm_some = _spark_reads(spark, settings, log_dir, records, "jvm")
            py_all, py_some = _spark_reads(spark, settings, log_dir, records, "python")
        finally:
            spark.stop()
        s3 = _s3_reads(root / "s3", quick)

    shape = f"{records:,} records, {partitions * segments} segments, {tasks} tasks"
    rows = [
        row(
            f"spark local[2] JVM reader, all 14 columns, vs Parquet ({shape})",
            records / jvm_all,
            "rec/s",
            records / parquet_all,
            1.0,
        ),
        row(
            "spark local[2] JVM reader, the aggregate's columns (pruned by Spark), vs Parquet",
            records / jvm_some,
            "rec/s",
            records / parquet_some,
            1.0,
        ),
        row(
            "spark local[2] Python reader, all 14 columns, vs Parquet",
            records / py_all,
            "rec/s",
            records / parquet_all,
            None,
        ),
        row(
            "spark local[2] Python reader, the aggregate's columns (a schema naming them), "
            "vs Parquet",
            records / py_some,
            "rec/s",
            records / parquet_some,
            None,
        ),
        row(
            "spark local[2] JVM reader vs the Python reader, all 14 columns",
            records / jvm_all,
            "rec/s",
            records / py_all,
            None,
        ),
        row(
            "spark local[2] JVM reader vs the runtime's consumer",
            records / jvm_all,
            "rec/s",
            records / consumed,
            None,
        ),
        row(
            "fetch and decode in one Python process, no Spark (the ceiling per core of a Python "
            "reader) vs Parquet local[2]",
            records / alone,
            "rec/s",
            records / parquet_all,
            None,
        ),
        row(
            "spark JVM reader: local[2] vs local[1]",
            records / jvm_all,
            "rec/s",
            records / one,
            1.7,
        ),
    ]
    if s3 is not None:
        jvm_s3, parquet_s3, s3_records = s3
        rows.append(
            row(
                f"S3 (moto on loopback) JVM reader local[2], all columns, vs pyarrow reading the "
                f"same records as Parquet from the same endpoint ({s3_records:,} records)",
                s3_records / jvm_s3,
                "rec/s",
                s3_records / parquet_s3,
                None,
            )
        )
    return rows


if __name__ == "__main__":
    for figure in run("--quick" in sys.argv):
        print(figure)
