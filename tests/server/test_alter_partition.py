"""AlterPartition is idempotent, as in Kafka: a leader whose answer was lost (a timeout, the
controller failing over) asks again with the partition epoch it still has, and must learn the
current one rather than be refused forever. A batch of changes is one commit, each partition
answered on its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from tierlog.config import BrokerConfig
from tierlog.coordination.file_store import FileMetadataStore
from tierlog.errors import InvalidUpdateVersionError, NotLeaderOrFollowerError
from tierlog.model import TopicPartition
from tierlog.server.controller import Controller
from tierlog.server.image import IsrChange
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


def test_a_batch_is_committed_once_and_each_partition_answered_on_its_own(
    tmp_path: Path,
) -> None:
    controller = Controller(
        BrokerConfig.from_mapping({}),
        FileMetadataStore(tmp_path / "controller"),
        InProcessTransport(),
        (0, 1, 2),
    )
    for broker_id in (0, 1, 2):
        controller.register_broker(broker_id)
    controller.create_topic("many", 6, 3)
    images: list[object] = []
    controller.subscribe(images.append)
    regs = {
        TopicPartition("many", n): controller.image().registration(TopicPartition("many", n))
        for n in range(6)
    }
    leader = regs[TopicPartition("many", 0)].leader  # type: ignore[union-attr]
    changes = {}
    for tp, reg in regs.items():
        assert reg is not None
        if reg.leader == leader:
            changes[tp] = IsrChange(reg.leader_epoch, reg.partition_epoch, (leader,))
    valid = dict(changes)
    stale = TopicPartition("many", 0)
    changes[stale] = IsrChange(
        regs[stale].leader_epoch,  # type: ignore[union-attr]
        regs[stale].partition_epoch + 5,  # type: ignore[union-attr]
        (leader,),
    )
    del valid[stale]
    not_led = next(tp for tp, reg in regs.items() if reg is not None and reg.leader != leader)
    changes[not_led] = IsrChange(0, 0, (leader,))
    assert valid, "the leader of partition 0 leads others too (6 partitions over 3 brokers)"

    answers = controller.alter_partitions(leader, changes)

    assert len(images) == 1, "one commit for the whole batch"
    assert isinstance(answers[stale], InvalidUpdateVersionError)
    assert isinstance(answers[not_led], NotLeaderOrFollowerError)
    for tp in valid:
        now = controller.image().registration(tp)
        assert answers[tp] == now
        assert now is not None and now.isr == (leader,)
        assert now.partition_epoch == regs[tp].partition_epoch + 1  # type: ignore[union-attr]
    untouched = controller.image().registration(stale)
    assert untouched == regs[stale]
