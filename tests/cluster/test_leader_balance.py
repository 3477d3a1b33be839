"""A broker process killed and restarted gets its preferred leaderships back by itself."""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from tierlog.coordination.zookeeper_server import ZooKeeperEnsemble
from tierlog.testing.processes import ProcessCluster, wait_until

from .conftest import SESSION_TIMEOUT_MS


def test_a_restarted_broker_leads_its_preferred_partitions_again(
    tmp_path: Path, ensemble: ZooKeeperEnsemble
) -> None:
    settings = {"leader.imbalance.check.interval.seconds": 2, "offsets.topic.num.partitions": 3}
    with ProcessCluster(
        tmp_path / "brokers",
        ensemble.connect_string,
        3,
        settings=settings,
        session_timeout_ms=SESSION_TIMEOUT_MS,
    ) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})
        admin.create_topics([NewTopic("t", 6, 3)])["t"].result(timeout=60)

        assignment = json.loads(cluster.zk.get("/brokers/topics/t")[0])["partitions"]
        preferred = {int(index): replicas[0] for index, replicas in assignment.items()}

        def preferred_lead() -> bool:
            return all(cluster.leader("t", i) == preferred[i] for i in range(6))

        wait_until(preferred_lead, 60, "every partition led by its preferred replica")
        led_by_0 = [i for i in range(6) if preferred[i] == 0]
        assert led_by_0

        cluster.broker(0).kill()
        wait_until(
            lambda: all(cluster.leader("t", i) not in (0, -1) for i in led_by_0),
            60,
            "other replicas to take over broker 0's partitions",
        )
        cluster.restart(0)

        wait_until(preferred_lead, 90, "broker 0 to lead its preferred partitions again")
        wait_until(
            lambda: cluster.broker(0).metric("ReplicaManager", "LeaderCount") >= len(led_by_0),
            30,
            "broker 0's LeaderCount to count them",
        )
