"""The controller's metadata store: one suite, held against the file and the ZooKeeper store."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest
from kazoo.client import KazooClient
from tierlog.config import BrokerConfig
from tierlog.coordination.file_store import METADATA_FILE, FileMetadataStore
from tierlog.coordination.paths import CONTROLLER, topic_path
from tierlog.coordination.store import ClusterState, MetadataStore
from tierlog.coordination.zookeeper_store import ZooKeeperMetadataStore
from tierlog.errors import InvalidConfigError, KafkaStorageError, TierlogError
from tierlog.model import Uuid
from tierlog.server import protocol as p
from tierlog.server.controller import Controller
from tierlog.server.image import PartitionRegistration, TopicImage
from tierlog.server.transport import InProcessTransport


@attrs.define
class StoreFactory:
    """Opens stores on one place (a directory, a ZooKeeper chroot), each as a new process
    would: the ZooKeeper ones through a session of their own."""

    kind: str
    open: Callable[[], MetadataStore]
    #: Drops a store as a dead process would: no close, no resign.
    crash: Callable[[MetadataStore], None]
    #: Writes garbage where a store keeps ``topic``; returns the path an error must name.
    corrupt: Callable[[str], str]
    #: Makes every later save of the stores open now fail.
    break_saves: Callable[[], None]


@pytest.fixture(params=["file", "zookeeper"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    if request.param == "file":
        directory = tmp_path / "controller"

        def corrupt_file(_topic: str) -> str:
            (directory / METADATA_FILE).write_text('{"version": 1, "topics": ')
            return str(directory / METADATA_FILE)

        def break_file_saves() -> None:
            # Where the directory was, a file: nothing can be written there any more.
            for entry in directory.iterdir():
                entry.unlink()
            directory.rmdir()
            directory.write_bytes(b"")

        yield StoreFactory(
            "file",
            lambda: FileMetadataStore(directory),
            lambda _store: None,
            corrupt_file,
            break_file_saves,
        )
        return

    connect: str = request.getfixturevalue("zk_chroot")
    clients: list[KazooClient] = []
    sessions: dict[int, KazooClient] = {}

    def open_zookeeper() -> MetadataStore:
        client = KazooClient(hosts=connect, timeout=10)
        client.start(timeout=10)
        clients.append(client)
        store = ZooKeeperMetadataStore(client, retry_timeout_s=10)
        sessions[id(store)] = client
        return store

    def crash(store: MetadataStore) -> None:
        # The process is gone: its session ends without the store being closed.
        sessions[id(store)].stop()

    def corrupt_znode(topic: str) -> str:
        client = clients[-1]
        client.set(topic_path(topic), b"\x00not json")
        return f"{client.chroot}{topic_path(topic)}"

    def depose() -> None:
        # An operator forces an election and another broker wins it.
        clients[-1].delete(CONTROLLER)
        open_zookeeper().claim(99)

    yield StoreFactory("zookeeper", open_zookeeper, crash, corrupt_znode, depose)
    for client in clients:
        client.stop()
        client.close()


def registration(replicas: tuple[int, ...], **fields: object) -> PartitionRegistration:
    return attrs.evolve(PartitionRegistration(replicas=replicas, isr=replicas), **fields)


def a_state(claimed: ClusterState) -> ClusterState:
    """A cluster with something of everything the controller keeps."""
    orders = TopicImage(
        "orders",
        Uuid.random(),
        (
            registration((1, 2, 3), leader=1, leader_epoch=4, partition_epoch=9),
            registration((2, 3, 1), isr=(2, 3), leader=2, leader_epoch=1, partition_epoch=2),
            # Moving from 1, 2 to 3, 2 (KIP-455): the target first, then those leaving.
            registration(
                (3, 2, 1),
                isr=(2, 1),
                leader=2,
                leader_epoch=7,
                partition_epoch=11,
                adding_replicas=(3,),
                removing_replicas=(1,),
            ),
        ),
        configs={"retention.ms": "3600000", "remote.storage.enable": "true"},
    )
    offline = TopicImage("offline", Uuid.random(), (registration((3,), leader=p.NO_LEADER),), {})
    return attrs.evolve(
        claimed,
        topics={"orders": orders, "offline": offline},
        broker_configs={"": {"log.retention.ms": "60000"}, "2": {"log.cleaner.threads": "2"}},
        next_producer_id=5000,
    )


def reopened(factory: StoreFactory, previous: MetadataStore) -> tuple[MetadataStore, ClusterState]:
    previous.close()
    store = factory.open()
    return store, store.claim(1)


def test_a_new_store_starts_a_new_cluster_with_a_fresh_id(store_factory: StoreFactory) -> None:
    store = store_factory.open()

    state = store.claim(1)

    assert Uuid.from_string(state.cluster_id)
    assert state == ClusterState(state.cluster_id, 1, topics={})
    assert state.next_producer_id == 0
    store.close()


def test_a_new_cluster_takes_the_configured_id(store_factory: StoreFactory) -> None:
    store = store_factory.open()

    state = store.claim(1, cluster_id="the-cluster")
    store, again = reopened(store_factory, store)

    assert state.cluster_id == again.cluster_id == "the-cluster"
    store.close()


def test_everything_saved_is_there_after_a_restart(store_factory: StoreFactory) -> None:
    store = store_factory.open()
    saved = a_state(store.claim(1))
    store.save(saved)

    store, reloaded = reopened(store_factory, store)

    assert reloaded == attrs.evolve(saved, controller_epoch=2)
    assert reloaded.topics["orders"].topic_id == saved.topics["orders"].topic_id
    assert dict(reloaded.topics["orders"].configs) == dict(saved.topics["orders"].configs)
    assert reloaded.topics["orders"].partitions[2].removing_replicas == (1,)
    store.close()


def test_each_change_is_kept(store_factory: StoreFactory) -> None:
    store = store_factory.open()
    state = a_state(store.claim(1))
    store.save(state)
    orders = state.topics["orders"]
    moved = attrs.evolve(
        orders.partitions[2],
        replicas=(3, 2),
        isr=(3, 2),
        adding_replicas=(),
        removing_replicas=(),
        leader=3,
        leader_epoch=8,
        partition_epoch=12,
    )
    grown = TopicImage(
        "orders",
        orders.topic_id,
        (orders.partitions[0], orders.partitions[1], moved, registration((1, 2), leader=1)),
        configs={"retention.ms": "7200000"},
    )
    changed = attrs.evolve(
        state,
        topics={**state.topics, "orders": grown},
        broker_configs={"2": {"log.cleaner.threads": "4"}, "3": {"num.io.threads": "9"}},
        next_producer_id=6000,
    )
    store.save(changed)

    store, reloaded = reopened(store_factory, store)

    assert reloaded == attrs.evolve(changed, controller_epoch=2)
    store.close()


def test_the_controller_epoch_grows_with_every_claim(store_factory: StoreFactory) -> None:
    epochs = []
    store = store_factory.open()
    for _ in range(3):
        epochs.append(store.claim(1).controller_epoch)
        store.close()
        store = store_factory.open()

    assert epochs == [1, 2, 3]
    store.close()


def test_a_deleted_topic_is_gone_after_a_restart(store_factory: StoreFactory) -> None:
    store = store_factory.open()
    state = a_state(store.claim(1))
    store.save(state)
    recreated = TopicImage("offline", Uuid.random(), (registration((1, 2)),), {})
    store.save(attrs.evolve(state, topics={"offline": recreated}))

    store, reloaded = reopened(store_factory, store)

    assert list(reloaded.topics) == ["offline"]
    assert reloaded.topics["offline"].topic_id == recreated.topic_id
    assert reloaded.topics["offline"].partitions == recreated.partitions
    store.close()


def test_data_of_another_cluster_is_refused(store_factory: StoreFactory) -> None:
    store = store_factory.open()
    store.claim(1, cluster_id="first")
    store.close()

    other = store_factory.open()
    with pytest.raises(InvalidConfigError, match="'first'") as refused:
        other.claim(1, cluster_id="second")
    assert refused.value.key == "cluster.id"
    # Refused before anything was written: the next claim is the second.
    assert other.claim(1, cluster_id="first").controller_epoch == 2
    other.close()


def test_unreadable_data_names_where_it_is(store_factory: StoreFactory) -> None:
    store = store_factory.open()
    store.save(a_state(store.claim(1)))
    where = store_factory.corrupt("orders")
    store.close()

    with pytest.raises(KafkaStorageError, match="not valid cluster metadata") as failed:
        store_factory.open().claim(1)
    assert where in str(failed.value)


def test_the_next_producer_id_survives_a_crash(store_factory: StoreFactory) -> None:
    store = store_factory.open()
    state = store.claim(1)
    store.save(attrs.evolve(state, next_producer_id=2000))
    store_factory.crash(store)

    successor = store_factory.open()
    taken_over = successor.claim(2)

    assert taken_over.next_producer_id == 2000
    assert taken_over.controller_epoch == 2
    successor.close()


def test_a_controller_comes_back_with_its_topics(store_factory: StoreFactory) -> None:
    config = BrokerConfig.from_mapping({"broker.id": 1})
    store = store_factory.open()
    controller = Controller(config, store, InProcessTransport(), (0, 1, 2))
    controller.register_broker(1)
    created = controller.create_topic("events", 2, 1)
    first_block = controller.allocate_producer_ids(1)
    store.close()

    store = store_factory.open()
    again = Controller(config, store, InProcessTransport(), (0, 1, 2))
    image = again.image()
    topic = image.topic("events")

    assert topic is not None
    assert topic.topic_id == created.topic_id
    assert [reg.replicas for reg in topic.partitions] == [r.replicas for r in created.partitions]
    # Nobody leads until its broker registers with this controller.
    assert {reg.leader for reg in topic.partitions} == {p.NO_LEADER}
    assert image.controller_epoch == controller.image().controller_epoch + 1
    assert again.allocate_producer_ids(1).first_producer_id == first_block.next_block_first_id
    store.close()


def test_a_failed_save_leaves_the_controller_as_the_store_is(store_factory: StoreFactory) -> None:
    store = store_factory.open()
    controller = Controller(
        BrokerConfig.from_mapping({"broker.id": 1}), store, InProcessTransport(), (1,)
    )
    controller.register_broker(1)
    controller.create_topic("kept", 1, 1)
    store_factory.break_saves()

    with pytest.raises(TierlogError) as first:
        controller.create_topic("lost", 1, 1)
    # Not "already exists": the controller forgot the topic it could not save.
    with pytest.raises(type(first.value)):
        controller.create_topic("lost", 1, 1)
    assert set(controller.image().topics) == {"kept"}


def test_the_file_keeps_its_format(tmp_path: Path) -> None:
    """Data dirs written before the store existed must load: the same file, the same JSON."""
    directory = tmp_path / "controller"
    directory.mkdir()
    topic_id = Uuid.random()
    old = {
        "version": 1,
        "cluster_id": "old-cluster",
        "controller_epoch": 6,
        "topics": {
            "t": {
                "topic_id": str(topic_id),
                "configs": {},
                "partitions": [
                    {"replicas": [0], "isr": [0], "leader": 0, "leader_epoch": 2,
                     "partition_epoch": 3}
                ],
            }
        },
    }  # fmt: skip
    (directory / METADATA_FILE).write_text(json.dumps(old))
    store = FileMetadataStore(directory)

    state = store.claim(0)

    assert state == ClusterState(
        "old-cluster",
        7,
        topics={"t": TopicImage("t", topic_id, (PartitionRegistration((0,), (0,), 0, 2, 3),), {})},
    )
    written = json.loads((directory / METADATA_FILE).read_text())
    assert written == {**old, "controller_epoch": 7, "broker_configs": {}, "next_producer_id": 0}
