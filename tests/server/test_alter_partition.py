"""AlterPartition is idempotent, as in Kafka: a leader whose answer was lost (a timeout, the
controller failing over) asks again with the partition epoch it still has, and must learn the
current one rather than be refused forever."""

from __future__ import annotations

from pathlib import Path

import pytest
from tierlog.config import BrokerConfig
from tierlog.coordination.file_store import FileMetadataStore
from tierlog.errors import InvalidUpdateVersionError
from tierlog.model import TopicPartition
from tierlog.server.controller import Controller
from tierlog.server.transport import InProcessTransport

TP = TopicPartition("t", 0)


@pytest.fixture
def controller(tmp_path: Path) -> Controller:
    controller = Controller(
        BrokerConfig.from_mapping({}),
        FileMetadataStore(tmp_path / "controller"),
        InProcessTransport(),
        (0, 1, 2),
    )
    for broker_id in (0, 1, 2):
        controller.register_broker(broker_id)
    controller.create_topic("t", 1, 3)
    return controller


def test_a_change_already_made_is_answered_with_the_current_registration(
    controller: Controller,
) -> None:
    before = controller.image().registration(TP)
    assert before is not None and len(before.isr) == 3
    shrunk = tuple(b for b in before.isr if b != before.replicas[-1])
    args = (TP, before.leader, before.leader_epoch, before.partition_epoch, shrunk)

    applied = controller.alter_partition(*args)
    again = controller.alter_partition(*args)

    assert applied.partition_epoch == before.partition_epoch + 1
    assert again == applied == controller.image().registration(TP)


def test_another_change_from_a_stale_partition_epoch_is_still_refused(
    controller: Controller,
) -> None:
    before = controller.image().registration(TP)
    assert before is not None
    shrunk = tuple(b for b in before.isr if b != before.replicas[-1])
    controller.alter_partition(
        TP, before.leader, before.leader_epoch, before.partition_epoch, shrunk
    )

    with pytest.raises(InvalidUpdateVersionError):
        controller.alter_partition(
            TP, before.leader, before.leader_epoch, before.partition_epoch, (before.leader,)
        )
