"""The harness itself: brokers start, elect one controller, and stop cleanly on SIGTERM."""

from __future__ import annotations

from tierlog.testing.processes import ProcessCluster


def test_three_processes_register_elect_one_controller_and_stop_cleanly(
    cluster: ProcessCluster,
) -> None:
    assert cluster.registered() == {0, 1, 2}
    controller = cluster.controller_id()
    assert controller in (0, 1, 2)
    counts = {b.broker_id: b.metric("KafkaController", "ActiveControllerCount") for b in cluster}
    assert counts == {b: (1.0 if b == controller else 0.0) for b in (0, 1, 2)}
    assert cluster.stop() == {0: 0, 1: 0, 2: 0}
    assert all("tierlog: stopped" in b.output() for b in cluster)
