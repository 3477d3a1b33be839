"""``tierlog groups`` over a listener against kafka-python consumers, and the lag metric.

The group's committed offsets are whatever its consumer committed: every expectation is
computed from what the consumer and the producer were told, never written out by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner, Result
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from tierlog.cli import main
from tierlog.cluster import EmbeddedCluster
from tierlog.metrics.prometheus import prometheus_text

from .conftest import create_topic

TOPIC = "orders"
PARTITIONS = 2
PER_PARTITION = 8
#: Record timestamps, fixed so --to-datetime never depends on the clock: partition p's record
#: i is stamped BASE_MS + i seconds.
BASE_MS = 1_600_000_000_000  # 2020-09-13T12:26:40Z


def groups(cluster: EmbeddedCluster, *args: str) -> Result:
    return CliRunner().invoke(
        main, ["groups", *args[:1], "--bootstrap-server", cluster.bootstrap_servers, *args[1:]]
    )


def table(output: str) -> list[dict[str, str]]:
    """The rows of a column table printed by the tool, by header."""
    lines = [line for line in output.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP "))
    header = lines[start].split()
    return [dict(zip(header, line.split(), strict=True)) for line in lines[start + 1 :]]


@pytest.fixture
def cluster(make_cluster: Callable[..., EmbeddedCluster]) -> EmbeddedCluster:
    cluster = make_cluster()
    create_topic(cluster, TOPIC, PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    for i in range(PER_PARTITION):
        for partition in range(PARTITIONS):
            producer.send(TOPIC, b"v", partition=partition, timestamp_ms=BASE_MS + i * 1000)
    producer.flush()
    producer.close()
    return cluster


@pytest.fixture
def consumer(cluster: EmbeddedCluster) -> Iterator[KafkaConsumer]:
    """A member of group ``g`` that read and committed part of the topic, still in the group."""
    consumer = KafkaConsumer(
        TOPIC,
        bootstrap_servers=cluster.bootstrap_servers,
        group_id="g",
        client_id="reader-1",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    read = 0
    while read < PER_PARTITION:  # some of each partition, all of neither
        for records in consumer.poll(1000, max_records=3).values():
            read += len(records)
    consumer.commit()
    yield consumer
    consumer.close()


def committed(consumer: KafkaConsumer) -> dict[int, int]:
    found = {p: consumer.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
    return {p: offset for p, offset in found.items() if offset is not None}


def test_list_and_describe_show_offsets_log_ends_lag_and_the_member(
    cluster: EmbeddedCluster, consumer: KafkaConsumer
) -> None:
    listed = groups(cluster, "list")
    assert listed.exit_code == 0, listed.output
    assert listed.output.split() == ["g"]
    with_state = table(groups(cluster, "list", "--state").output)
    assert with_state == [{"GROUP": "g", "STATE": "Stable"}]

    result = groups(cluster, "describe", "g")

    assert result.exit_code == 0, result.output
    offsets = committed(consumer)
    members = table(groups(cluster, "describe", "g", "--members").output)
    assert [(m["CLIENT-ID"], m["#PARTITIONS"]) for m in members] == [("reader-1", "2")]
    member = members[0]["CONSUMER-ID"]
    assert member.startswith("reader-1-"), "the coordinator's member id: client id, then a UUID"
    rows = table(result.output)
    assert [(r["TOPIC"], int(r["PARTITION"])) for r in rows] == [(TOPIC, p) for p in range(2)]
    for row in rows:
        partition = int(row["PARTITION"])
        current = offsets.get(partition)
        assert row["CURRENT-OFFSET"] == ("-" if current is None else str(current))
        assert row["LOG-END-OFFSET"] == str(PER_PARTITION)
        assert row["LAG"] == ("-" if current is None else str(PER_PARTITION - current))
        assert row["CONSUMER-ID"] == member
        assert row["CLIENT-ID"] == "reader-1"
        assert row["HOST"].endswith("127.0.0.1")


def test_an_active_group_is_not_reset_and_an_inactive_one_is(
    cluster: EmbeddedCluster, consumer: KafkaConsumer
) -> None:
    before = committed(consumer)
    refused = groups(cluster, "reset-offsets", "g", "--all-topics", "--to-earliest", "--execute")
    assert refused.exit_code == 1
    assert "inactive" in refused.output and "Stable" in refused.output
    consumer.close()

    planned = groups(cluster, "reset-offsets", "g", "--topic", TOPIC, "--to-earliest", "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert {(r["PARTITION"], r["NEW-OFFSET"]) for r in table(planned.output)} == {
        ("0", "0"),
        ("1", "0"),
    }
    described = groups(cluster, "describe", "g")
    assert "has no active members" in described.output
    assert {int(r["PARTITION"]): r["CURRENT-OFFSET"] for r in table(described.output)} == {
        p: str(offset) for p, offset in before.items()
    }, "a dry run changes nothing"

    done = groups(
        cluster, "reset-offsets", "g", "--topic", f"{TOPIC}:1", "--to-offset", "3", "--execute"
    )
    assert done.exit_code == 0, done.output
    clamped = groups(
        cluster, "reset-offsets", "g", "--topic", f"{TOPIC}:0", "--to-offset", "999", "--execute"
    )
    assert table(clamped.output)[0]["NEW-OFFSET"] == str(PER_PARTITION)  # to the log end
    rows = {int(r["PARTITION"]): r for r in table(groups(cluster, "describe", "g").output)}
    assert (rows[0]["CURRENT-OFFSET"], rows[0]["LAG"]) == (str(PER_PARTITION), "0")
    assert (rows[1]["CURRENT-OFFSET"], rows[1]["LAG"]) == ("3", str(PER_PARTITION - 3))
    assert rows[1]["CONSUMER-ID"] == "-"

    # A new member of the group starts where the reset left it.
    resumed = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers, group_id="g", enable_auto_commit=False
    )
    tp = TopicPartition(TOPIC, 1)
    assert resumed.committed(tp) == 3
    resumed.close()


def test_to_datetime_finds_the_first_record_at_or_after_it(
    cluster: EmbeddedCluster, consumer: KafkaConsumer
) -> None:
    consumer.close()
    at_record_5 = "2020-09-13T14:26:45+02:00"  # BASE_MS + 5 s, in another zone
    result = groups(cluster, "reset-offsets", "g", "--all-topics", "--to-datetime", at_record_5)
    assert result.exit_code == 0, result.output
    assert "no action is performed without --execute" in result.output
    assert {r["NEW-OFFSET"] for r in table(result.output)} == {"5"}
    after_all = groups(
        cluster, "reset-offsets", "g", "--all-topics", "--to-datetime", "2030-01-01T00:00:00Z"
    )
    assert {r["NEW-OFFSET"] for r in table(after_all.output)} == {str(PER_PARTITION)}

    bad = groups(cluster, "reset-offsets", "g", "--all-topics", "--to-datetime", "13/09/2020")
    assert bad.exit_code == 1
    assert "13/09/2020" in bad.output and "YYYY-MM-DDTHH:mm:SS" in bad.output


def test_bad_requests_get_one_clear_error(cluster: EmbeddedCluster) -> None:
    unknown = groups(cluster, "describe", "nobody")
    assert unknown.exit_code == 1
    assert "consumer group 'nobody' does not exist" in unknown.output
    no_topic = groups(cluster, "reset-offsets", "g", "--topic", "missing", "--to-latest")
    assert no_topic.exit_code == 1 and "topic 'missing' does not exist" in no_topic.output
    no_partition = groups(cluster, "reset-offsets", "g", "--topic", f"{TOPIC}:7", "--to-latest")
    assert no_partition.exit_code == 1 and "no partition 7" in no_partition.output
    two_targets = groups(
        cluster, "reset-offsets", "g", "--all-topics", "--to-latest", "--to-earliest"
    )
    assert two_targets.exit_code == 2 and "exactly one of" in two_targets.output
    unreachable = CliRunner().invoke(main, ["groups", "list", "--bootstrap-server", "127.0.0.1:1"])
    assert unreachable.exit_code == 1 and "cannot reach 127.0.0.1:1" in unreachable.output


def test_delete_refuses_an_active_group_then_deletes_it(
    cluster: EmbeddedCluster, consumer: KafkaConsumer
) -> None:
    refused = groups(cluster, "delete", "g", "nobody")
    assert refused.exit_code == 1
    assert "group 'g' was not deleted: the group is not empty" in refused.output
    assert "group 'nobody' was not deleted: the group does not exist" in refused.output
    consumer.close()

    deleted = groups(cluster, "delete", "g")

    assert deleted.exit_code == 0, deleted.output
    assert "Deletion of requested consumer groups ('g') was successful." in deleted.output
    assert groups(cluster, "list").output.split() == []
    assert groups(cluster, "describe", "g").exit_code == 1


def test_lag_is_a_metric_per_group_and_partition(
    cluster: EmbeddedCluster, consumer: KafkaConsumer
) -> None:
    offsets = committed(consumer)
    coordinator = cluster.broker(0)
    assert coordinator.consumer_lag is not None
    coordinator.consumer_lag.refresh()
    for partition, offset in offsets.items():
        tags = {"consumergroup": "g", "topic": TOPIC, "partition": partition}
        assert cluster.metric(0, "ConsumerGroup", "Lag", **tags) == PER_PARTITION - offset
        assert cluster.metric(0, "ConsumerGroup", "CurrentOffset", **tags) == offset
    host = coordinator.plugin_host
    assert host is not None
    exported = prometheus_text(host.metrics)
    first = min(offsets)
    line = (
        f'tierlog_consumergroup_lag{{consumergroup="g",partition="{first}",topic="{TOPIC}"}} '
        f"{float(PER_PARTITION - offsets[first])}"
    )
    assert line in exported.splitlines()

    consumer.close()
    assert groups(cluster, "delete", "g").exit_code == 0
    coordinator.consumer_lag.refresh()
    with pytest.raises(KeyError):
        cluster.metric(0, "ConsumerGroup", "Lag", consumergroup="g", topic=TOPIC, partition=first)
