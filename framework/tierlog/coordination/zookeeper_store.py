"""The controller's state in ZooKeeper, in the data model Kafka ran on for a decade.

Brokers in separate processes elect their controller through ZooKeeper, and whichever broker
wins must find everything its predecessor decided. The znodes (under the chroot of
``zookeeper.connect``) are Kafka's:

- ``/cluster/id``: ``{"version":"1","id":...}``, created once.
- ``/controller`` (ephemeral): ``{"version":1,"brokerid":N,"timestamp":"ms","epoch":E}``
  (Kafka's, with the epoch it won, for operators); created in the same
  multi that bumps ``/controller_epoch`` (the epoch as text), whose zkVersion is the fencing
  token: every write of the controller is one multi starting with a check of it, so a
  controller that another has replaced writes nothing (KAFKA-6082).
- ``/brokers/topics/<topic>``: ``{"version":3,"topic_id":...,"partitions":{"0":[1,2],...},
  "adding_replicas":{...},"removing_replicas":{...}}`` (only reassigning partitions listed).
- ``/brokers/topics/<topic>/partitions/<p>/state``: ``{"controller_epoch":E,"leader":L,
  "version":1,"leader_epoch":LE,"isr":[...],"partition_epoch":PE}``; a state without
  ``partition_epoch`` (as Kafka writes it) takes the znode version instead.
- ``/config/topics/<topic>``, ``/config/brokers/<id>`` and ``/config/brokers/<default>``:
  ``{"version":1,"config":{...}}``.
- ``/latest_producer_id_block``: ``{"version":1,"next_producer_id":N}``, the first id of the
  next block (KIP-730), absent until a block is handed out. tierlog keeps only the counter, so
  the znode holds it rather than Kafka's description of the last block.

A save writes only the znodes that changed. A save too large for one ZooKeeper request
(``jute.maxbuffer``) goes out as several fenced multis; a controller dying between them leaves
partitions whose state znode is missing, which load as new partitions without a leader, as
Kafka's controller treats them.

Taking over reads every znode with pipelined asynchronous reads, so a cluster of a thousand
partitions loads in a fraction of a second (the cost Kafka's KIP-500 names grows with the
partition count). The kazoo client stays the caller's: the broker's one session also holds its
``/brokers/ids`` registration, and ``/controller`` lives exactly as long as that session.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

import attrs
from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
)

from ..errors import KafkaStorageError
from ..model import Uuid
from ..server import protocol as p
from ..server.image import PartitionRegistration, TopicImage
from ..server.producer_ids import MAX_PRODUCER_ID
from . import paths
from .paths import (
    BROKER_CONFIGS,
    BROKER_TOPICS,
    CLUSTER_ID,
    CONTROLLER,
    CONTROLLER_EPOCH,
    DEFAULT_BROKER_CONFIG,
    PERSISTENT_PARENTS,
    PRODUCER_ID_BLOCK,
    TOPIC_CONFIGS,
    partition_path,
    partition_state_path,
    partitions_path,
    topic_config_path,
    topic_path,
)
from .store import (
    ClusterState,
    ControllerMovedError,
    MetadataStore,
    check_cluster_id,
    unreadable_reason,
)

log = logging.getLogger(__name__)

#: How many bytes of operations one multi carries at most: half ZooKeeper's default request
#: limit (``jute.maxbuffer``, 1 MiB), leaving room for the encoding.
MULTI_BYTES_LIMIT: Final = 512 * 1024
#: What one operation costs in a multi besides its path and data (header, ACL, flags).
_OP_OVERHEAD: Final = 48

T = TypeVar("T")


def _broker_config_path(resource: str) -> str:
    """``resource`` is a broker id, or ``''`` for the cluster-wide default."""
    return paths.broker_config_path(int(resource) if resource else None)


# --- the JSON of each znode -------------------------------------------------------------------


def _encode(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def _decode(raw: bytes) -> dict[str, Any]:
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError(f"a JSON object was expected, not {type(data).__name__}")
    return data


def _brokers(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ValueError(f"a list of broker ids was expected, not {value!r}")
    return tuple(int(b) for b in value)


def _topic_json(topic: TopicImage) -> bytes:
    regs = list(enumerate(topic.partitions))
    return _encode(
        {
            "version": 3,
            "topic_id": str(topic.topic_id),
            "partitions": {str(i): list(reg.replicas) for i, reg in regs},
            "adding_replicas": {str(i): list(r.adding_replicas) for i, r in regs if r.reassigning},
            "removing_replicas": {
                str(i): list(r.removing_replicas) for i, r in regs if r.reassigning
            },
        }
    )


@attrs.frozen
class _Assignment:
    """A topic znode: the topic id, and per partition its replicas, those being added and
    those being removed."""

    topic_id: Uuid
    partitions: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...]


def _assignment_from_json(raw: bytes) -> _Assignment:
    data = _decode(raw)
    replicas = {int(k): _brokers(v) for k, v in data["partitions"].items()}
    if sorted(replicas) != list(range(len(replicas))):
        raise ValueError(f"partitions {sorted(replicas)} are not numbered 0..n-1")
    adding = {int(k): _brokers(v) for k, v in (data.get("adding_replicas") or {}).items()}
    removing = {int(k): _brokers(v) for k, v in (data.get("removing_replicas") or {}).items()}
    return _Assignment(
        topic_id=Uuid.from_string(data["topic_id"]),
        partitions=tuple(
            (replicas[i], adding.get(i, ()), removing.get(i, ())) for i in range(len(replicas))
        ),
    )


def _state_json(reg: PartitionRegistration, controller_epoch: int) -> bytes:
    return _encode(
        {
            "controller_epoch": controller_epoch,
            "leader": reg.leader,
            "version": 1,
            "leader_epoch": reg.leader_epoch,
            "isr": list(reg.isr),
            "partition_epoch": reg.partition_epoch,
        }
    )


def _registration(
    assigned: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]],
    raw: bytes,
    version: int,
) -> PartitionRegistration:
    replicas, adding, removing = assigned
    data = _decode(raw)
    return PartitionRegistration(
        replicas=replicas,
        isr=_brokers(data["isr"]),
        leader=int(data["leader"]),
        leader_epoch=int(data["leader_epoch"]),
        partition_epoch=int(data.get("partition_epoch", version)),
        adding_replicas=adding,
        removing_replicas=removing,
    )


def _broker_id(name: bytes) -> int:
    return paths.broker_id_from_node(name.decode())


def _config_json(config: Mapping[str, str]) -> bytes:
    return _encode({"version": 1, "config": dict(config)})


def _config_from_json(raw: bytes) -> dict[str, str]:
    config = _decode(raw)["config"]
    if not isinstance(config, dict):
        raise ValueError(f"config is not an object: {config!r}")
    return {str(k): str(v) for k, v in config.items()}


def _cluster_id_json(cluster_id: str) -> bytes:
    return _encode({"version": "1", "id": cluster_id})


def _cluster_id_from_json(raw: bytes) -> str:
    cluster_id = _decode(raw)["id"]
    if not isinstance(cluster_id, str) or not cluster_id:
        raise ValueError(f"id {cluster_id!r} is not a cluster id")
    return cluster_id


def _producer_id_block_json(next_producer_id: int) -> bytes:
    return _encode({"version": 1, "next_producer_id": next_producer_id})


def _producer_id_block_from_json(raw: bytes) -> int:
    next_producer_id = int(_decode(raw)["next_producer_id"])
    if not 0 <= next_producer_id <= MAX_PRODUCER_ID + 1:
        raise ValueError(f"next_producer_id {next_producer_id} is out of range")
    return next_producer_id


# --- writes -------------------------------------------------------------------------------------


@attrs.frozen
class _Op:
    kind: str  # "create", "set" or "delete"
    path: str
    data: bytes = b""

    @property
    def size(self) -> int:
        return len(self.path) + len(self.data) + _OP_OVERHEAD


class _Plan:
    """The operations that take ZooKeeper from one state to the next, tracking which znodes
    exist as they are planned (a changed value is a set, a new one a create)."""

    def __init__(self, existing: set[str]) -> None:
        self.existing = set(existing)
        self.ops: list[_Op] = []

    def put(self, path: str, data: bytes) -> None:
        self.ops.append(_Op("set" if path in self.existing else "create", path, data))
        self.existing.add(path)

    def ensure(self, path: str) -> None:
        if path not in self.existing:
            self.ops.append(_Op("create", path))
            self.existing.add(path)

    def delete(self, path: str) -> None:
        if path in self.existing:
            self.ops.append(_Op("delete", path))
            self.existing.discard(path)

    def delete_tree(self, path: str) -> None:
        """Deletes ``path`` and every znode known under it, deepest first."""
        below = [known for known in self.existing if known.startswith(path + "/")]
        for known in sorted(below, key=lambda k: k.count("/"), reverse=True):
            self.delete(known)
        self.delete(path)


def _leadership(reg: PartitionRegistration) -> tuple[object, ...]:
    return reg.isr, reg.leader, reg.leader_epoch, reg.partition_epoch


def _replica_sets(topic: TopicImage) -> tuple[object, ...]:
    return topic.topic_id, tuple(
        (reg.replicas, reg.adding_replicas, reg.removing_replicas) for reg in topic.partitions
    )


def _plan(
    before: ClusterState,
    after: ClusterState,
    existing: set[str],
    incomplete: set[str],
    controller_epoch: int,
) -> _Plan:
    """What to write so that ZooKeeper, holding ``before`` in the znodes ``existing``, holds
    ``after``; the topics named in ``incomplete`` miss znodes, written again here. Znodes are
    written parents first, so any prefix of the plan leaves a tree that loads."""
    plan = _Plan(existing)
    for name in sorted(before.topics.keys() - after.topics.keys()):
        plan.delete_tree(topic_path(name))
        plan.delete(topic_config_path(name))
    for name, topic in sorted(after.topics.items()):
        old = before.topics.get(name)
        if (
            old is not None
            and old == topic
            and dict(old.configs) == dict(topic.configs)
            and name not in incomplete
        ):
            continue
        if old is not None and old.topic_id != topic.topic_id:
            plan.delete_tree(topic_path(name))
            old = None
        if (
            old is None
            or _replica_sets(old) != _replica_sets(topic)
            or topic_path(name) not in plan.existing
        ):
            plan.put(topic_path(name), _topic_json(topic))
        plan.ensure(partitions_path(name))
        for index, reg in enumerate(topic.partitions):
            state_path = partition_state_path(name, index)
            if (
                old is not None
                and index < len(old.partitions)
                and _leadership(old.partitions[index]) == _leadership(reg)
                and state_path in plan.existing
            ):
                continue
            plan.ensure(partition_path(name, index))
            plan.put(state_path, _state_json(reg, controller_epoch))
        if old is not None:
            for index in reversed(range(len(topic.partitions), len(old.partitions))):
                plan.delete_tree(partition_path(name, index))
        config_path = topic_config_path(name)
        if (
            old is None
            or dict(old.configs) != dict(topic.configs)
            or config_path not in plan.existing
        ):
            plan.put(config_path, _config_json(topic.configs))
    for resource in sorted(before.broker_configs.keys() - after.broker_configs.keys()):
        plan.delete(_broker_config_path(resource))
    for resource, config in sorted(after.broker_configs.items()):
        old_config = before.broker_configs.get(resource)
        if old_config is None or dict(old_config) != dict(config):
            plan.put(_broker_config_path(resource), _config_json(config))
    if before.next_producer_id != after.next_producer_id:
        plan.put(PRODUCER_ID_BLOCK, _producer_id_block_json(after.next_producer_id))
    return plan


def _chunks(ops: list[_Op], limit: int) -> list[list[_Op]]:
    chunks: list[list[_Op]] = [[]]
    size = 0
    for op in ops:
        if chunks[-1] and size + op.size > limit:
            chunks.append([])
            size = 0
        chunks[-1].append(op)
        size += op.size
    return chunks


# --- the store ----------------------------------------------------------------------------------


class ZooKeeperMetadataStore(MetadataStore):
    """The cluster state in ZooKeeper through a started kazoo client (with the chroot of
    ``zookeeper.connect``); one controller at a time, fenced by ``/controller_epoch``.

    ``retry_timeout_s`` bounds how long one operation waits out lost connections (kazoo moves
    to another server of the ensemble) before failing with KafkaStorageError; use the
    connection timeout.
    """

    def __init__(
        self,
        client: KazooClient,
        *,
        retry_timeout_s: float = 18.0,
        multi_bytes_limit: int = MULTI_BYTES_LIMIT,
    ) -> None:
        self._client = client
        self._retry_timeout = retry_timeout_s
        self._multi_limit = multi_bytes_limit
        self._closed = False
        self._controller_id = p.NO_LEADER
        self._claimed: ClusterState | None = None
        #: The zkVersion of /controller_epoch this controller set: its fencing token.
        self._epoch_version = -1
        #: The session that holds /controller; no other may write for this controller.
        self._session_id = -1
        #: What ZooKeeper holds, as last read or written; None once unsure (a write whose
        #: outcome was lost with the connection), so the next save reads it again first.
        self._stored: ClusterState | None = None
        self._existing: set[str] = set()
        #: Topics some of whose znodes are missing, found when reading.
        self._incomplete: set[str] = set()

    @property
    def where(self) -> str:
        """The ZooKeeper ensemble and chroot, for messages."""
        hosts = ",".join(f"{h}:{port}" for h, port in self._client.hosts)
        return f"ZooKeeper {hosts}{self._client.chroot or ''}"

    # --- claim --------------------------------------------------------------------------

    def claim(self, controller_id: int, *, cluster_id: str | None = None) -> ClusterState:
        self._check_open()
        started = time.monotonic()
        self._claimed = self._stored = None
        self._retrying(self._ensure_top_level_paths)
        stored_cluster_id = self._retrying(lambda: self._cluster_id(cluster_id))
        epoch = self._retrying(lambda: self._elect(controller_id))
        self._controller_id = controller_id
        self._claimed = ClusterState.new(stored_cluster_id)
        try:
            state, self._existing, self._incomplete = self._retrying(
                lambda: self._read(stored_cluster_id, epoch)
            )
        except BaseException:
            # A controller that cannot read the state must not keep others from trying.
            self.resign()
            raise
        self._claimed = self._stored = state
        partitions = sum(len(t.partitions) for t in state.topics.values())
        log.info(
            "broker %d is the controller at epoch %d of %s; read %d topics, %d partitions "
            "in %.0f ms",
            controller_id,
            epoch,
            self.where,
            len(state.topics),
            partitions,
            (time.monotonic() - started) * 1000,
        )
        return state

    def _ensure_top_level_paths(self) -> None:
        for path in PERSISTENT_PARENTS:
            self._client.ensure_path(path)

    def _cluster_id(self, configured: str | None) -> str:
        """The stored cluster id, created (as ``configured`` or a fresh one) if there is none."""
        try:
            raw, _ = self._client.get(CLUSTER_ID)
        except NoNodeError:
            fresh = configured or str(Uuid.random())
            try:
                self._client.create(CLUSTER_ID, _cluster_id_json(fresh))
                return fresh
            except NodeExistsError:
                raw, _ = self._client.get(CLUSTER_ID)
        stored = self._parse(CLUSTER_ID, raw, _cluster_id_from_json)
        check_cluster_id(configured, stored, f"{self.where}{CLUSTER_ID}")
        return stored

    def _elect(self, controller_id: int) -> int:
        """Creates /controller and bumps /controller_epoch in one multi; returns the epoch."""
        session_id = self._current_session()
        transaction = self._client.transaction()
        try:
            holder, holder_stat = self._client.get(CONTROLLER)
        except NoNodeError:
            pass
        else:
            if holder_stat.ephemeralOwner != session_id:
                raise ControllerMovedError(f"{self._holder(holder)} is the controller")
            # Left by this very session (a store made again, or a claim whose answer was
            # lost with the connection): give it up and claim afresh.
            transaction.delete(CONTROLLER, holder_stat.version)
        try:
            raw, stat = self._client.get(CONTROLLER_EPOCH)
        except NoNodeError:
            current, version = 0, None
        else:
            current = self._parse(CONTROLLER_EPOCH, raw, lambda r: int(r.decode()))
            version = stat.version
        epoch = current + 1
        transaction.create(
            CONTROLLER,
            _encode(
                {
                    "version": 1,
                    "brokerid": controller_id,
                    "timestamp": str(time.time_ns() // 1_000_000),
                    "epoch": epoch,
                }
            ),
            ephemeral=True,
        )
        if version is None:
            transaction.create(CONTROLLER_EPOCH, str(epoch).encode())
        else:
            transaction.set_data(CONTROLLER_EPOCH, str(epoch).encode(), version)
        results = self._commit(transaction)
        failure = next((r for r in results if isinstance(r, Exception)), None)
        if failure is None:
            last = results[-1]
            self._epoch_version = 0 if version is None else last.version
            self._session_id = session_id
            return epoch
        culprit = next(
            (r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)),
            failure,
        )
        if isinstance(culprit, NodeExistsError) and results.index(culprit) == len(results) - 2:
            raise ControllerMovedError(f"{self._holder(None)} is the controller")
        if isinstance(culprit, (BadVersionError, NodeExistsError, NoNodeError)):
            raise ControllerMovedError(
                f"another controller was elected at epoch {epoch} meanwhile ({self.where})"
            )
        raise KafkaStorageError(f"{self.where}: electing the controller failed: {culprit!r}")

    def _holder(self, raw: bytes | None) -> str:
        """Who holds /controller, for messages."""
        try:
            if raw is None:
                raw, _ = self._client.get(CONTROLLER)
            data = _decode(raw)
            return f"broker {data.get('brokerid')} (epoch {data.get('epoch')}, {self.where})"
        except (KazooException, ValueError, AttributeError):
            return f"another broker ({self.where})"

    def _read(self, cluster_id: str, epoch: int) -> tuple[ClusterState, set[str], set[str]]:
        """Everything stored, read with pipelined requests: three round trips in all. Returns
        the state, the znodes found, and the topics some of whose znodes are missing."""
        client, timeout = self._client, self._retry_timeout
        existing: set[str] = set()
        incomplete: set[str] = set()

        def get(future: Any, path: str) -> tuple[bytes, Any] | None:
            try:
                found: tuple[bytes, Any] = future.get(timeout=timeout)
            except NoNodeError:
                return None
            existing.add(path)
            return found

        def children(future: Any, path: str) -> list[str]:
            try:
                names: list[str] = future.get(timeout=timeout)
            except NoNodeError:
                return []
            existing.add(path)
            return names

        topics_f = client.get_children_async(BROKER_TOPICS)
        topic_configs_f = client.get_children_async(TOPIC_CONFIGS)
        broker_configs_f = client.get_children_async(BROKER_CONFIGS)
        block_f = client.get_async(PRODUCER_ID_BLOCK)
        names = sorted(children(topics_f, BROKER_TOPICS))
        existing.update(topic_config_path(n) for n in children(topic_configs_f, TOPIC_CONFIGS))
        broker_resources = children(broker_configs_f, BROKER_CONFIGS)

        topic_fs = {n: client.get_async(topic_path(n)) for n in names}
        dirs_fs = {n: client.get_children_async(partitions_path(n)) for n in names}
        config_fs = {n: client.get_async(topic_config_path(n)) for n in names}
        broker_config_fs = {r: client.get_async(f"{BROKER_CONFIGS}/{r}") for r in broker_resources}
        block = get(block_f, PRODUCER_ID_BLOCK)
        next_producer_id = (
            0
            if block is None
            else self._parse(PRODUCER_ID_BLOCK, block[0], _producer_id_block_from_json)
        )
        assignments: dict[str, _Assignment] = {}
        for name in names:
            found = get(topic_fs[name], topic_path(name))
            if found is None:  # deleted by someone else since it was listed
                continue
            assignments[name] = self._parse(topic_path(name), found[0], _assignment_from_json)
            for child in children(dirs_fs[name], partitions_path(name)):
                existing.add(f"{partitions_path(name)}/{child}")

        state_fs = {
            (name, index): client.get_async(partition_state_path(name, index))
            for name, assignment in assignments.items()
            for index in range(len(assignment.partitions))
            if partition_path(name, index) in existing
        }
        topics: dict[str, TopicImage] = {}
        for name, assignment in assignments.items():
            config_found = get(config_fs[name], topic_config_path(name))
            if config_found is None:
                incomplete.add(name)
            configs = (
                {}
                if config_found is None
                else self._parse(topic_config_path(name), config_found[0], _config_from_json)
            )
            partitions = []
            for index, assigned in enumerate(assignment.partitions):
                path = partition_state_path(name, index)
                future = state_fs.get((name, index))
                found = None if future is None else get(future, path)
                if found is None:
                    log.warning("%s%s is missing: a new partition without leader", self.where, path)
                    incomplete.add(name)
                    replicas, adding, removing = assigned
                    partitions.append(
                        PartitionRegistration(
                            replicas, replicas, p.NO_LEADER, 0, 0, adding, removing
                        )
                    )
                    continue
                raw, stat = found
                partitions.append(
                    self._parse(
                        path, raw, functools.partial(_registration, assigned, version=stat.version)
                    )
                )
            topics[name] = TopicImage(name, assignment.topic_id, tuple(partitions), configs=configs)

        broker_configs: dict[str, dict[str, str]] = {}
        for resource, future in broker_config_fs.items():
            path = f"{BROKER_CONFIGS}/{resource}"
            found = get(future, path)
            if found is not None:
                key = (
                    ""
                    if resource == DEFAULT_BROKER_CONFIG
                    else str(self._parse(path, resource.encode(), _broker_id))
                )
                broker_configs[key] = self._parse(path, found[0], _config_from_json)
        state = ClusterState(
            cluster_id=cluster_id,
            controller_epoch=epoch,
            topics=topics,
            broker_configs=broker_configs,
            next_producer_id=next_producer_id,
        )
        return state, existing, incomplete

    # --- save ---------------------------------------------------------------------------

    def save(self, state: ClusterState) -> None:
        self._check_open()
        claimed = self._claimed
        if claimed is None:
            raise ControllerMovedError(f"{self.where}: this store is not the controller's")
        if (state.cluster_id, state.controller_epoch) != (
            claimed.cluster_id,
            claimed.controller_epoch,
        ):
            raise ValueError(
                f"state of cluster {state.cluster_id!r} at controller epoch "
                f"{state.controller_epoch}, but {claimed.cluster_id!r} at epoch "
                f"{claimed.controller_epoch} was claimed"
            )
        self._retrying(lambda: self._write(state))

    def _write(self, state: ClusterState) -> None:
        if self._current_session() != self._session_id:
            raise ControllerMovedError(
                f"the ZooKeeper session that made this broker controller at epoch "
                f"{state.controller_epoch} has ended ({self.where})"
            )
        if self._stored is None:
            self._stored, self._existing, self._incomplete = self._read(
                state.cluster_id, state.controller_epoch
            )
        plan = _plan(self._stored, state, self._existing, self._incomplete, state.controller_epoch)
        if not plan.ops:
            self._stored = state
            return
        chunks = _chunks(plan.ops, self._multi_limit)
        for number, chunk in enumerate(chunks):
            if number:
                # Past the first multi, a failure leaves ZooKeeper between the two states.
                self._stored = None
            transaction = self._client.transaction()
            transaction.check(CONTROLLER_EPOCH, self._epoch_version)
            for op in chunk:
                if op.kind == "create":
                    transaction.create(op.path, op.data)
                elif op.kind == "set":
                    transaction.set_data(op.path, op.data)
                else:
                    transaction.delete(op.path)
            try:
                results = self._commit(transaction)
            except BaseException:
                # Lost with the connection, the multi may have been applied or not.
                self._stored = None
                raise
            if not any(isinstance(r, Exception) for r in results):
                continue
            if not isinstance(results[0], RolledBackError):
                raise ControllerMovedError(
                    f"another controller took over after epoch {state.controller_epoch} "
                    f"({self.where}); nothing{' more' if number else ''} was written"
                )
            self._stored = None
            for op, result in zip(chunk, results[1:], strict=True):
                if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                    raise KafkaStorageError(
                        f"cannot {op.kind} {self.where}{op.path}: {type(result).__name__}"
                    )
            raise KafkaStorageError(f"{self.where}: a write was refused: {results!r}")
        self._stored = state
        self._existing = plan.existing
        self._incomplete = set()

    # --- resign, close --------------------------------------------------------------------

    def resign(self) -> None:
        if self._claimed is None:
            return
        self._claimed = self._stored = None
        try:
            _, stat = self._client.get(CONTROLLER)
            if stat.ephemeralOwner != self._session_id:
                return
            transaction = self._client.transaction()
            transaction.check(CONTROLLER_EPOCH, self._epoch_version)
            transaction.delete(CONTROLLER, stat.version)
            self._commit(transaction)
        except (KazooException, self._client.handler.timeout_exception) as err:
            # The session ending (or a successor) removes it all the same.
            log.info("could not resign as controller in %s: %r", self.where, err)

    def close(self) -> None:
        """Resigns; the kazoo client (and its session) stays the caller's."""
        if not self._closed:
            self.resign()
            self._closed = True

    # --- helpers --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"the metadata store on {self.where} is closed")

    def _current_session(self) -> int:
        """The id of the client's session; while disconnected, ConnectionLoss (retried)."""
        client_id = self._client.client_id
        if client_id is None:
            raise ConnectionLoss(f"not connected to {self.where}")
        return int(client_id[0])

    def _commit(self, transaction: Any) -> list[Any]:
        results: list[Any] = transaction.commit_async().get(timeout=self._retry_timeout)
        return results

    def _parse(self, path: str, raw: bytes, parse: Callable[[bytes], T]) -> T:
        try:
            return parse(raw)
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as err:
            raise KafkaStorageError(
                f"znode {self._client.chroot or ''}{path} in {self.where} is not valid "
                f"cluster metadata: {unreadable_reason(err)}"
            ) from None

    def _retrying(self, action: Callable[[], T]) -> T:
        """Runs ``action``, again while the connection is lost and comes back in time."""
        deadline = time.monotonic() + self._retry_timeout
        delay = 0.05
        while True:
            try:
                return action()
            except (
                ConnectionLoss,
                OperationTimeoutError,
                self._client.handler.timeout_exception,
            ) as err:
                if time.monotonic() + delay > deadline:
                    raise KafkaStorageError(f"{self.where} did not answer: {err!r}") from err
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            except ConnectionClosedError as err:
                raise KafkaStorageError(f"the client of {self.where} is closed") from err
            except SessionExpiredError as err:
                raise ControllerMovedError(f"the ZooKeeper session expired ({self.where})") from err
            except KazooException as err:
                raise KafkaStorageError(f"{self.where}: {type(err).__name__} {err}") from err
