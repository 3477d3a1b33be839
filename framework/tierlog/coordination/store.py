"""Where the controller keeps what it decides, behind one interface.

The controller's decisions (topics, their ids, replicas, leaders and epochs, reassignments,
configs, the next producer id block) must outlive it. An embedded cluster keeps them in a JSON
file in its data dir (:mod:`~tierlog.coordination.file_store`); brokers running as separate
processes keep them in ZooKeeper, as Kafka did (:mod:`~tierlog.coordination.zookeeper_store`).
Both answer to :class:`MetadataStore`, so the controller does not know which one it writes to,
and one test suite holds both to the same behaviour.

A store has one writer at a time. :meth:`MetadataStore.claim` makes the caller that writer
under a new controller epoch; from then on every :meth:`MetadataStore.save` is fenced by that
epoch, so a controller that another has replaced cannot overwrite its successor's decisions.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from types import MappingProxyType

import attrs

from ..errors import InvalidConfigError, NotControllerError
from ..server.image import TopicImage


def _frozen_topics(mapping: Mapping[str, TopicImage]) -> Mapping[str, TopicImage]:
    return MappingProxyType(dict(mapping))


def _frozen_configs(mapping: Mapping[str, Mapping[str, str]]) -> Mapping[str, Mapping[str, str]]:
    return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in mapping.items()})


def _same_topics(a: Mapping[str, TopicImage], b: Mapping[str, TopicImage]) -> bool:
    return a.keys() == b.keys() and all(
        a[name] == b[name] and dict(a[name].configs) == dict(b[name].configs) for name in a
    )


def _same_configs(a: Mapping[str, Mapping[str, str]], b: Mapping[str, Mapping[str, str]]) -> bool:
    return {k: dict(v) for k, v in a.items()} == {k: dict(v) for k, v in b.items()}


@attrs.frozen
class ClusterState:
    """Everything the controller persists: the cluster image without who is alive.

    ``broker_configs`` maps ``''`` (the cluster-wide default) or a broker id as a string to
    the dynamic broker configs set there. ``next_producer_id`` is the first id of the next
    producer id block (KIP-730); every id below it may have been handed out.

    Equality compares topic configs too (:class:`TopicImage` leaves them out of its own).
    """

    cluster_id: str
    controller_epoch: int
    topics: Mapping[str, TopicImage] = attrs.field(
        converter=_frozen_topics, eq=attrs.cmp_using(eq=_same_topics), hash=False
    )
    broker_configs: Mapping[str, Mapping[str, str]] = attrs.field(
        factory=dict, converter=_frozen_configs, eq=attrs.cmp_using(eq=_same_configs), hash=False
    )
    next_producer_id: int = 0

    @classmethod
    def new(cls, cluster_id: str) -> ClusterState:
        """A cluster nobody has written to yet: no topics, no configs, epoch 0."""
        return cls(cluster_id=cluster_id, controller_epoch=0, topics={})


class ControllerMovedError(NotControllerError):
    """Another controller holds the store (or took it over since this one claimed it).

    Raised by :meth:`MetadataStore.claim` when someone else is the controller and by
    :meth:`MetadataStore.save` of a controller that has been replaced; such a save wrote
    nothing. Kafka's ``ControllerMovedException``, answered as NOT_CONTROLLER.
    """


def unreadable_reason(err: BaseException) -> str:
    """Why stored metadata could not be read, in words for the error that names where."""
    if isinstance(err, KeyError):
        return f"missing {err}"
    if isinstance(err, RecursionError):
        return "nested too deep"
    return str(err) or type(err).__name__


def check_cluster_id(configured: str | None, stored: str, where: str) -> None:
    """Refuses data that belongs to another cluster than the configured ``cluster.id``."""
    if configured and configured != stored:
        raise InvalidConfigError(
            f"cluster.id = {configured!r}, but the data in {where} belongs to cluster {stored!r}",
            key="cluster.id",
            value=configured,
        )


class MetadataStore(abc.ABC):
    """The controller's durable state; one writer at a time, fenced by the controller epoch."""

    @abc.abstractmethod
    def claim(self, controller_id: int, *, cluster_id: str | None = None) -> ClusterState:
        """Becomes the one writer and returns the stored state under a new controller epoch.

        A store holding nothing yet starts a new cluster, with ``cluster_id`` or a fresh random
        id. Stored data of another cluster than a given ``cluster_id`` is refused with
        InvalidConfigError; data that cannot be read is KafkaStorageError naming where it is.
        Raises ControllerMovedError while another controller holds the store.
        """

    @abc.abstractmethod
    def save(self, state: ClusterState) -> None:
        """Makes ``state`` durable, writing what differs from the last state saved or claimed.

        ``state`` must carry the cluster id and epoch :meth:`claim` returned. Raises
        ControllerMovedError, having written nothing, once another controller has claimed the
        store since. Another error (KafkaStorageError) may leave the old state stored, or the
        new one when the answer was lost with the connection; the next save writes whatever
        still differs.
        """

    @abc.abstractmethod
    def resign(self) -> None:
        """Stops being the writer, so a successor need not wait for this one to be declared
        dead; does nothing if another controller already took over."""

    @abc.abstractmethod
    def close(self) -> None:
        """Releases what the store holds; saving afterwards is an error."""

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
