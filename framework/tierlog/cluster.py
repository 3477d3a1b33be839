"""An embedded cluster: N brokers and their controller in one process.

The default way to run tierlog and to test it: one broker for a demo, three in tests. Brokers
have ids ``0..size-1`` and each gets its own log dir under ``data_dir/broker-<id>/logs``; the
controller keeps the cluster metadata under ``data_dir/controller``. Brokers talk to each other
and to the controller through :attr:`EmbeddedCluster.transport`, so tests can delay, drop or fail
chosen requests. With ``listen=True`` every broker also listens for Kafka clients on TCP
(``listeners``; broker i on the configured port plus i, port 0 picking a free one), and
:attr:`EmbeddedCluster.bootstrap_servers` says where.
Starting a new cluster on the same ``data_dir`` brings back the same topics, topic ids,
configs and data. While a cluster runs, its directories are locked (a ``.lock`` file in the
controller's directory and in each broker's log dir, held until :meth:`EmbeddedCluster.stop`):
a second cluster on the same ``data_dir``, in this process or another, fails to start with an
error naming the directory and the process that holds it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

from .config import BrokerConfig
from .coordination.file_store import FileMetadataStore
from .log import DirectoryLock
from .metrics import MetricName, MetricsRegistry, MetricValue
from .metrics.name import TagValue
from .server.broker import Broker, BrokerState
from .server.controller import Controller
from .server.leader_balance import LeaderBalancer, leader_balancer
from .server.transport import InProcessTransport
from .wire import EndpointDirectory, WireListener

log = logging.getLogger(__name__)


class EmbeddedCluster:
    """Brokers ``0..size-1`` sharing one controller and one in-process transport."""

    def __init__(
        self,
        size: int = 1,
        data_dir: Path | str | None = None,
        config: Mapping[str, object] | None = None,
        *,
        extra_plugins: Mapping[str, object] | None = None,
        listen: bool = False,
    ) -> None:
        if size < 1:
            raise ValueError(f"a cluster needs at least one broker, got size={size}")
        if data_dir is None:
            raise TypeError("EmbeddedCluster needs a data_dir for its logs and metadata")
        self.size = size
        self.data_dir = Path(data_dir)
        self._config = dict(config or {})
        self._extra_plugins = extra_plugins
        self.transport = InProcessTransport()
        # Parsed now so a bad configuration fails before anything touches the disk.
        self._base_config = BrokerConfig.from_mapping(self._config)
        self._brokers: dict[int, Broker] = {}
        self._controller: Controller | None = None
        self._controller_lock: DirectoryLock | None = None
        self._balancer: LeaderBalancer | None = None
        self.listen = listen
        #: What each listening broker advertises; Metadata answers from it.
        self.endpoints = EndpointDirectory()
        self._listeners: dict[int, WireListener] = {}

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(range(self.size))

    @property
    def controller(self) -> Controller:
        if self._controller is None:
            raise RuntimeError("the cluster is not started")
        return self._controller

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of every listening broker, for a Kafka client's bootstrap list."""
        if not self.listen:
            raise RuntimeError("this cluster does not listen: build it with listen=True")
        return self.endpoints.bootstrap_servers()

    def listener(self, broker_id: int) -> WireListener:
        """The running listener of ``broker_id``."""
        try:
            return self._listeners[broker_id]
        except KeyError:
            raise KeyError(f"broker {broker_id} is not listening") from None

    def broker(self, broker_id: int) -> Broker:
        """The current broker object for ``broker_id`` (a new one after each restart)."""
        try:
            return self._brokers[broker_id]
        except KeyError:
            raise KeyError(
                f"no broker {broker_id} in this cluster (ids 0..{self.size - 1})"
            ) from None

    def metric(self, broker_id: int, group: str, name: str, /, **tags: TagValue) -> MetricValue:
        """The current value of one of a broker's metrics, by Kafka's group, name and tags:
        ``cluster.metric(0, "BrokerTopicMetrics", "RemoteCopyBytesPerSec", topic="t",
        partition=0)`` (a number, or a dict for meters, histograms and timers).

        :raises KeyError: the broker is not running, or has no metric with exactly these tags.
        """
        return self._metrics_of(broker_id).value(group, name, **tags)

    def metrics(
        self,
        broker_id: int,
        group: str | None = None,
        name: str | None = None,
        /,
        **tags: TagValue,
    ) -> dict[MetricName, MetricValue]:
        """A broker's metrics whose group and name are these (when given) and whose tags
        include ``tags``, with their current values: ``cluster.metrics(0, topic="t")``.

        :raises KeyError: the broker is not running.
        """
        registry = self._metrics_of(broker_id)
        wanted = {key: str(value) for key, value in tags.items()}
        return {
            metric_name: metric.snapshot()
            for metric_name, metric in registry.items()
            if metric_name.matches(group=group, name=name, tags=wanted)
        }

    def _metrics_of(self, broker_id: int) -> MetricsRegistry:
        broker = self.broker(broker_id)
        host = broker.plugin_host
        if host is None or broker.state in (BrokerState.NOT_RUNNING, BrokerState.STOPPED):
            raise KeyError(f"broker {broker_id} is not running: it has no metrics")
        return host.metrics

    def broker_config(self, broker_id: int) -> BrokerConfig:
        """A fresh configuration for ``broker_id``: the cluster's, with its id and log dir."""
        return BrokerConfig.from_mapping(
            {
                **self._config,
                "broker.id": broker_id,
                "log.dirs": [str(self.data_dir / f"broker-{broker_id}" / "logs")],
            }
        )

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Locks the controller's directory and starts the controller, then every broker in id
        order; returns once all serve."""
        try:
            if self._controller_lock is None:
                self._controller_lock = DirectoryLock.acquire(self.data_dir / "controller")
                # Read afresh under the lock: the metadata is this cluster's from now on.
                self._controller = Controller(
                    self._base_config,
                    FileMetadataStore(self.data_dir / "controller"),
                    self.transport,
                    self.broker_ids,
                )
                controller = self._controller
                self._balancer = leader_balancer(
                    self._base_config, controller.image, controller.elect_leaders
                )
                if self._balancer is not None:
                    self._balancer.start()
            for broker_id in self.broker_ids:
                self.start_broker(broker_id)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stops every broker cleanly, highest id first, then unlocks the controller's directory."""
        errors: list[BaseException] = []
        balancer, self._balancer = self._balancer, None
        if balancer is not None:
            balancer.stop()
        try:
            for broker_id in sorted(self._brokers, reverse=True):
                try:
                    self.stop_broker(broker_id)
                except Exception as err:
                    log.exception("stopping broker %d failed", broker_id)
                    errors.append(err)
        finally:
            lock, self._controller_lock = self._controller_lock, None
            if lock is not None:
                lock.release()
        if errors:
            raise errors[0]

    def start_broker(self, broker_id: int) -> Broker:
        """Starts (or starts again) one broker with a fresh configuration."""
        if broker_id not in self.broker_ids:
            raise KeyError(f"no broker {broker_id} in this cluster (ids 0..{self.size - 1})")
        if self._controller_lock is None:
            raise RuntimeError("the cluster is not started")
        current = self._brokers.get(broker_id)
        if current is not None and current.state not in (
            BrokerState.STOPPED,
            BrokerState.NOT_RUNNING,
        ):
            raise RuntimeError(f"broker {broker_id} is {current.state.value}")
        broker = Broker(
            self.broker_config(broker_id), self.controller, extra_plugins=self._extra_plugins
        )
        self._brokers[broker_id] = broker
        self.transport.register(broker)
        broker.start()
        if self.listen:
            assert broker.plugin_host is not None
            listener = WireListener(
                lambda: self._brokers[broker_id],
                broker.config,
                self.endpoints,
                metrics=broker.plugin_host.metrics,
                port_offset=broker_id,
            )
            listener.start()
            self._listeners[broker_id] = listener
        return broker

    def stop_broker(self, broker_id: int, *, clean: bool = True) -> None:
        """Stops one broker; ``clean=False`` leaves its logs to be recovered as after a crash."""
        broker = self.broker(broker_id)
        listener = self._listeners.pop(broker_id, None)
        if listener is not None:
            listener.stop()
        try:
            broker.stop(clean=clean)
        finally:
            self.transport.unregister(broker_id)

    def restart_broker(self, broker_id: int, *, clean: bool = True) -> Broker:
        self.stop_broker(broker_id, clean=clean)
        return self.start_broker(broker_id)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
