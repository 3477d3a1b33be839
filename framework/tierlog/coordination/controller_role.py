"""The controller role of one broker process: campaign for it, hold it, give it up.

Every broker of a multi-process cluster watches ``/controller``. When the node is absent it
tries to claim the metadata store (one ZooKeeper multi creates the ephemeral ``/controller``
and bumps ``/controller_epoch``); the winner loads the cluster state, counts the registered
brokers live, elects leaders where the old ones are gone, and sends every broker a full
LeaderAndIsr and the image (UpdateMetadata), pushed again after each change. It follows
``/brokers/ids``: a broker whose node vanishes (crash, session expiry) is unregistered (ISRs
shrink, leadership moves with a new leader epoch); a broker that appears, or comes back with
a new broker epoch, is registered and sent its whole state.

A controller that loses its ZooKeeper connection (SUSPENDED) stops acting at once: its writes
would be refused by the epoch check anyway, and a standby takes over once its session expires.
ZooKeeper is never called from kazoo's own callbacks: they only wake the role's thread.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError

from ..config import BrokerConfig
from ..errors import NotControllerError, TierlogError
from ..server.controller import Controller
from ..server.image import ClusterImage
from ..server.leader_balance import LeaderBalancer, leader_balancer
from ..server.transport import Transport
from ..server.update_metadata import update_metadata_request
from . import paths
from .registration import BrokerInfo, endpoints_of, watch_brokers
from .request_queues import ControllerRequestQueues
from .zookeeper_store import ZooKeeperMetadataStore

log = logging.getLogger(__name__)

#: How long a stopping controller waits for its queued requests to reach the brokers.
DRAIN_ON_STOP_S = 5.0

ControllerListener = Callable[[Controller | None], None]


class ControllerRole:
    """Campaigns for the controller role of ``broker_id`` and runs the controller while held."""

    def __init__(
        self,
        config: BrokerConfig,
        zk: KazooClient,
        network: Transport,
        *,
        on_change: ControllerListener,
        on_controller_id: Callable[[int], None],
        on_brokers: Callable[[Mapping[int, BrokerInfo]], None],
    ) -> None:
        self.config = config
        self.broker_id = config.get_int("broker.id")
        self._zk = zk
        self._network = network
        self._on_change = on_change
        self._on_controller_id = on_controller_id
        self._on_brokers = on_brokers
        self._wake = threading.Condition()
        self._events: list[str] = []
        self._stopping = False
        self._controller: Controller | None = None
        self._store: ZooKeeperMetadataStore | None = None
        self._queues: ControllerRequestQueues | None = None
        self._balancer: LeaderBalancer | None = None
        self._push_lock = threading.Lock()
        self._unsubscribe: Callable[[], None] | None = None
        self._registered: dict[int, BrokerInfo] = {}
        self._thread = threading.Thread(
            target=self._run, name=f"controller-role-{self.broker_id}", daemon=True
        )

    @property
    def controller(self) -> Controller | None:
        """The controller this process runs, while it holds the role."""
        return self._controller

    def start(self) -> None:
        self._zk.add_listener(self._on_state)
        self._thread.start()
        self._zk.DataWatch(paths.CONTROLLER, self._on_controller_node)
        watch_brokers(self._zk, self._on_registrations)

    def stop(self) -> None:
        """Gives the role up (if held) and stops campaigning; what the controller queued for
        the brokers (a controlled shutdown's new leaders) is delivered first, briefly."""
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        self._thread.join(timeout=10)
        self._zk.remove_listener(self._on_state)
        queues = self._queues
        deadline = time.monotonic() + DRAIN_ON_STOP_S
        while queues is not None and not queues.drained() and time.monotonic() < deadline:
            time.sleep(0.02)
        self._resign("stopping")

    # --- kazoo callbacks: record and wake, never call ZooKeeper ----------------------------

    def _post(self, event: str) -> None:
        with self._wake:
            self._events.append(event)
            self._wake.notify_all()

    def _on_state(self, state: str) -> None:
        if state == KazooState.SUSPENDED:
            self._post("suspended")
        elif state == KazooState.LOST:
            self._post("lost")
        else:
            self._post("connected")

    def _on_controller_node(self, data: bytes | None, _stat: object) -> bool:
        holder = -1
        if data is not None:
            try:
                holder = int(json.loads(data)["brokerid"])
            except (ValueError, KeyError, TypeError):
                log.warning("unreadable %s: %r", paths.CONTROLLER, data[:100])
        self._on_controller_id(holder)
        self._post("controller-gone" if data is None else "controller-held")
        return not self._stopping

    def _on_registrations(self, brokers: Mapping[int, BrokerInfo]) -> None:
        with self._wake:
            self._registered = dict(brokers)
        self._on_brokers(brokers)
        self._post("brokers")

    # --- the role's thread ----------------------------------------------------------------

    def _run(self) -> None:
        self._post("start")
        while True:
            with self._wake:
                while not self._events and not self._stopping:
                    self._wake.wait()
                if self._stopping:
                    return
                events, self._events = self._events, []
            try:
                self._handle(events)
            except Exception:
                log.exception("broker %d: controller role failed; resigning", self.broker_id)
                self._resign("an error")

    def _handle(self, events: list[str]) -> None:
        if "suspended" in events or "lost" in events:
            self._resign("the ZooKeeper connection was lost")
            if events[-1] in ("suspended", "lost"):
                return
        if self._controller is None and self._zk.connected:
            holder = self._holder()
            if holder is None:
                self._campaign()
            elif holder == self.broker_id and self._owns_controller_node():
                # Ours from before a lost connection, but no longer acted on: let it go, so
                # that an election (perhaps this broker again) gives the role a live holder.
                # (Another process given the same broker.id must leave it alone.)
                self._zk.delete(paths.CONTROLLER)
        if self._controller is not None and "brokers" in events:
            self._sync_brokers()

    def _owns_controller_node(self) -> bool:
        stat = self._zk.exists(paths.CONTROLLER)
        session = self._zk.client_id
        return stat is not None and session is not None and stat.ephemeralOwner == session[0]

    def _holder(self) -> int | None:
        """The broker id in ``/controller``, None if it is absent."""
        try:
            data, _stat = self._zk.get(paths.CONTROLLER)
        except NoNodeError:
            return None
        try:
            return int(json.loads(data)["brokerid"])
        except (ValueError, KeyError, TypeError):
            return -1

    def _campaign(self) -> None:
        store = ZooKeeperMetadataStore(self._zk)
        queues = ControllerRequestQueues(self._network)
        try:
            controller = Controller(
                self.config,
                store,
                queues,
                broker_ids=self._registered,
                controller_id=self.broker_id,
                keep_leaders=True,
            )
        except NotControllerError as err:
            log.info("broker %d: not elected controller: %s", self.broker_id, err)
            queues.close()
            return
        except BaseException:
            queues.close()
            raise
        log.info(
            "broker %d: elected controller with epoch %d",
            self.broker_id,
            controller.image().controller_epoch,
        )
        self._controller, self._store, self._queues = controller, store, queues
        self._unsubscribe = controller.subscribe(self._push)
        self._on_change(controller)
        self._sync_brokers(takeover=True)
        self._balancer = leader_balancer(self.config, controller.image, controller.elect_leaders)
        if self._balancer is not None:
            self._balancer.start()

    def _sync_brokers(self, *, takeover: bool = False) -> None:
        """Brings the controller's live set in line with the registrations (a new broker epoch
        counts as a bounce: out, then in again with its whole state)."""
        controller, queues = self._controller, self._queues
        if controller is None or queues is None:
            return
        with self._wake:
            registered = dict(self._registered)
        if takeover:
            controller.take_over({b: info.epoch for b, info in registered.items()})
            self._push(controller.image())
            return
        known = controller.live_broker_epochs()
        for broker_id in sorted(set(known) - set(registered)):
            log.info("controller: broker %d is gone", broker_id)
            queues.forget(broker_id)
            controller.unregister_broker(broker_id)
        for broker_id, info in sorted(registered.items()):
            if broker_id in known and known[broker_id] == info.epoch:
                continue
            if broker_id in known:
                log.info("controller: broker %d came back with a new epoch", broker_id)
                queues.forget(broker_id)
                controller.unregister_broker(broker_id)
            controller.register_broker(broker_id, broker_epoch=info.epoch)

    def _push(self, _changed: ClusterImage) -> None:
        """The controller's image to every live broker (this one too).

        Changes are committed on several threads and their listeners run after the commit,
        so two pushes can race; each queue keeps only the last UpdateMetadata put in it. So
        every push sends the controller's newest image, read and queued under one lock: the
        last one queued is never older than one queued before it.
        """
        queues, controller = self._queues, self._controller
        if queues is None or controller is None:
            return
        with self._push_lock:
            image = controller.image()
            with self._wake:
                registered = dict(self._registered)
            endpoints = {broker_id: endpoints_of(info) for broker_id, info in registered.items()}
            request = update_metadata_request(image, endpoints)
            for broker_id in sorted(image.live_brokers):
                try:
                    queues.send(broker_id, request)
                except TierlogError as err:
                    log.info("UpdateMetadata to broker %d not queued: %s", broker_id, err)

    def _resign(self, why: str) -> None:
        controller, store, queues = self._controller, self._store, self._queues
        if controller is None:
            return
        log.warning("broker %d: giving up the controller role: %s", self.broker_id, why)
        if self._balancer is not None:
            self._balancer.stop()
            self._balancer = None
        self._controller = self._store = self._queues = None
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._on_change(None)
        if queues is not None:
            queues.close()
        if store is not None:
            try:
                store.resign()
            except Exception as err:  # the session may be gone: the node goes with it
                log.info("releasing %s failed: %s", paths.CONTROLLER, err)
