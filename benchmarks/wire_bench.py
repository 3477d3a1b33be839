"""Real Kafka clients against one listening broker with tiering on, each beside a raw server.

One broker (``EmbeddedCluster(1, listen=True)``, the fsspec plugin on a temporary directory,
the demo's settings) runs in this process; the clients run in a child process
(``benchmarks.wire_clients``) so their own Python work does not share the broker's GIL. The
baselines are the servers of ``benchmarks.wire_raw``, in this process too: a sink that
acknowledges produced batches without storing them and a source that replays the broker's own
batches from memory, both with the broker's codec and threading, so a ratio is what the
broker's work costs over the network and the codec.

* confluent-kafka producer, 1,000,000 x 100 B and 200,000 x 1 KiB records, ``acks=all``,
  idempotent (when InitProducerId is served), into a tiered topic and into a local one, vs the
  sink. Target: 0.5 of the sink's records/s.
* confluent-kafka consumer from earliest: the tiered topic once most of it is remote and gone
  from the local disk, and the local topic, vs the source replaying the local topic's segments.
  Target: 0.5.
* produce latency p50/p99 at a steady 10,000 records/s, ``acks=all``, ``linger.ms=0``, vs the
  same against the sink (reported only).
* kafka-python and aiokafka produce and consume rates (100,000 x 100 B, a local topic read back
  whole), vs the same client against the sink and the source (reported only).

Throughput figures are medians of three runs, the broker's alternating with the baseline's;
``--quick`` runs each once and divides the counts by ten.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.demo import demo_settings
from tierlog.model import TopicPartition
from tierlog.wire.apis import APIS

from .report import row
from .wire_clients import WARMUP
from .wire_raw import RawSink, RawSource, batches_of

#: The Kafka clients the bench drives (kafka-python is tierlog's own dependency).
CLIENT_LIBRARIES = ("confluent_kafka", "aiokafka")

PARTITIONS = 3
_INIT_PRODUCER_ID = 22
_ROOT = Path(__file__).resolve().parent.parent
#: Every API the broker serves, at its versions: the raw servers advertise the same table, so
#: clients choose the same versions and features (the record format follows Fetch's versions).
VERSIONS = {key: (api.min_version, api.max_version) for key, api in APIS.items()}


def broker_settings(data_dir: Path) -> dict[str, object]:
    """The demo's settings: tiering on, fsspec under ``data_dir``, a listener on a free port."""
    return demo_settings(data_dir)


def client(job: str, **args: Any) -> dict[str, Any]:
    """Runs one ``wire_clients`` job in a child process; its figures."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.wire_clients", json.dumps({"job": job, **args})],
        cwd=_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{job} failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def rate(result: dict[str, Any]) -> float:
    return float(result["records"] / result["seconds"])


def _each(rates: list[float]) -> str:
    return " / ".join(f"{r:,.0f}" for r in rates)


class Bench:
    """One broker, its topics, and the figures measured against it."""

    def __init__(self, cluster: EmbeddedCluster, quick: bool, idempotent: bool) -> None:
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap_servers
        self.admin = Admin(cluster.transport)
        self.repetitions = 1 if quick else 3
        self.idempotent = idempotent
        self.rows: list[dict[str, Any]] = []

    def create(self, topic: str, configs: dict[str, str] | None = None) -> str:
        self.admin.create_topics([NewTopic(topic, PARTITIONS, 1, configs=configs or {})])
        return topic

    def tiered_configs(self, count: int, size: int) -> dict[str, str]:
        """Segments of a tenth of a partition's data and one segment kept locally, so most of
        the data is remote, and gone from the disk, by the time it is read."""
        per_partition = count * (size + 10) // PARTITIONS
        segment = max(64 * 1024, per_partition // 10)
        return {
            "remote.storage.enable": "true",
            "segment.bytes": str(segment),
            "local.retention.bytes": str(segment),
        }

    def produce(self, bootstrap: str, topic: str, count: int, size: int) -> float:
        return rate(
            client(
                "confluent_produce",
                bootstrap=bootstrap,
                topic=topic,
                count=count,
                size=size,
                idempotent=self.idempotent,
            )
        )

    def consume(self, bootstrap: str, topic: str, count: int, job: str = "confluent") -> float:
        return rate(
            client(
                f"{job}_consume",
                bootstrap=bootstrap,
                topic=topic,
                partitions=PARTITIONS,
                count=count,
            )
        )

    def log(self, topic: str, partition: int) -> Any:
        replica = self.cluster.broker(0).partition(TopicPartition(topic, partition))
        assert replica is not None
        return replica.log

    def remote_share(self, topic: str, count: int) -> float:
        """The part of ``topic``'s records no longer on the local disk."""
        gone: int = sum(self.log(topic, p).local_log_start_offset for p in range(PARTITIONS))
        return gone / count

    def wait_tiered(self, topic: str, count: int, share: float, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while self.remote_share(topic, count) < share and time.monotonic() < deadline:
            time.sleep(0.2)
        return self.remote_share(topic, count)

    def captured(self, topic: str) -> list[list[tuple[int, int, bytes]]]:
        """The batches of each partition of ``topic``, as its local segments hold them."""
        per_partition = []
        for p in range(PARTITIONS):
            log = self.log(topic, p)
            log.flush()
            data = b"".join(Path(info.log_path).read_bytes() for info in log.segments())
            per_partition.append(batches_of(data))
        return per_partition

    # --- the figures --------------------------------------------------------------------------

    def size_rows(self, size: int, count: int) -> None:
        """Produce and consume ``count`` records of ``size`` bytes; each figure is the median
        of :attr:`repetitions` runs, the broker's alternating with its baseline's."""
        label = f"{count:,} x {'1 KiB' if size == 1024 else f'{size} B'}"
        sink_rates, tiered_rates, local_rates, cpu_per_mib = [], [], [], []
        for rep in range(self.repetitions):
            with RawSink(VERSIONS, PARTITIONS) as sink:
                sink_rates.append(self.produce(sink.bootstrap, f"sink-{size}", count, size))
                if sink.records != count + WARMUP:
                    raise RuntimeError(f"the sink acknowledged {sink.records} of {count} records")
            tiered = self.create(f"tiered-{size}-{rep}", self.tiered_configs(count, size))
            local = self.create(f"local-{size}-{rep}")
            cpu = time.process_time()
            tiered_rates.append(self.produce(self.bootstrap, tiered, count, size))
            cpu_per_mib.append((time.process_time() - cpu) / (count * size / (1 << 20)))
            local_rates.append(self.produce(self.bootstrap, local, count, size))
        sink_rate, tiered_rate, local_rate = map(median, (sink_rates, tiered_rates, local_rates))
        print(
            f"  produce {label}: sink {_each(sink_rates)}, tiered topic {_each(tiered_rates)} "
            f"({median(cpu_per_mib) * 1000:.1f} ms broker process CPU per MiB), "
            f"local topic {_each(local_rates)} rec/s"
        )
        self.rows += [
            row(f"confluent produce {label}, tiered topic", tiered_rate, "rec/s", sink_rate, 0.5),
            row(f"confluent produce {label}, local topic", local_rate, "rec/s", sink_rate, 0.5),
        ]

        # Read back the first run's topics once every run's tiering has settled.
        for rep in range(self.repetitions):
            self.wait_tiered(f"tiered-{size}-{rep}", count, 0.7, timeout=180)
        tiered, local = f"tiered-{size}-0", f"local-{size}-0"
        share = self.remote_share(tiered, count)
        batches = self.captured(local)
        stored = sum(b[-1][1] for b in batches if b)
        if stored != count + WARMUP:
            raise RuntimeError(f"captured {stored} of {count} records from {local}'s segments")
        source_reads, tiered_reads, local_reads = [], [], []
        for _ in range(self.repetitions):
            with RawSource(VERSIONS, batches) as source:
                source_reads.append(self.consume(source.bootstrap, "source", count))
            tiered_reads.append(self.consume(self.bootstrap, tiered, count))
            local_reads.append(self.consume(self.bootstrap, local, count))
        print(
            f"  consume {label}: source {_each(source_reads)}, tiered topic ({share:.0%} "
            f"remote only) {_each(tiered_reads)}, local topic {_each(local_reads)} rec/s"
        )
        source_read = median(source_reads)
        self.rows += [
            row(
                f"confluent consume {label}, tiered ({share:.0%} remote)",
                median(tiered_reads),
                "rec/s",
                source_read,
                0.5,
            ),
            row(
                f"confluent consume {label}, local", median(local_reads), "rec/s", source_read, 0.5
            ),
        ]

    def latency_rows(self, seconds: float) -> None:
        args = {"rate": 10_000, "seconds": seconds, "size": 100, "idempotent": self.idempotent}
        with RawSink(VERSIONS, PARTITIONS) as sink:
            base = client("confluent_latency", bootstrap=sink.bootstrap, topic="sink-lat", **args)
        topic = self.create("latency", self.tiered_configs(10_000 * int(seconds), 100))
        ours = client("confluent_latency", bootstrap=self.bootstrap, topic=topic, **args)
        print(
            f"  latency at 10,000 rec/s: broker p50 {ours['p50_ms']:.2f} ms p99 "
            f"{ours['p99_ms']:.2f} ms (achieved {ours['rate']:,.0f} rec/s); sink p50 "
            f"{base['p50_ms']:.2f} ms p99 {base['p99_ms']:.2f} ms"
        )
        for quantile in ("p50", "p99"):
            self.rows.append(
                row(
                    f"confluent produce latency {quantile} at 10,000 rec/s",
                    ours[f"{quantile}_ms"],
                    "ms",
                    base[f"{quantile}_ms"],
                    None,
                    higher_is_better=False,
                )
            )

    def python_client_rows(self, count: int) -> None:
        """Each client reads back the whole topic it wrote (the first run's), so no figure
        includes records fetched past the end of what is counted; medians as above."""
        label = f"{count:,} x 100 B"
        for job, name in (("kafka_python", "kafka-python"), ("aiokafka", "aiokafka")):
            args = {"count": count, "size": 100, "idempotent": self.idempotent}
            sink_rates, rates, source_reads, reads = [], [], [], []
            for rep in range(self.repetitions):
                with RawSink(VERSIONS, PARTITIONS) as sink:
                    result = client(f"{job}_produce", bootstrap=sink.bootstrap, topic="s", **args)
                    sink_rates.append(rate(result))
                topic = self.create(f"{job}-100-{rep}")
                result = client(f"{job}_produce", bootstrap=self.bootstrap, topic=topic, **args)
                rates.append(rate(result))
            topic = f"{job}-100-0"
            batches = self.captured(topic)
            for _ in range(self.repetitions):
                with RawSource(VERSIONS, batches) as source:
                    source_reads.append(self.consume(source.bootstrap, "source", count, job))
                reads.append(self.consume(self.bootstrap, topic, count, job))
            print(
                f"  {name}: produce {_each(rates)} (sink {_each(sink_rates)}), consume "
                f"{_each(reads)} (source {_each(source_reads)}) rec/s"
            )
            self.rows += [
                row(
                    f"{name} produce {label}, local topic",
                    median(rates),
                    "rec/s",
                    median(sink_rates),
                    None,
                ),
                row(
                    f"{name} consume {label}, local topic",
                    median(reads),
                    "rec/s",
                    median(source_reads),
                    None,
                ),
            ]


def run(quick: bool) -> list[dict[str, Any]]:
    missing = [name for name in CLIENT_LIBRARIES if importlib.util.find_spec(name) is None]
    if missing:
        print(
            f"  skipped: the client libraries {', '.join(missing)} are not installed "
            "(pip install -c constraints.txt confluent-kafka aiokafka)"
        )
        return []
    scale = 10 if quick else 1
    idempotent = _INIT_PRODUCER_ID in APIS
    if not idempotent:
        print(
            "  note: InitProducerId (api key 22) is not served: producers run with idempotence off"
        )
    with tempfile.TemporaryDirectory(prefix="tierlog-wire-bench-") as tmp:
        data_dir = Path(tmp)
        with EmbeddedCluster(1, data_dir / "data", broker_settings(data_dir), listen=True) as cl:
            bench = Bench(cl, quick, idempotent)
            bench.size_rows(100, 1_000_000 // scale)
            bench.size_rows(1024, 200_000 // scale)
            bench.latency_rows(2.0 if quick else 10.0)
            bench.python_client_rows(100_000 // scale)
    return bench.rows
