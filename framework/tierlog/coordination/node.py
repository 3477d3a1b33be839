"""One broker of a multi-process cluster: what ``tierlog run --broker-id N`` runs.

It puts together, in one process, a :class:`~tierlog.server.broker.Broker`, its Kafka listener,
a ZooKeeper session, the broker's view of the controller
(:class:`~tierlog.coordination.controller_channel.ControllerChannel`), the controller role it
may win (:class:`~tierlog.coordination.controller_role.ControllerRole`) and the network
transport through which it reaches the other brokers. The listener opens when the broker starts
serving, and the broker registers in ZooKeeper with what the listener advertises, so no other
broker or client is sent to an address that does not answer yet.

:meth:`ClusterNode.stop` is a controlled shutdown (leadership moves away, then the registration
goes); a process killed outright is noticed when its ZooKeeper session expires.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import TracebackType
from typing import Self

from kazoo.client import KazooClient

from ..config import BrokerConfig
from ..server.broker import Broker, BrokerState
from ..server.controller import Controller
from ..wire import EndpointDirectory, WireListener
from ..wire.endpoints import parse_listeners, parse_protocol_map
from ..wire.network_transport import NetworkTransport
from .client import zookeeper_client
from .controller_channel import ControllerChannel
from .controller_role import ControllerRole
from .registration import SESSION_RECORD, BrokerInfo, BrokerRegistration, endpoints_of

log = logging.getLogger(__name__)


class ClusterNode:
    """A broker that takes part in a ZooKeeper-coordinated cluster; start it, stop it."""

    def __init__(
        self,
        config: BrokerConfig | Mapping[str, object],
        *,
        extra_plugins: Mapping[str, object] | None = None,
    ) -> None:
        self.config = (
            config if isinstance(config, BrokerConfig) else BrokerConfig.from_mapping(config)
        )
        if not self.config.get_str("zookeeper.connect"):
            raise ValueError("a cluster node needs zookeeper.connect")
        self.broker_id = self.config.get_int("broker.id")
        self._extra_plugins = extra_plugins
        #: What every broker of the cluster advertises, for Metadata answers.
        self.endpoints = EndpointDirectory()
        protocols = parse_protocol_map(self.config.get_str("listener.security.protocol.map") or "")
        #: The listener brokers use to reach each other: the first one configured.
        self.inter_broker_listener = parse_listeners(self.config.get_list("listeners"), protocols)[
            0
        ].name
        self._zk: KazooClient | None = None
        self.transport: NetworkTransport | None = None
        self.channel: ControllerChannel | None = None
        self.role: ControllerRole | None = None
        self.broker: Broker | None = None
        self.listener: WireListener | None = None
        self._registration: BrokerRegistration | None = None

    @property
    def controller(self) -> Controller | None:
        """The controller this process runs, while it holds the role."""
        return None if self.role is None else self.role.controller

    @property
    def bootstrap_servers(self) -> str:
        if self.listener is None:
            raise RuntimeError(f"broker {self.broker_id} is not listening")
        return ",".join(f"{e.host}:{e.port}" for e in self.listener.advertised)

    # --- life cycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Connects to ZooKeeper, starts campaigning and starts the broker; returns once it
        serves and the controller counts it live (or the wait for that timed out)."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        config = self.config
        zk = self._zk = zookeeper_client(config)
        channel_ref: list[ControllerChannel] = []

        def resolve(broker_id: int) -> tuple[str, int] | None:
            return channel_ref[0].address(broker_id, self.inter_broker_listener)

        self.transport = NetworkTransport(
            resolve,
            lambda: tuple(sorted(channel_ref[0].live_brokers())),
            client_id=f"tierlog-broker-{self.broker_id}",
        )
        channel = self.channel = ControllerChannel(
            config, zk, self.transport, self.endpoints, registration=None
        )
        channel_ref.append(channel)
        self.role = ControllerRole(
            config,
            zk,
            self.transport,
            on_change=self._on_controller_change,
            on_controller_id=channel.set_controller,
            on_brokers=self._on_registrations,
        )
        # As Kafka's brokers do, the controller role goes right after the controlled shutdown,
        # not once every log is closed: a successor is elected seconds sooner.
        channel.on_deregistered.append(self.role.stop)
        broker = self.broker = Broker(config, channel, extra_plugins=self._extra_plugins)
        broker.inter_broker_enabled = True
        broker.metadata_receiver = channel.update_metadata
        broker.add_state_listener(self._on_broker_state)
        self.role.start()
        broker.start()

    def _on_broker_state(self, broker: Broker, state: BrokerState) -> None:
        """Once serving, open the listener and hand the channel a registration with the
        addresses it advertises (the channel registers right after this)."""
        if state is not BrokerState.SERVING or self.listener is not None:
            return
        assert broker.plugin_host is not None and self._zk is not None
        listener = WireListener(
            lambda: broker, broker.config, self.endpoints, metrics=broker.plugin_host.metrics
        )
        listener.start()
        self.listener = listener
        self._registration = BrokerRegistration(
            self._zk,
            self.broker_id,
            [str(e) for e in listener.advertised],
            session_record=broker.log_dirs[0] / SESSION_RECORD,
        )
        channel = self.channel
        assert channel is not None
        channel.registration = self._registration
        # After a session expiry the broker registers again: requests carry the new epoch.
        self._registration.on_reregistered.append(channel.set_broker_epoch)

    def _on_controller_change(self, controller: Controller | None) -> None:
        if self.channel is not None:
            self.channel.set_local_controller(controller)
        if self.broker is not None:
            self.broker.active_controller = controller

    def _on_registrations(self, brokers: Mapping[int, BrokerInfo]) -> None:
        if self.channel is not None:
            self.channel.set_registered({b: endpoints_of(info) for b, info in brokers.items()})

    def stop(self) -> None:
        """Controlled shutdown: the broker hands its leaderships over and deregisters, the
        controller role (if held) goes to another broker, then the session closes."""
        errors: list[BaseException] = []
        if self.broker is not None:
            try:
                self.broker.stop(clean=True)
            except Exception as err:
                log.exception("stopping broker %d failed", self.broker_id)
                errors.append(err)
        if self.role is not None:
            self.role.stop()
        if self.listener is not None:
            self.listener.stop()
        if self._registration is not None:
            self._registration.close()
        if self.transport is not None:
            self.transport.close()
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception:
                log.exception("closing the ZooKeeper session of broker %d failed", self.broker_id)
        if errors:
            raise errors[0]

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
