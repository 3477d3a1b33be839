"""What only the ZooKeeper store does: Kafka's znode layout, fencing of a deposed controller,
saves larger than one request, and how long a takeover reads."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState
from tierlog.coordination.paths import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    partition_state_path,
    topic_path,
)
from tierlog.coordination.store import ClusterState, ControllerMovedError
from tierlog.coordination.zookeeper_server import ZooKeeperEnsemble
from tierlog.coordination.zookeeper_store import ZooKeeperMetadataStore
from tierlog.errors import NotControllerError
from tierlog.model import Uuid
from tierlog.server import protocol as p
from tierlog.server.image import PartitionRegistration, TopicImage

Connect = Callable[[], KazooClient]


@pytest.fixture
def connect(zk_chroot: str) -> Iterator[Connect]:
    """New sessions on the test's chroot, each closed at the end."""
    clients: list[KazooClient] = []

    def new_client() -> KazooClient:
        client = KazooClient(hosts=zk_chroot, timeout=10)
        client.start(timeout=10)
        clients.append(client)
        return client

    yield new_client
    for client in clients:
        client.stop()
        client.close()


def read_json(client: KazooClient, path: str) -> Any:
    return json.loads(client.get(path)[0])


def topic(name: str, partitions: int, replicas: tuple[int, ...] = (1, 2, 3)) -> TopicImage:
    regs = tuple(
        PartitionRegistration(
            replicas, replicas, leader=replicas[0], leader_epoch=3, partition_epoch=5
        )
        for _ in range(partitions)
    )
    return TopicImage(name, Uuid.random(), regs, configs={"cleanup.policy": "compact"})


def test_the_znodes_are_kafkas(connect: Connect) -> None:
    client = connect()
    store = ZooKeeperMetadataStore(client)
    claimed = store.claim(2, cluster_id="kafka-layout")
    moving = PartitionRegistration(
        (3, 1), (1,), 1, 7, 8, adding_replicas=(3,), removing_replicas=(1,)
    )
    orders = TopicImage(
        "orders",
        Uuid.random(),
        (PartitionRegistration((1, 2), (2, 1), 2, 4, 9), moving),
        configs={"retention.ms": "1000"},
    )
    store.save(
        attrs.evolve(
            claimed,
            topics={"orders": orders},
            broker_configs={"": {"log.retention.ms": "5"}, "1": {"num.io.threads": "4"}},
            next_producer_id=3000,
        )
    )

    assert read_json(client, "/cluster/id") == {"version": "1", "id": "kafka-layout"}
    controller = read_json(client, CONTROLLER)
    assert int(controller.pop("timestamp")) > 0
    assert controller == {"version": 1, "brokerid": 2, "epoch": 1}
    assert client.get(CONTROLLER)[1].ephemeralOwner == client.client_id[0]
    assert client.get(CONTROLLER_EPOCH)[0] == b"1"
    assert read_json(client, "/brokers/topics/orders") == {
        "version": 3,
        "topic_id": str(orders.topic_id),
        "partitions": {"0": [1, 2], "1": [3, 1]},
        "adding_replicas": {"1": [3]},
        "removing_replicas": {"1": [1]},
    }
    assert read_json(client, "/brokers/topics/orders/partitions/0/state") == {
        "controller_epoch": 1,
        "leader": 2,
        "version": 1,
        "leader_epoch": 4,
        "isr": [2, 1],
        "partition_epoch": 9,
    }
    assert read_json(client, "/config/topics/orders") == {
        "version": 1,
        "config": {"retention.ms": "1000"},
    }
    assert read_json(client, "/config/brokers/<default>") == {
        "version": 1,
        "config": {"log.retention.ms": "5"},
    }
    assert read_json(client, "/config/brokers/1") == {
        "version": 1,
        "config": {"num.io.threads": "4"},
    }
    assert read_json(client, "/latest_producer_id_block") == {
        "version": 1,
        "next_producer_id": 3000,
    }
    for path in ("/brokers/ids", "/brokers/topics", "/config/topics", "/config/brokers"):
        assert client.exists(path) is not None


def test_only_what_changed_is_written(connect: Connect) -> None:
    client = connect()
    store = ZooKeeperMetadataStore(client)
    claimed = store.claim(1)
    first, second = topic("first", 2), topic("second", 2)
    state = attrs.evolve(claimed, topics={"first": first, "second": second})
    store.save(state)
    versions = {
        path: client.exists(path).mzxid
        for path in (
            topic_path("first"),
            topic_path("second"),
            partition_state_path("first", 0),
            partition_state_path("first", 1),
            "/config/topics/first",
        )
    }
    isr_shrunk = attrs.evolve(first.partitions[1], isr=(1, 2), partition_epoch=6)
    store.save(
        attrs.evolve(
            state,
            topics={
                **state.topics,
                "first": attrs.evolve(first, partitions=(first.partitions[0], isr_shrunk)),
            },
        )
    )

    changed = {path for path, mzxid in versions.items() if client.exists(path).mzxid != mzxid}
    assert changed == {partition_state_path("first", 1)}
    assert read_json(client, partition_state_path("first", 1))["isr"] == [1, 2]


def test_a_second_controller_is_refused_while_the_first_holds_the_store(connect: Connect) -> None:
    first = ZooKeeperMetadataStore(connect())
    first.claim(1)

    with pytest.raises(ControllerMovedError, match=r"broker 1 .*epoch 1") as refused:
        ZooKeeperMetadataStore(connect()).claim(2)
    assert isinstance(refused.value, NotControllerError)
    assert refused.value.code == 41


def test_of_brokers_claiming_at_once_exactly_one_wins(connect: Connect) -> None:
    stores = [ZooKeeperMetadataStore(connect()) for _ in range(4)]
    start = threading.Barrier(len(stores))
    outcomes: dict[int, object] = {}

    def claim(broker_id: int) -> None:
        start.wait()
        try:
            outcomes[broker_id] = stores[broker_id].claim(broker_id).controller_epoch
        except ControllerMovedError as err:
            outcomes[broker_id] = err

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    winners = [b for b, outcome in outcomes.items() if outcome == 1]
    assert len(outcomes) == len(stores)
    assert len(winners) == 1
    assert all(isinstance(outcomes[b], ControllerMovedError) for b in outcomes if b not in winners)
    assert read_json(connect(), CONTROLLER)["brokerid"] == winners[0]


def expire_session(client: KazooClient, connect_string: str) -> None:
    """Ends ``client``'s session from the server side, as a network partition longer than the
    session timeout would; kazoo then connects again with a new session."""
    reconnected = threading.Event()
    lost = threading.Event()

    def listener(state: str) -> None:
        if state == KazooState.LOST:
            lost.set()
        elif state == KazooState.CONNECTED and lost.is_set():
            reconnected.set()

    client.add_listener(listener)
    session_id, password = client.client_id
    thief = KazooClient(hosts=connect_string, client_id=(session_id, password), timeout=10)
    thief.start(timeout=10)
    thief.stop()
    thief.close()
    assert reconnected.wait(20), "the client did not come back with a new session"
    client.remove_listener(listener)


def test_a_deposed_controller_writes_nothing(connect: Connect, zk_chroot: str) -> None:
    deposed_client = connect()
    deposed = ZooKeeperMetadataStore(deposed_client)
    state = deposed.claim(1)
    state = attrs.evolve(state, topics={"t": topic("t", 1)})
    deposed.save(state)
    expire_session(deposed_client, zk_chroot)

    successor = ZooKeeperMetadataStore(connect())
    taken_over = successor.claim(2)
    assert taken_over.controller_epoch == state.controller_epoch + 1
    assert taken_over.topics["t"].partitions == state.topics["t"].partitions

    observer = connect()
    before = observer.get(partition_state_path("t", 0))
    stale = attrs.evolve(state.topics["t"].partitions[0], leader=3, leader_epoch=9)
    with pytest.raises(ControllerMovedError):
        deposed.save(
            attrs.evolve(
                state,
                topics={"t": attrs.evolve(state.topics["t"], partitions=(stale,))},
                next_producer_id=1000,
            )
        )
    assert observer.get(partition_state_path("t", 0)) == before
    assert observer.exists("/latest_producer_id_block") is None
    assert read_json(observer, CONTROLLER)["brokerid"] == 2


def test_the_controller_epoch_fences_a_controller_whose_session_lives_on(connect: Connect) -> None:
    """An operator deleting /controller forces an election (as with Kafka); the old
    controller, still connected, can no longer write."""
    old = ZooKeeperMetadataStore(connect())
    state = old.claim(1)
    admin = connect()
    admin.delete(CONTROLLER)
    new = ZooKeeperMetadataStore(connect())
    assert new.claim(2).controller_epoch == 2

    with pytest.raises(ControllerMovedError, match="nothing was written"):
        old.save(attrs.evolve(state, topics={"t": topic("t", 1)}))
    assert admin.exists(topic_path("t")) is None
    assert admin.get(CONTROLLER_EPOCH)[0] == b"2"


def test_a_controller_that_resigns_lets_another_take_over_at_once(connect: Connect) -> None:
    first = ZooKeeperMetadataStore(connect())
    first.claim(1)
    first.resign()

    assert ZooKeeperMetadataStore(connect()).claim(2).controller_epoch == 2
    with pytest.raises(ControllerMovedError):
        first.save(ClusterState("any", 1, topics={}))


def test_a_save_larger_than_one_request_is_split(connect: Connect) -> None:
    client = connect()
    store = ZooKeeperMetadataStore(client, multi_bytes_limit=2000)
    claimed = store.claim(1)
    state = attrs.evolve(claimed, topics={"big": topic("big", 60), "small": topic("small", 1)})
    store.save(state)
    store.save(attrs.evolve(state, topics={"small": state.topics["small"]}))
    store.close()

    reloaded = ZooKeeperMetadataStore(connect()).claim(1)

    assert reloaded == attrs.evolve(
        state, controller_epoch=2, topics={"small": state.topics["small"]}
    )
    assert client.exists(topic_path("big")) is None


def test_a_missing_partition_state_loads_as_a_new_partition_without_leader(
    connect: Connect,
) -> None:
    """What a controller dying between the multis of a split save leaves behind."""
    client = connect()
    store = ZooKeeperMetadataStore(client)
    state = attrs.evolve(store.claim(1), topics={"t": topic("t", 2)})
    store.save(state)
    store.close()
    client.delete(partition_state_path("t", 1))

    successor = ZooKeeperMetadataStore(connect())
    reloaded = successor.claim(1)
    replicas = state.topics["t"].partitions[1].replicas
    assert reloaded.topics["t"].partitions == (
        state.topics["t"].partitions[0],
        PartitionRegistration(replicas, replicas, p.NO_LEADER, 0, 0),
    )
    # The next save writes it again.
    successor.save(reloaded)
    assert read_json(client, partition_state_path("t", 1))["leader"] == p.NO_LEADER


def test_a_takeover_reads_a_thousand_partitions_back_exactly(connect: Connect) -> None:
    """Its speed is the cluster benchmark's (controller takeover, 1,000 partitions)."""
    store = ZooKeeperMetadataStore(connect())
    claimed = store.claim(1)
    topics = {f"topic-{i}": topic(f"topic-{i}", 100) for i in range(10)}
    state = attrs.evolve(claimed, topics=topics)
    store.save(state)
    store.close()

    taken_over = ZooKeeperMetadataStore(connect()).claim(2)

    assert taken_over == attrs.evolve(state, controller_epoch=2)


@pytest.mark.slow
def test_saves_go_on_when_the_server_in_use_dies(zookeeper_ensemble: ZooKeeperEnsemble) -> None:
    hosts = zookeeper_ensemble.connect_string
    setup = KazooClient(hosts=hosts)
    setup.start(timeout=10)
    setup.create("/tierlog")
    setup.stop()
    setup.close()
    # Not randomized: the session starts on the first node, the one killed below.
    client = KazooClient(hosts=hosts + "/tierlog", randomize_hosts=False, timeout=10)
    client.start(timeout=10)
    try:
        store = ZooKeeperMetadataStore(client, retry_timeout_s=15)
        state = attrs.evolve(store.claim(1), topics={"t": topic("t", 3)})
        store.save(state)
        zookeeper_ensemble.kill(0)

        grown = attrs.evolve(state, topics={**state.topics, "u": topic("u", 2)})
        store.save(grown)
        store.close()

        assert ZooKeeperMetadataStore(client).claim(1) == attrs.evolve(grown, controller_epoch=2)
    finally:
        client.stop()
        client.close()
