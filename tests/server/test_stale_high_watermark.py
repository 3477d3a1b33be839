"""A leader elected after a crash does not answer "the end of the log" from a stale high watermark.

After a crash the new leader's high watermark comes from its checkpoint and can be far below
what the previous leader had committed. Kafka (KIP-207) answers ListOffsets LATEST and
timestamp lookups with the retriable OFFSET_NOT_AVAILABLE until the high watermark reaches the
offset where the leader's epoch began. Readers that take the answer as the end of the log (the
remote log metadata consumer above all) would otherwise stop early and act on half the data.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tierlog.cluster import EmbeddedCluster
from tierlog.errors import OffsetNotAvailableError
from tierlog.model import TopicPartition
from tierlog.server import protocol as p

from tests.server.conftest import Client
from tests.waiting import wait_until

RECORDS = 30
#: No periodic high watermark checkpoint: the crash leaves none behind.
SETTINGS = {"replica.high.watermark.checkpoint.interval.ms": str(3_600_000)}

_WRITER = textwrap.dedent(
    """
    import sys, time
    from tierlog.cluster import EmbeddedCluster
    from tierlog.client import Admin, NewTopic, Producer
    cluster = EmbeddedCluster(2, sys.argv[1], {settings!r})
    cluster.start()
    with Admin(cluster.transport) as admin:
        admin.create_topics([NewTopic("events", num_partitions=1, replication_factor=2)])
    with Producer(cluster.transport, {{"acks": "all"}}) as producer:
        for n in range({records}):
            producer.send("events", b"value-%d" % n).result()
    print("acknowledged", flush=True)
    time.sleep(600)
    """
)


def _crash_after_writing(data_dir: Path) -> None:
    """Writes RECORDS records with acks=all in a child process, then SIGKILLs it."""
    script = _WRITER.format(settings=SETTINGS, records=RECORDS)
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(data_dir)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"acknowledged\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


def test_latest_offset_waits_until_the_new_leader_knows_its_high_watermark(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    _crash_after_writing(data_dir)
    cluster = EmbeddedCluster(2, data_dir, SETTINGS)
    follower_fetches = cluster.transport.faults.add(
        lambda _broker, request: isinstance(request, p.FetchRequest) and request.replica_id >= 0,
        drop=True,
    )
    with cluster:
        client = Client(cluster)
        leader = cluster.broker(client.leader("events")).partition(TopicPartition("events", 0))
        assert leader is not None and leader.high_watermark < RECORDS
        assert not leader.high_watermark_known

        latest = client.list_offset("events", p.OffsetSpec.LATEST)
        assert latest.error_code == OffsetNotAvailableError.code
        by_time = client.list_offset("events", 0)
        assert by_time.error_code == OffsetNotAvailableError.code
        earliest = client.list_offset("events", p.OffsetSpec.EARLIEST)
        assert (earliest.error_code, earliest.offset) == (p.NONE, 0)

        cluster.transport.faults.remove(follower_fetches)
        wait_until(lambda: leader.high_watermark_known, "the follower to confirm the records")
        latest = client.list_offset("events", p.OffsetSpec.LATEST)
        assert (latest.error_code, latest.offset) == (p.NONE, RECORDS)
        first = client.list_offset("events", 0)
        assert (first.error_code, first.offset) == (p.NONE, 0)
