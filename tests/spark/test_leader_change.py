"""Reading tiered data that two leaders uploaded: a crash mid-tiering, the new leader tiers on.

The first leader tiers a few segments and is killed; the new leader (a higher leader epoch)
uploads the rest, possibly again the range whose upload the crash left unfinished. Spark then
reads, with no broker running, from the surviving broker's log dirs: every tiered record once,
from the segments of both epochs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tierlog.model import RemoteLogSegmentState
from tierlog.testing import Scenario

from tests.spark.tiered import spark_settings

pytest.importorskip("tierlog_fsspec")

TOPIC = "moved"


def _values(count: int, tag: str) -> list[bytes]:
    return [f"{tag}-{n:05d}-".encode() + b"x" * 100 for n in range(count)]


@pytest.fixture
def settings(tmp_path: Path) -> dict[str, str]:
    return spark_settings(
        tmp_path, **{"replica.fetch.backoff.ms": "50", "replica.fetch.wait.max.ms": "100"}
    )


@pytest.fixture
def tiered_twice(
    tmp_path: Path, settings: dict[str, str]
) -> Iterator[tuple[Scenario, int, list[bytes]]]:
    """The scenario after the failover, the surviving leader, and every value produced."""
    first, second = _values(300, "first"), _values(300, "second")
    with Scenario(tmp_path / "scenario", settings, brokers=2, timeout_s=60.0) as scenario:
        scenario.create_topic(
            TOPIC, replication_factor=2, segment_bytes=4096, local_retention_bytes=1
        )
        scenario.produce(TOPIC, 0, first).expect_tiered(TOPIC, 0)
        old = scenario.leader(TOPIC, 0)
        scenario.leader_change(TOPIC, 0, clean=False)
        new = scenario.leader(TOPIC, 0)
        scenario.produce(TOPIC, 0, second).expect_tiered(TOPIC, 0)
        scenario.start_broker(old).expect_caught_up(TOPIC, 0, old)
        yield scenario, new, first + second


def test_every_tiered_record_is_read_once_across_both_leaders_uploads(
    spark: Any, settings: dict[str, str], tiered_twice: tuple[Scenario, int, list[bytes]]
) -> None:
    scenario, survivor, produced = tiered_twice
    segments = [
        s
        for s in scenario.remote_segments(TOPIC, 0)
        if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
    ]
    epochs = {epoch for s in segments for epoch, _ in s.segment_leader_epochs}
    assert len(epochs) >= 2, "both leaders' uploads are in remote storage"
    tiered_end = max(s.end_offset for s in segments) + 1
    log_dir = scenario.cluster.broker_config(survivor).get_list("log.dirs")[0]
    scenario.close()

    reader = spark.read.format("tierlog")
    for key, value in settings.items():
        reader = reader.option(f"tierlog.{key}", str(value))
    rows = (
        reader.option("log.dirs", log_dir)
        .option("topics", TOPIC)
        .load()
        .select("offset", "value", "leader_epoch")
        .collect()
    )
    read = sorted((r.offset, bytes(r.value)) for r in rows)
    assert read == list(enumerate(produced))[:tiered_end]
    assert {r.leader_epoch for r in rows} == epochs
