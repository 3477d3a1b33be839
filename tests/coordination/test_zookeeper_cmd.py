"""``tierlog zookeeper`` as a real process: serves, says where, and stops on a signal."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from .conftest import require_zookeeper


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tierlog", "zookeeper", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _refuses_connections(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return True
    return False


@pytest.mark.parametrize(("nodes", "sig"), [(1, signal.SIGTERM), (3, signal.SIGINT)])
def test_serves_prints_the_connect_string_and_stops_on_a_signal(
    tmp_path: Path, nodes: int, sig: signal.Signals
) -> None:
    require_zookeeper()
    process = start("--port", "0", "--nodes", str(nodes), "--data-dir", str(tmp_path))
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("zookeeper.connect="), line
        connect = line.partition("=")[2]
        servers = connect.split(",")
        assert len(servers) == nodes
        client = KazooClient(hosts=connect)
        client.start(timeout=10)
        try:
            client.create("/from-cli-test", b"ok")
            assert client.get("/from-cli-test")[0] == b"ok"
        finally:
            client.stop()
            client.close()
        process.send_signal(sig)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert out == ""
    assert f"{nodes} ZooKeeper node(s) serving at {connect}" in err
    assert "ZooKeeper stopped" in err
    assert all(_refuses_connections(server) for server in servers)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"node-{i + 1}" for i in range(nodes)]


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    require_zookeeper()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = start("--port", str(port), "--data-dir", str(tmp_path))
        out, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: ZooKeeper node 1 (127.0.0.1:{port}) exited")
    assert "Address already in use" in lines[0]


def test_a_port_range_past_65535_is_refused(tmp_path: Path) -> None:
    process = start("--port", "65535", "--nodes", "3", "--data-dir", str(tmp_path))
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert err.strip() == "error: --port 65535 leaves no room for 3 nodes below 65536"
