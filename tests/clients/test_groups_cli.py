"""``tierlog groups`` on a tiered topic: a committed offset that lies in the remote tier shows
its log end and lag like any other, and a reset to the earliest offset goes to the remote log
start, where a resumed member of the group then reads."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
from tierlog.cli import main

from .conftest import (
    TIERED_TOPIC,
    create_topic,
    end_offsets,
    fill,
    listening,
    make_records,
    wait_offloaded,
)

TOPIC = "tiered-orders"


def _rows(output: str) -> list[dict[str, str]]:
    lines = [line for line in output.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP "))
    header = lines[start].split()
    return [dict(zip(header, line.split(), strict=True)) for line in lines[start + 1 :]]


def test_a_committed_offset_in_the_remote_tier_is_described_and_reset(tmp_path: Path) -> None:
    settings = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 2}
    with listening(tmp_path / "data", remote_dir=tmp_path / "remote", **settings) as cluster:
        create_topic(cluster, TOPIC, 1, configs=TIERED_TOPIC)
        acked = fill(cluster, TOPIC, make_records(400, 1, tag="groups"))
        local_start = wait_offloaded(cluster, TOPIC, 1)[0]
        end = end_offsets(acked)[TOPIC, 0]
        committed = local_start // 2  # only in the remote tier now
        assert 0 < committed < local_start < end
        tp = TopicPartition(TOPIC, 0)
        consumer = KafkaConsumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="tiered-g",
            enable_auto_commit=False,
        )
        consumer.commit({tp: OffsetAndMetadata(committed, "", -1)})
        consumer.close()

        def groups(*args: str) -> str:
            bootstrap = ["--bootstrap-server", cluster.bootstrap_servers]
            result = CliRunner().invoke(main, ["groups", args[0], *bootstrap, *args[1:]])
            assert result.exit_code == 0, result.output
            return result.output

        (row,) = _rows(groups("describe", "tiered-g"))
        assert (row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) == (
            str(committed),
            str(end),
            str(end - committed),
        )
        (planned,) = _rows(
            groups("reset-offsets", "tiered-g", "--topic", TOPIC, "--to-earliest", "--execute")
        )
        assert planned["NEW-OFFSET"] == "0"

        resumed = KafkaConsumer(
            TOPIC,
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="tiered-g",
            enable_auto_commit=False,
        )
        first = []
        while not first:
            first = [r for rs in resumed.poll(1000, max_records=5).values() for r in rs]
        resumed.close()
        assert first[0].offset == 0
        assert first[0].value == acked[0].value
