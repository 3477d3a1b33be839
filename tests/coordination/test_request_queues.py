"""The controller's per-broker request queues keep each broker's requests in order."""

from __future__ import annotations

import threading
import time

from tierlog.coordination.request_queues import ControllerRequestQueues
from tierlog.server import protocol as p
from tierlog.server.transport import Transport


class StalledNetwork(Transport):
    """Delivers in-process, holding the first request on the wire until released, as a
    paused broker holds one; records what arrives, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: list[p.Request] = []
        self.on_wire = threading.Event()
        self.release = threading.Event()
        self._first = True

    def node_ids(self) -> tuple[int, ...]:
        return (0,)

    def _deliver(self, broker_id: int, request: p.Request) -> p.Response:
        if self._first:
            self._first = False
            self.on_wire.set()
            self.release.wait(30)
        self.arrived.append(request)
        return p.UpdateMetadataResponse()


def image(epoch: int) -> p.UpdateMetadataRequest:
    return p.UpdateMetadataRequest(1, epoch, topic_states=(), live_brokers=())


def test_a_broker_that_came_back_gets_its_old_requests_first_then_the_new_ones() -> None:
    network = StalledNetwork()
    queues = ControllerRequestQueues(network)
    try:
        queues.send(0, image(1))
        assert network.on_wire.wait(10)
        queues.forget(0)  # the broker's session expired; it registers again at once
        queues.send(0, image(2))
        time.sleep(0.3)  # the new image must not overtake the old one still on the wire
        assert network.arrived == []

        network.release.set()

        deadline = time.monotonic() + 10
        while len(network.arrived) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [r.controller_epoch for r in network.arrived] == [1, 2]
    finally:
        network.release.set()
        queues.close()
