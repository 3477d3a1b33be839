"""AlterPartition is idempotent, as in Kafka: a leader whose answer was lost (a timeout, the
controller failing over) asks again with the partition epoch it still has, and must learn the
current one rather than be refused forever. A batch of changes is one commit, each partition
answered on its own."""

from __future__ import annotations

import queue
from pathlib import Path

import pytest
from tierlog.config import BrokerConfig
from tierlog.coordination.file_store import FileMetadataStore
from tierlog.errors import InvalidUpdateVersionError, NotLeaderOrFollowerError, TierlogError
from tierlog.log import PartitionLog
from tierlog.model import TopicPartition
from tierlog.server.alter_partition_manager import AlterPartitionManager
from tierlog.server.controller import Controller
from tierlog.server.image import IsrChange, PartitionRegistration
from tierlog.server.partition import Partition
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
    controller: Controller,
) -> None:
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


class _FailingOnce:
    """A controller whose first AlterPartition fails with an unexpected error."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.calls = 0

    def alter_partitions(
        self, leader_id: int, changes: dict[TopicPartition, IsrChange]
    ) -> dict[TopicPartition, object]:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("the connection broke in an unexpected way")
        return self.controller.alter_partitions(leader_id, changes)  # type: ignore[return-value]


def test_a_batch_that_fails_unexpectedly_is_refused_not_left_pending(
    controller: Controller, tmp_path: Path
) -> None:
    """Each change of a batch whose sending failed is answered with an error, so its leader
    proposes it again after the backoff instead of waiting for an answer forever."""
    reg = controller.image().registration(TP)
    assert reg is not None
    plog = PartitionLog.open(tmp_path / "t-0", {})
    partition = Partition(plog, None, broker_id=reg.leader)
    answers: queue.Queue[object] = queue.Queue()
    failing = _FailingOnce(controller)
    manager = AlterPartitionManager(
        reg.leader,
        failing,  # type: ignore[arg-type]
        lambda _partition, _change, answer: answers.put(answer),
    )
    manager.start()
    try:
        change = IsrChange(reg.leader_epoch, reg.partition_epoch, (reg.leader,))
        manager.submit(partition, change)
        assert isinstance(answers.get(timeout=30), TierlogError)
        manager.submit(partition, change)
        again = answers.get(timeout=30)
        assert isinstance(again, PartitionRegistration) and again.isr == (reg.leader,)
    finally:
        manager.stop()
        plog.close()
