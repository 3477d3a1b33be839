"""``tierlog run`` as a real process, stopped by a real signal, reached by real Kafka clients."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families
from tierlog.cluster import EmbeddedCluster
from tierlog.log import files

from .conftest import Client, batch, values

RUN = "from tierlog.cli.run_cmd import run_command; run_command()"
#: Never the default port 9092: every test listens on a free port.
ANY_PORT = "listeners=PLAINTEXT://127.0.0.1:0\n"


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", RUN, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until_serving(process: subprocess.Popen[str]) -> list[str]:
    """Reads the process's stderr up to the line saying it serves (or to its end)."""
    assert process.stderr is not None
    lines = []
    for line in process.stderr:
        lines.append(line)
        if "serving" in line:
            break
    return lines


@pytest.mark.parametrize(
    ("file_name", "text", "sig"),
    [
        (
            "server.toml",
            'cluster.id = "run-test"\nnum.partitions = 2\nlisteners = ["PLAINTEXT://127.0.0.1:0"]\n',
            signal.SIGTERM,
        ),
        ("server.properties", f"cluster.id=run-test\nnum.partitions=2\n{ANY_PORT}", signal.SIGINT),
    ],
)
def test_run_serves_until_signalled_then_shuts_down_cleanly(
    tmp_path: Path, file_name: str, text: str, sig: signal.Signals
) -> None:
    data_dir = tmp_path / "data"
    with EmbeddedCluster(2, data_dir, {"cluster.id": "run-test"}) as cluster:
        client = Client(cluster)
        client.create("kept", partitions=2)
        client.produce("kept", 1, batch(2, tag="kept"))
    config = tmp_path / file_name
    config.write_text(text)

    process = start("--config", str(config), "--brokers", "2", "--data-dir", str(data_dir))
    started = wait_until_serving(process)
    process.send_signal(sig)
    _out, rest = process.communicate(timeout=120)

    assert any("2 broker(s) serving, cluster id run-test" in line for line in started), started
    assert process.returncode == 0, rest
    assert "stopped" in rest
    markers = sorted(
        p.parent.name for p in data_dir.glob(f"broker-*/logs/*/{files.CLEAN_SHUTDOWN_MARKER}")
    )
    assert markers == ["kept-0", "kept-1"]
    with EmbeddedCluster(2, data_dir) as cluster:
        assert values(Client(cluster).fetch("kept", 1).records) == [b"kept-0", b"kept-1"]


def test_run_refuses_a_bad_config_file(tmp_path: Path) -> None:
    config = tmp_path / "server.toml"
    config.write_text("num.partitions = 0\n")

    process = start("--config", str(config), "--data-dir", str(tmp_path / "data"))
    _out, err = process.communicate(timeout=120)

    assert process.returncode == 2
    assert "num.partitions" in err
    assert not (tmp_path / "data").exists()


def test_run_serves_kafka_clients_and_every_brokers_metrics(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(f"{ANY_PORT}metrics.prometheus.port=0\n")

    process = start("--config", str(config), "--brokers", "2", "--data-dir", str(tmp_path / "d"))
    try:
        started = "".join(wait_until_serving(process))
        servers = re.search(r"bootstrap servers (\S+)", started)
        url = re.search(r"metrics at (http://127\.0\.0\.1:(\d+)/metrics)", started)
        assert servers is not None and url is not None, started
        bootstrap = servers[1].split(",")
        assert len(bootstrap) == 2 and all(b.startswith("127.0.0.1:") for b in bootstrap)
        assert len(set(bootstrap)) == 2 and int(url[2]) > 0  # real ports, not 0

        admin = KafkaAdminClient(bootstrap_servers=servers[1])
        # partition 0 led by broker 0, partition 1 by broker 1
        admin.create_topics([NewTopic("t", replica_assignments={0: [0, 1], 1: [1, 0]})])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=servers[1], enable_idempotence=False, acks="all")
        sent = {(b"k%d" % n, b"v%d" % n) for n in range(200)}
        for key, value in sorted(sent):
            producer.send("t", key=key, value=value)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(
            bootstrap_servers=servers[1],
            group_id=None,
            auto_offset_reset="earliest",
            consumer_timeout_ms=5000,
        )
        consumer.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
        got = {(m.key, m.value) for m in consumer}
        consumer.close()
        with urllib.request.urlopen(url[1], timeout=10) as response:
            scraped = response.read().decode("utf-8")
    finally:
        process.send_signal(signal.SIGTERM)
        _out, rest = process.communicate(timeout=120)

    assert got == sent
    requests: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(scraped):
        if family.name == "tierlog_requestmetrics_requestspersec":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    key = (sample.labels["broker"], sample.labels["request"])
                    requests[key] = requests.get(key, 0) + sample.value
    # both leaders took produce requests and answered fetches, each under its own broker label
    assert {request for _broker, request in requests} >= {"Produce", "Fetch", "Metadata"}
    for request in ("Produce", "Fetch"):
        assert {b for b, r in requests if r == request} == {"0", "1"}, requests
        assert all(v > 0 for (b, r), v in requests.items() if r == request)
    assert process.returncode == 0, rest
    assert "stopped" in rest


def test_run_with_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for text in (
            f"listeners=PLAINTEXT://127.0.0.1:{port}\n",
            f"{ANY_PORT}metrics.prometheus.port={port}\n",
        ):
            config = tmp_path / "server.properties"
            config.write_text(text)
            process = start("--config", str(config), "--data-dir", str(tmp_path / "data"))
            _out, err = process.communicate(timeout=120)

            assert process.returncode == 2, err
            assert len(err.splitlines()) == 1, err
            assert err.startswith("error: ") and f"127.0.0.1:{port}" in err, err
            assert "Address already in use" in err, err
