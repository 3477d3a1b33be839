"""Broker registration against a real ZooKeeper: epochs, duplicates, and lost sessions."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.retry import KazooRetry
from tierlog.coordination import paths
from tierlog.coordination.registration import (
    SESSION_RECORD,
    BrokerIdAlreadyRegisteredError,
    BrokerInfo,
    BrokerRegistration,
    registered_brokers,
    registration_data,
    watch_brokers,
)
from tierlog.coordination.zookeeper_server import ZooKeeperEnsemble
from tierlog.errors import InvalidConfigError

from .tcp_proxy import TcpProxy

SESSION_MS = 2000


def _until(condition: Callable[[], bool], timeout_s: float = 8.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.fixture
def connect(zk_chroot: str) -> Iterator[Callable[..., KazooClient]]:
    """Opens kazoo clients in the test's chroot and closes them all at the end."""
    clients: list[KazooClient] = []

    def open_client(hosts: str = zk_chroot, session_ms: int = SESSION_MS) -> KazooClient:
        client = KazooClient(
            hosts=hosts,
            timeout=session_ms / 1000,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=0.2),
        )
        client.start(timeout=10)
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        client.stop()
        client.close()


def test_registration_is_kafkas_node_and_its_czxid_is_the_epoch(
    connect: Callable[..., KazooClient],
) -> None:
    broker, observer = connect(), connect()
    registration = BrokerRegistration(
        broker, 3, ["PLAINTEXT://127.0.0.1:9093", "INTERNAL://10.0.0.1:9094"], rack="r1"
    )
    epoch = registration.register()
    try:
        data, stat = observer.get("/brokers/ids/3")
        assert epoch == stat.czxid == registration.epoch
        assert stat.ephemeralOwner == broker.client_id[0]
        node = json.loads(data)
        assert node["endpoints"] == ["PLAINTEXT://127.0.0.1:9093", "INTERNAL://10.0.0.1:9094"]
        assert node["listener_security_protocol_map"] == {
            "PLAINTEXT": "PLAINTEXT",
            "INTERNAL": "PLAINTEXT",
        }
        assert (node["host"], node["port"], node["jmx_port"]) == ("127.0.0.1", 9093, -1)
        assert node["rack"] == "r1"
        assert node["version"] == 5
        assert int(node["timestamp"]) > 0
        assert registered_brokers(observer) == {
            3: BrokerInfo(
                3, ("PLAINTEXT://127.0.0.1:9093", "INTERNAL://10.0.0.1:9094"), "r1", epoch
            )
        }
    finally:
        registration.close()


def test_registering_twice_on_one_session_keeps_the_epoch(
    connect: Callable[..., KazooClient],
) -> None:
    broker = connect()
    first = BrokerRegistration(broker, 1, ["PLAINTEXT://127.0.0.1:9092"])
    again = BrokerRegistration(broker, 1, ["PLAINTEXT://127.0.0.1:9092"])
    try:
        assert first.register() == again.register()
    finally:
        first.close()
        again.close()


def test_a_broker_id_held_by_another_broker_is_refused(
    connect: Callable[..., KazooClient],
) -> None:
    first = BrokerRegistration(connect(), 1, ["PLAINTEXT://127.0.0.1:9092"])
    first.register()
    second = BrokerRegistration(connect(), 1, ["PLAINTEXT://127.0.0.1:9093"])
    try:
        with pytest.raises(
            BrokerIdAlreadyRegisteredError, match=r"broker\.id 1 is already registered by another"
        ) as caught:
            second.register()
        assert isinstance(caught.value, InvalidConfigError)
        assert caught.value.key == "broker.id"
    finally:
        first.close()
        second.close()


def test_a_restart_after_a_crash_waits_for_the_registration_its_last_run_left(
    zookeeper: ZooKeeperEnsemble,
    zk_chroot: str,
    connect: Callable[..., KazooClient],
    tmp_path: Path,
) -> None:
    """The session record in the log dir tells the broker's own leftover node from another
    broker's: the first is waited for until ZooKeeper expires it, the second refused."""
    chroot = zk_chroot[len(zookeeper.connect_string) :]
    record = tmp_path / SESSION_RECORD
    observer = connect()
    with TcpProxy("127.0.0.1", zookeeper.nodes[0].client_port) as proxy:
        crashed = BrokerRegistration(
            connect(proxy.address + chroot),
            4,
            ["PLAINTEXT://127.0.0.1:9092"],
            session_record=record,
        )
        first_epoch = crashed.register()
        crashed.close()
        proxy.cut()  # the process is gone; its session lives on until it times out
        stranger = BrokerRegistration(connect(), 4, ["PLAINTEXT://127.0.0.1:9093"])
        with pytest.raises(BrokerIdAlreadyRegisteredError):
            stranger.register()
        restarted = BrokerRegistration(
            connect(), 4, ["PLAINTEXT://127.0.0.1:9092"], session_record=record
        )
        try:
            epoch = restarted.register()
            _, stat = observer.get("/brokers/ids/4")
            assert epoch == stat.czxid > first_epoch
            assert len(record.read_text().split()) == 2, "both sessions recorded"
        finally:
            restarted.close()
            stranger.close()


def test_bad_endpoints_are_refused() -> None:
    with pytest.raises(ValueError, match="NAME://host:port"):
        registration_data(["127.0.0.1:9092"])
    with pytest.raises(ValueError, match="no valid port"):
        registration_data(["PLAINTEXT://host:port"])
    with pytest.raises(ValueError, match="at least one endpoint"):
        registration_data([])


def test_clean_shutdown_removes_the_node_at_once(connect: Callable[..., KazooClient]) -> None:
    broker, observer = connect(), connect()
    registration = BrokerRegistration(broker, 2, ["PLAINTEXT://127.0.0.1:9092"])
    registration.register()
    gone = threading.Event()
    assert observer.exists("/brokers/ids/2", watch=lambda _event: gone.set()) is not None
    registration.deregister()
    # at once: well before the 10 s session timeout would remove it
    assert gone.wait(5), "the observer never saw the registration go"
    assert observer.exists("/brokers/ids/2") is None


def test_closing_the_session_removes_the_node(connect: Callable[..., KazooClient]) -> None:
    broker, observer = connect(), connect()
    registration = BrokerRegistration(broker, 2, ["PLAINTEXT://127.0.0.1:9092"])
    registration.register()
    registration.close()
    broker.stop()
    # at once: well before the 10 s session timeout would remove it
    assert _until(lambda: observer.exists("/brokers/ids/2") is None, 5)


def test_an_expired_session_registers_again_with_a_new_epoch(
    zookeeper: ZooKeeperEnsemble, zk_chroot: str, connect: Callable[..., KazooClient]
) -> None:
    chroot = zk_chroot[len(zookeeper.connect_string) :]
    port = zookeeper.nodes[0].client_port
    observer = connect()
    with TcpProxy("127.0.0.1", port) as proxy:
        broker = connect(proxy.address + chroot)
        registration = BrokerRegistration(broker, 7, ["PLAINTEXT://127.0.0.1:9092"])
        events: list[tuple[str, int | None]] = []
        reregistered = threading.Event()
        registration.on_suspended.append(lambda: events.append(("suspended", None)))
        registration.on_reconnected.append(lambda: events.append(("reconnected", None)))

        def on_reregistered(epoch: int) -> None:
            events.append(("reregistered", epoch))
            reregistered.set()

        registration.on_reregistered.append(on_reregistered)
        first_epoch = registration.register()
        try:
            proxy.cut()
            # The server hears nothing for a session timeout and ends the session.
            started = time.monotonic()
            assert _until(lambda: observer.exists("/brokers/ids/7") is None, 6)
            assert time.monotonic() - started >= SESSION_MS / 1000 * 0.5
            proxy.restore()
            assert reregistered.wait(8), f"no re-registration; events: {events}"
            data, stat = observer.get("/brokers/ids/7")
            assert stat.czxid == registration.epoch != first_epoch
            assert stat.czxid > first_epoch
            assert stat.ephemeralOwner == broker.client_id[0]
            assert events[0] == ("suspended", None)
            assert events[-1] == ("reregistered", stat.czxid)
            assert ("reconnected", None) not in events
            assert json.loads(data)["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
        finally:
            registration.close()


def test_a_short_disconnect_keeps_the_session_and_the_epoch(
    zookeeper: ZooKeeperEnsemble, zk_chroot: str, connect: Callable[..., KazooClient]
) -> None:
    chroot = zk_chroot[len(zookeeper.connect_string) :]
    with TcpProxy("127.0.0.1", zookeeper.nodes[0].client_port) as proxy:
        broker = connect(proxy.address + chroot, session_ms=6000)
        registration = BrokerRegistration(broker, 8, ["PLAINTEXT://127.0.0.1:9092"])
        suspended, reconnected = threading.Event(), threading.Event()
        registration.on_suspended.append(suspended.set)
        registration.on_reconnected.append(reconnected.set)
        reregistered: list[int] = []
        registration.on_reregistered.append(reregistered.append)
        epoch = registration.register()
        try:
            proxy.cut()
            assert suspended.wait(5)
            proxy.restore()
            assert reconnected.wait(5)
            assert broker.get("/brokers/ids/8")[1].czxid == epoch == registration.epoch
            assert reregistered == []
        finally:
            registration.close()


def test_watch_brokers_follows_arrivals_departures_and_new_epochs(
    connect: Callable[..., KazooClient],
) -> None:
    observer = connect()
    views: list[Mapping[int, BrokerInfo]] = []
    changed = threading.Condition()

    def on_change(brokers: Mapping[int, BrokerInfo]) -> None:
        with changed:
            views.append(brokers)
            changed.notify_all()

    def wait_for(check: Callable[[Mapping[int, BrokerInfo]], bool]) -> Mapping[int, BrokerInfo]:
        with changed:
            assert changed.wait_for(lambda: bool(views) and check(views[-1]), timeout=5), views
            return views[-1]

    watch = watch_brokers(observer, on_change)
    try:
        assert wait_for(lambda view: view == {}) == {}
        one = connect()
        r1 = BrokerRegistration(one, 1, ["PLAINTEXT://127.0.0.1:9092"])
        epoch1 = r1.register()
        two = connect()
        r2 = BrokerRegistration(two, 2, ["PLAINTEXT://127.0.0.1:9093"])
        epoch2 = r2.register()
        view = wait_for(lambda view: set(view) == {1, 2})
        assert (view[1].epoch, view[2].epoch) == (epoch1, epoch2)
        assert view[2].endpoints == ("PLAINTEXT://127.0.0.1:9093",)
        r1.close()
        one.stop()
        assert set(wait_for(lambda view: set(view) == {2})) == {2}
        # Broker 1 comes back: same id, new epoch.
        again = BrokerRegistration(connect(), 1, ["PLAINTEXT://127.0.0.1:9092"])
        new_epoch = again.register()
        assert wait_for(lambda view: 1 in view)[1].epoch == new_epoch != epoch1
        assert all(a != b for a, b in itertools.pairwise(views))
        r2.close()
        again.close()
    finally:
        watch.stop()
    assert paths.broker_path(1) == "/brokers/ids/1"
