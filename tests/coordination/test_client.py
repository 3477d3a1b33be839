"""``zookeeper.connect`` parsing, and the broker's ZooKeeper session against a real server."""

from __future__ import annotations

import time
import uuid

import pytest
from kazoo.client import KazooClient
from tierlog.config import BrokerConfig
from tierlog.coordination.client import (
    ZooKeeperClientTimeoutError,
    ZooKeeperConnect,
    parse_connect,
    zookeeper_client,
)
from tierlog.coordination.zookeeper_server import ZooKeeperEnsemble, find_free_port
from tierlog.errors import InvalidConfigError, RequestTimedOutError


@pytest.mark.parametrize(
    ("text", "hosts", "chroot"),
    [
        ("127.0.0.1:2181", (("127.0.0.1", 2181),), None),
        ("zk1:2181,zk2:2182/tierlog", (("zk1", 2181), ("zk2", 2182)), "/tierlog"),
        (" zk1 , zk2:3000/a/b ", (("zk1", 2181), ("zk2", 3000)), "/a/b"),
        ("[::1]:2181,[fe80::1]/kafka", (("::1", 2181), ("fe80::1", 2181)), "/kafka"),
        ("zk:2181/", (("zk", 2181),), None),
    ],
)
def test_connect_strings_parse_as_zookeeper_reads_them(
    text: str, hosts: tuple[tuple[str, int], ...], chroot: str | None
) -> None:
    parsed = parse_connect(text)
    assert parsed == ZooKeeperConnect(hosts, chroot)
    assert parse_connect(str(parsed)) == parsed


def test_servers_render_for_kazoo() -> None:
    parsed = parse_connect("a:1,[::1]:2/root")
    assert parsed.servers == "a:1,[::1]:2"
    assert str(parsed) == "a:1,[::1]:2/root"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "it is empty"),
        ("   ", "it is empty"),
        ("zk:21x81", "not a number"),
        ("zk:0", "outside 1-65535"),
        ("zk:65536", "outside 1-65535"),
        ("zk1:2181,,zk2:2181", "missing between commas"),
        (":2181", "has no host"),
        ("::1:2181", "IPv6 address in brackets"),
        ("[::1:2181", "unclosed"),
        ("[zk]:2181", "not an IPv6 address"),
        ("zk:2181/tierlog/", "must not end with '/'"),
        ("zk:2181/a//b", "empty path component"),
        ("zk:2181/a/../b", "'..'"),
        ("zk:2181/a\x01b", "control character"),
    ],
)
def test_bad_connect_strings_are_refused_naming_the_key(text: str, problem: str) -> None:
    with pytest.raises(InvalidConfigError, match=r"zookeeper\.connect") as caught:
        parse_connect(text)
    assert problem in str(caught.value)
    assert caught.value.key == "zookeeper.connect"


def test_client_needs_zookeeper_connect() -> None:
    with pytest.raises(InvalidConfigError, match=r"zookeeper\.connect is not set"):
        zookeeper_client(BrokerConfig.from_mapping({}))


def test_connection_timeout_defaults_to_the_session_timeout() -> None:
    from tierlog.config.broker import effective_zookeeper_connection_timeout_ms

    config = BrokerConfig.from_mapping({"zookeeper.session.timeout.ms": 7000})
    assert config["zookeeper.session.timeout.ms"] == 7000
    assert config["zookeeper.connection.timeout.ms"] is None
    assert effective_zookeeper_connection_timeout_ms(config.snapshot()) == 7000
    config = BrokerConfig.from_mapping({"zookeeper.connection.timeout.ms": 500})
    assert effective_zookeeper_connection_timeout_ms(config.snapshot()) == 500
    assert BrokerConfig.from_mapping({})["zookeeper.session.timeout.ms"] == 18000


def test_client_creates_its_chroot_and_stays_inside_it(zookeeper: ZooKeeperEnsemble) -> None:
    chroot = f"/tierlog-{uuid.uuid4().hex}/cluster-a"
    config = BrokerConfig.from_mapping(
        {"zookeeper.connect": zookeeper.connect_string + chroot, "broker.id": 1}
    )
    client = zookeeper_client(config)
    try:
        assert client.connected
        client.create("/cluster/id", b"abc", makepath=True)
    finally:
        client.stop()
        client.close()
    root = KazooClient(hosts=zookeeper.connect_string)
    root.start(timeout=10)
    try:
        assert root.get(f"{chroot}/cluster/id")[0] == b"abc"
        assert root.exists("/cluster/id") is None
    finally:
        root.stop()
        root.close()


def test_client_uses_the_session_timeout(zookeeper: ZooKeeperEnsemble) -> None:
    config = BrokerConfig.from_mapping(
        {"zookeeper.connect": zookeeper.connect_string, "zookeeper.session.timeout.ms": 4000}
    )
    client = zookeeper_client(config)
    try:
        # The server agreed to the broker's session timeout (it is within its bounds).
        assert client._session_timeout == 4000
    finally:
        client.stop()
        client.close()


def test_unreachable_servers_time_out_naming_them() -> None:
    dead = f"127.0.0.1:{find_free_port()}"
    config = BrokerConfig.from_mapping(
        {"zookeeper.connect": f"{dead}/tierlog", "zookeeper.connection.timeout.ms": 400}
    )
    started = time.monotonic()
    with pytest.raises(ZooKeeperClientTimeoutError, match=dead) as caught:
        zookeeper_client(config)
    assert time.monotonic() - started < 5
    assert isinstance(caught.value, RequestTimedOutError)
    assert "400 ms" in str(caught.value)
