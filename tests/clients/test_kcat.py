"""kcat, the command-line client many operators reach for first: metadata, produce, consume."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from tierlog.cluster import EmbeddedCluster

from .conftest import EARLIEST, OpenConsumer, create_topic, unique_topic

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")

#: kcat skips empty input lines, so there are none here.
LINES = ["first line", "zweite Zeile: äöü ß", "第三行", "\ttabbed", "the last one, with spaces  "]


def kcat(*args: str, stdin: str | None = None) -> str:
    """Runs kcat; its standard output (it fails the test on a non-zero exit)."""
    assert KCAT is not None
    done = subprocess.run(
        [KCAT, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"kcat {' '.join(args)} exited {done.returncode}: {done.stderr}"
    return done.stdout


def test_metadata_lists_the_broker_and_each_partition(shared_cluster: EmbeddedCluster) -> None:
    topic = unique_topic("listed")
    create_topic(shared_cluster, topic, 3)
    bootstrap = shared_cluster.bootstrap_servers

    listing = kcat("-b", bootstrap, "-L")

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    assert re.search(rf"^\s+broker 0 at {re.escape(host)}:{port}\b", listing, re.M), listing
    assert f'topic "{topic}" with 3 partitions:' in listing
    for partition in range(3):
        line = rf"^\s+partition {partition}, leader 0, replicas: 0, isrs: 0$"
        assert re.search(line, listing, re.M), listing


def test_lines_produced_with_kcat_are_consumed_back_exactly(
    shared_cluster: EmbeddedCluster, open_consumer: OpenConsumer
) -> None:
    topic = unique_topic("lines")
    create_topic(shared_cluster, topic, 1)
    bootstrap = shared_cluster.bootstrap_servers

    kcat("-P", "-b", bootstrap, "-t", topic, stdin="".join(f"{line}\n" for line in LINES))

    consumed = kcat("-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e")
    assert consumed == "".join(f"{line}\n" for line in LINES)
    placed = kcat("-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-f", "%p %o %s|")
    assert placed == "".join(f"0 {n} {line}|" for n, line in enumerate(LINES))
    # Another client reads the same records: what kcat sent is what the broker stored.
    consumer = open_consumer("confluent-kafka", bootstrap)
    consumer.assign({(topic, 0): EARLIEST})
    values = [r.value for r in consumer.read({(topic, 0): len(LINES)})]
    assert values == [line.encode() for line in LINES]
