"""The ZooKeeper paths are Kafka's, and a name can never reach outside its own node."""

from __future__ import annotations

import pytest
from tierlog.coordination import paths


def test_paths_follow_kafkas_data_model() -> None:
    assert paths.CONTROLLER == "/controller"
    assert paths.CONTROLLER_EPOCH == "/controller_epoch"
    assert paths.CLUSTER_ID == "/cluster/id"
    assert paths.PRODUCER_ID_BLOCK == "/latest_producer_id_block"
    assert paths.broker_path(3) == "/brokers/ids/3"
    assert paths.topic_path("orders") == "/brokers/topics/orders"
    assert paths.partition_state_path("orders", 2) == "/brokers/topics/orders/partitions/2/state"
    assert paths.topic_config_path("orders") == "/config/topics/orders"
    assert paths.broker_config_path(1) == "/config/brokers/1"
    assert paths.broker_config_path(None) == "/config/brokers/<default>"
    assert paths.broker_id_from_node("12") == 12


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "x\x00"])
def test_a_topic_name_that_is_not_one_node_is_refused(topic: str) -> None:
    with pytest.raises(ValueError, match="cannot be a ZooKeeper node name"):
        paths.topic_path(topic)
    with pytest.raises(ValueError, match="cannot be a ZooKeeper node name"):
        paths.topic_config_path(topic)


@pytest.mark.parametrize("bad", [-1, True, "1"])
def test_ids_must_be_non_negative_ints(bad: object) -> None:
    with pytest.raises(ValueError, match="broker id"):
        paths.broker_path(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="partition"):
        paths.partition_state_path("t", bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a broker id"):
        paths.broker_id_from_node("1a")
