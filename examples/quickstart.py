"""tierlog in one file: a broker, a tiered topic, records that move to remote storage and back.

Run it with ``python examples/quickstart.py`` after ``pip install tierlog tierlog-fsspec``. The
"remote" storage is a directory (fsspec's ``file://``), so nothing leaves the machine.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tierlog.client import Admin, Consumer, NewTopic, Producer
from tierlog.cluster import EmbeddedCluster
from tierlog.model import TopicPartition

TOPIC = "quickstart"


def broker_settings(remote: Path) -> dict[str, object]:
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.name": "fsspec",
        "rsm.config.url": remote.as_uri(),
        # Check for segments to copy and expire every 50 ms instead of every 30 s.
        "remote.log.manager.task.interval.ms": "50",
        "log.retention.check.interval.ms": "50",
    }


def wait_for(condition: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting until {what}")
        time.sleep(0.05)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tierlog-quickstart-") as workdir:
        data, remote = Path(workdir, "data"), Path(workdir, "remote")
        with EmbeddedCluster(1, data, broker_settings(remote)) as cluster:
            with Admin(cluster.transport) as admin:
                # Small segments that roll often; keep nothing locally once a segment is remote.
                configs = {
                    "remote.storage.enable": "true",
                    "segment.bytes": "4096",
                    "local.retention.bytes": "1",
                }
                admin.create_topics([NewTopic(TOPIC, 1, 1, configs=configs)])

            values = [f"event {n}: ".encode() + b"x" * 100 for n in range(300)]
            with Producer(cluster.transport, {"batch.size": 1024, "linger.ms": 0}) as producer:
                for value in values:
                    producer.send(TOPIC, value, partition=0)
                producer.flush()
            print(f"produced {len(values)} records to {TOPIC}-0")

            partition = cluster.broker(0).partition(TopicPartition(TOPIC, 0))
            assert partition is not None
            log = partition.log
            wait_for(lambda: log.local_log_start_offset > 0, "old segments leave the local disk")
            uploaded = sorted(p for p in remote.rglob("*") if p.is_file())
            print(
                f"tiered: offsets 0..{log.highest_offset_in_remote_storage} are in remote "
                f"storage ({len(uploaded)} objects under {remote}); the local log starts at "
                f"offset {log.local_log_start_offset}"
            )

            consumer = Consumer(cluster.transport, {"auto.offset.reset": "earliest"})
            consumer.assign([TopicPartition(TOPIC, 0)])
            consumed: list[bytes | None] = []
            deadline = time.monotonic() + 30
            while len(consumed) < len(values) and time.monotonic() < deadline:
                consumed.extend(record.value for record in consumer.poll(timeout_ms=500))
            consumer.close()
            if consumed != values:
                raise SystemExit(f"consumed {len(consumed)} records, expected {len(values)}")
            print(f"consumed all {len(consumed)} records from offset 0, remote and local alike")


if __name__ == "__main__":
    main()
