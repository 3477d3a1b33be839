"""The local ZooKeeper ensemble: it really serves, stops for good, and explains its failures."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from tierlog.coordination.zookeeper_server import (
    ZooKeeperEnsemble,
    ZooKeeperNotInstalledError,
    ZooKeeperServerError,
    four_letter_word,
)

from .conftest import require_zookeeper


def _connect(hosts: str) -> KazooClient:
    client = KazooClient(hosts=hosts)
    client.start(timeout=10)
    return client


def _refuses_connections(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return True
    return False


def test_single_node_serves_and_stops(tmp_path: Path) -> None:
    require_zookeeper()
    ensemble = ZooKeeperEnsemble(tmp_path, 1)
    with ensemble:
        (node,) = ensemble.nodes
        assert ensemble.connect_string == f"127.0.0.1:{node.client_port}"
        assert node.serving_mode() == "standalone"
        assert four_letter_word(node.host, node.client_port, "ruok") == "imok"
        client = _connect(ensemble.connect_string)
        try:
            client.create("/probe", b"value")
            assert client.get("/probe")[0] == b"value"
        finally:
            client.stop()
            client.close()
        assert (node.data_dir / "myid").read_text().strip() == "1"
        assert "admin.enableServer=false" in node.config_path.read_text()
    assert not node.running
    assert _refuses_connections(node.host, node.client_port)
    assert "binding to port" in node.log_path.read_text()
    ensemble.stop()  # a second stop is harmless


def test_data_survives_a_restart_of_the_node(tmp_path: Path) -> None:
    require_zookeeper()
    with ZooKeeperEnsemble(tmp_path, 1) as ensemble:
        client = _connect(ensemble.connect_string)
        client.create("/kept", b"1")
        client.stop()
        client.close()
        ensemble.kill(0)
        assert not ensemble.nodes[0].running
        ensemble.start_node(0)
        client = _connect(ensemble.connect_string)
        try:
            assert client.get("/kept")[0] == b"1"
        finally:
            client.stop()
            client.close()


def test_three_nodes_keep_serving_with_one_killed(
    zookeeper_ensemble: ZooKeeperEnsemble,
) -> None:
    modes = sorted(node.serving_mode() or "none" for node in zookeeper_ensemble.nodes)
    assert modes == ["follower", "follower", "leader"]
    leader = next(n.index for n in zookeeper_ensemble.nodes if n.serving_mode() == "leader")
    client = _connect(zookeeper_ensemble.connect_string)
    try:
        client.create("/before", b"a")
        zookeeper_ensemble.kill(leader)
        assert not zookeeper_ensemble.nodes[leader].running
        # The session survives the new election; a call caught in it fails with ConnectionLoss
        # and goes through on retry (an idempotent write, so a retry cannot apply it twice).
        client.retry(client.set, "/before", b"b")
        assert client.retry(client.get, "/before")[0] == b"b"
        survivors = [n for n in zookeeper_ensemble.nodes if n.index != leader]
        assert sorted(n.serving_mode() or "none" for n in survivors) == ["follower", "leader"]
        zookeeper_ensemble.start_node(leader)
        assert zookeeper_ensemble.nodes[leader].serving_mode() == "follower"
    finally:
        client.stop()
        client.close()


def test_a_node_that_cannot_start_is_reported_with_its_log(tmp_path: Path) -> None:
    require_zookeeper()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ensemble = ZooKeeperEnsemble(tmp_path, 1, client_port=taken.getsockname()[1])
        with pytest.raises(ZooKeeperServerError, match="last lines of") as caught:
            ensemble.start(timeout_s=20)
    assert "java.net.BindException: Address already in use" in caught.value.summary
    assert "\n" not in caught.value.summary
    assert caught.value.log_path == ensemble.nodes[0].log_path
    assert not ensemble.nodes[0].running


def test_a_free_port_taken_before_the_start_is_replaced(tmp_path: Path) -> None:
    require_zookeeper()
    ensemble = ZooKeeperEnsemble(tmp_path, 1)
    picked = ensemble.nodes[0].client_port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", picked))
        taken.listen()
        with ensemble:
            node = ensemble.nodes[0]
            assert node.client_port != picked
            assert node.serving_mode() == "standalone"
            assert ensemble.connect_string == f"127.0.0.1:{node.client_port}"
            assert "Address already in use" not in node.log_tail(1000)
    assert "Address already in use" in node.log_path.read_text()


def test_missing_jar_names_the_debian_package(tmp_path: Path) -> None:
    ensemble = ZooKeeperEnsemble(tmp_path, 1, jar=tmp_path / "no-zookeeper.jar")
    with pytest.raises(ZooKeeperNotInstalledError, match="Debian package 'zookeeper'"):
        ensemble.start()


def test_bad_sizes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1 node"):
        ZooKeeperEnsemble(tmp_path, 0)
    with pytest.raises(ValueError, match="client_port"):
        ZooKeeperEnsemble(tmp_path, 1, client_port=70000)
