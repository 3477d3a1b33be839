"""Both brokers of a tiered partition stop; the leader's checkpoint files are then erased or
damaged (garbage, a torn write) before they start again. A lost checkpoint may cost work (a
recovery, a replay of the metadata topic), never data: the brokers start, a damaged file is
logged by name, tiering continues without uploading any range twice, and every acknowledged
record is read back from offset 0."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tierlog.log import PartitionLog, files
from tierlog.metadata.checkpoint import CHECKPOINT_FILE_NAME
from tierlog.testing import Scenario

from tests.log.support import batch
from tests.remote.conftest import file_scenario

from .test_leader_failover import check_remote_lineage, values

pytest.importorskip("tierlog_fsspec")

SEGMENT = 4096
TOPIC = "t"

#: Where each checkpoint lives, from the broker's log dir.
CHECKPOINTS: dict[str, Callable[[Path], Path]] = {
    "leader-epoch": lambda logs: logs / f"{TOPIC}-0" / files.LEADER_EPOCH_CHECKPOINT,
    "replication-offset": lambda logs: logs / f"{TOPIC}-0" / "replication-offset-checkpoint",
    "recovery-point": lambda logs: logs / f"{TOPIC}-0" / files.RECOVERY_POINT_CHECKPOINT,
    "log-start-offset": lambda logs: logs / f"{TOPIC}-0" / files.LOG_START_OFFSET_CHECKPOINT,
    "remote-log-metadata": lambda logs: logs / CHECKPOINT_FILE_NAME,
}


def erase(path: Path) -> None:
    path.unlink()


def garbage(path: Path) -> None:
    path.write_bytes(b"\x00\xff not a checkpoint \xfe\n\x01\x02 -- @@\n")


def truncated(path: Path) -> None:
    """A torn write: the first half of the file, cut inside a line."""
    data = path.read_bytes()
    path.write_bytes(data[: max(1, len(data) // 2 - 1)])


DAMAGE: dict[str, Callable[[Path], None]] = {
    "erased": erase,
    "garbage": garbage,
    "truncated": truncated,
}


@pytest.fixture
def scenario(tmp_path: Path) -> Iterator[Scenario]:
    with file_scenario(tmp_path, brokers=2) as running:
        yield running


def log_dir(scenario: Scenario, broker_id: int) -> Path:
    return Path(scenario.cluster.broker_config(broker_id).get_list("log.dirs")[0])


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("which", [*CHECKPOINTS, "all"])
def test_leader_restarts_on_damaged_checkpoints(
    scenario: Scenario, caplog: pytest.LogCaptureFixture, which: str, damage: str
) -> None:
    restart_on_damaged_checkpoints(scenario, caplog, which, damage, clean=True)


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_crashed_leader_restarts_on_damaged_checkpoints(
    scenario: Scenario, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    """The same after a crash: recovery of the logs runs on the damaged files too."""
    restart_on_damaged_checkpoints(scenario, caplog, "all", damage, clean=False)


def restart_on_damaged_checkpoints(
    scenario: Scenario,
    caplog: pytest.LogCaptureFixture,
    which: str,
    damage: str,
    *,
    clean: bool,
) -> None:
    first, second = values(300, "a"), values(200, "b")
    scenario.create_topic(
        TOPIC, replication_factor=2, segment_bytes=SEGMENT, local_retention_bytes=1
    )
    leader = scenario.leader(TOPIC, 0)
    follower = 1 - leader
    scenario.expect_in_isr(TOPIC, 0, follower)
    scenario.produce(TOPIC, 0, first).expect_tiered(TOPIC, 0).expect_local_deleted(TOPIC, 0)
    scenario.expect_caught_up(TOPIC, 0, follower)

    # The follower first, so the leader stays the last in-sync replica and leads again.
    scenario.stop_broker(follower, clean=clean).stop_broker(leader, clean=clean)
    targets = [CHECKPOINTS[which]] if which != "all" else list(CHECKPOINTS.values())
    damaged = [target(log_dir(scenario, leader)) for target in targets]
    if not clean:  # a crash may come before a checkpoint was first written
        damaged = [path for path in damaged if path.exists()]
    for path in damaged:
        assert path.exists(), f"{path} was never written"
        DAMAGE[damage](path)

    caplog.set_level(logging.WARNING)
    scenario.start_broker(leader).expect_leader(TOPIC, 0, leader)
    scenario.start_broker(follower)
    if damage != "erased":
        logged = "\n".join(record.getMessage() for record in caplog.records)
        for path in damaged:
            assert path.name in logged, f"nothing logged about the damaged {path}"

    (
        scenario.consume(TOPIC, 0, from_offset=0, expect=first)
        .produce(TOPIC, 0, second)
        .expect_tiered(TOPIC, 0)
        .consume(TOPIC, 0, from_offset=0, expect=first + second)
    )
    check_remote_lineage(scenario, TOPIC)
    scenario.expect_caught_up(TOPIC, 0, follower)


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_log_rebuilds_its_leader_epochs_from_its_batches(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    """The partition log alone: every batch carries its leader's epoch, so a lost or damaged
    ``leader-epoch-checkpoint`` is rebuilt (and rewritten) at open, not a failure to open."""
    config = {"segment.bytes": 2048}
    directory = tmp_path / "t-0"
    plog = PartitionLog.open(directory, config)
    for epoch in (0, 0, 2, 2, 5):
        for _ in range(6):
            plog.append_as_leader(batch(5, value_size=60), epoch)
    written = plog.leader_epoch_cache.entries()
    assert [e.epoch for e in written] == [0, 2, 5] and plog.segment_count > 3
    plog.close()
    checkpoint = directory / files.LEADER_EPOCH_CHECKPOINT
    DAMAGE[damage](checkpoint)

    caplog.set_level(logging.WARNING)
    reopened = PartitionLog.open(directory, config)
    try:
        assert reopened.leader_epoch_cache.entries() == written
        assert reopened.log_end_offset == 150
        if damage != "erased":
            assert any(checkpoint.name in r.getMessage() for r in caplog.records)
    finally:
        reopened.close()
    again = PartitionLog.open(directory, config)  # the rebuilt checkpoint was written back
    try:
        assert again.leader_epoch_cache.entries() == written
    finally:
        again.close()
