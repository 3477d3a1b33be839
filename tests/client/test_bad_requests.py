"""Bad requests get the right error from every client and change nothing on the cluster."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from tierlog.client import Admin, Consumer, NewTopic, Producer
from tierlog.client.admin import AlterConfig, ConfigResource
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTimestampError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from tierlog.model import TopicPartition
from tierlog.server import protocol as p

from .conftest import create_topic

TP = TopicPartition("kept", 0)


@pytest.fixture
def kept(admin: Admin, make_producer: Callable[..., Producer]) -> Producer:
    """A topic with three records that every bad request below must leave alone."""
    create_topic(admin, TP.topic, 1)
    producer = make_producer()
    for value in (b"a", b"b", b"c"):
        producer.send(TP.topic, value)
    producer.flush()
    return producer


def _unchanged(admin: Admin) -> None:
    assert admin.list_topics() == {TP.topic}
    ends = admin.list_offsets(
        {
            TP: p.OffsetSpec.LATEST,
        }
    )
    starts = admin.list_offsets({TP: p.OffsetSpec.EARLIEST})
    assert (starts[TP].offset, ends[TP].offset) == (0, 3)


def test_unknown_topic(
    kept: Producer, admin: Admin, make_producer: Callable[..., Producer]
) -> None:
    producer = make_producer({"max.block.ms": 300})
    with pytest.raises(UnknownTopicOrPartitionError, match="'missing'"):
        producer.send("missing", b"v").result()
    with pytest.raises(UnknownTopicOrPartitionError, match="missing"):
        admin.describe_topics(["missing"])
    with pytest.raises(UnknownTopicOrPartitionError, match="missing"):
        admin.delete_topics(["missing"])
    with pytest.raises(UnknownTopicOrPartitionError, match="missing"):
        admin.list_offsets({TopicPartition("missing", 0): p.OffsetSpec.LATEST}, timeout_ms=300)
    _unchanged(admin)


def test_illegal_topic_name(
    kept: Producer, admin: Admin, make_producer: Callable[..., Producer]
) -> None:
    for name in ("bad name", "../escape", "a" * 250, "__internal"):
        with pytest.raises(InvalidTopicError):
            admin.create_topics([NewTopic(name, 1, 1)])
    with pytest.raises(InvalidTopicError):
        make_producer().send("bad/name", b"v").result()
    _unchanged(admin)


def test_topic_exists_and_bad_partition_counts(kept: Producer, admin: Admin) -> None:
    with pytest.raises(TopicExistsError, match="'kept'"):
        admin.create_topics([NewTopic(TP.topic, 3, 1)])
    with pytest.raises(InvalidPartitionsError):
        admin.create_topics([NewTopic("zero-partitions", 0, 1)])
    _unchanged(admin)


def test_offset_out_of_range(
    kept: Producer, admin: Admin, make_consumer: Callable[..., Consumer]
) -> None:
    consumer = make_consumer({"auto.offset.reset": "none"})
    consumer.assign([TP])
    consumer.seek(TP, 50)
    with pytest.raises(OffsetOutOfRangeError):
        consumer.poll(timeout_ms=200)
    with pytest.raises(OffsetOutOfRangeError, match="kept-0"):
        admin.delete_records({TP: 50})
    _unchanged(admin)


def test_record_larger_than_max_request_size_is_refused_by_the_producer(
    kept: Producer, admin: Admin
) -> None:
    oversized = kept.send(TP.topic, b"x" * 1_100_000)
    with pytest.raises(RecordTooLargeError, match=r"max\.request\.size"):
        oversized.result()
    _unchanged(admin)


def test_batch_larger_than_max_message_bytes_is_refused_by_the_broker(
    kept: Producer, admin: Admin, make_producer: Callable[..., Producer]
) -> None:
    admin.alter_configs(
        {ConfigResource.topic(TP.topic): [AlterConfig("max.message.bytes", "2000")]}
    )
    producer = make_producer({"max.request.size": 10_000_000})
    with pytest.raises(RecordTooLargeError):
        producer.send(TP.topic, b"x" * 5000).result()
    assert producer.send(TP.topic, b"small").result().offset == 3
    ends = admin.list_offsets({TP: p.OffsetSpec.LATEST})
    assert ends[TP].offset == 4


def test_bad_config_change_is_refused(kept: Producer, admin: Admin) -> None:
    resource = ConfigResource.topic(TP.topic)
    before = admin.describe_configs([resource])[resource]["retention.ms"].value
    with pytest.raises(InvalidConfigError):
        admin.alter_configs({resource: [AlterConfig("retention.ms", "soon")]})
    with pytest.raises(InvalidConfigError):
        admin.alter_configs({resource: [AlterConfig("no.such.config", "1")]})
    assert admin.describe_configs([resource])[resource]["retention.ms"].value == before
    _unchanged(admin)


def test_a_record_stamped_hours_ahead_fails_with_its_own_reason(
    kept: Producer, admin: Admin, make_producer: Callable[..., Producer]
) -> None:
    producer = make_producer({"linger.ms": 60_000})  # both records go out in one batch
    now = int(time.time() * 1000)
    fine = producer.send(TP.topic, b"fine", timestamp=now)
    ahead = producer.send(TP.topic, b"ahead", timestamp=now + 2 * 3_600_000)
    producer.flush()

    with pytest.raises(InvalidTimestampError, match=r"record 1 was refused: timestamp \d+ is out"):
        ahead.result()
    with pytest.raises(InvalidTimestampError, match="invalid timestamps: 1 record"):
        fine.result()
    _unchanged(admin)


def test_internal_topics_are_the_runtimes(
    cluster: EmbeddedCluster,
    kept: Producer,
    admin: Admin,
    make_producer: Callable[..., Producer],
) -> None:
    internal = "__remote_log_metadata"
    cluster.controller.create_topic(internal, 1, 1, {"cleanup.policy": "compact"}, internal=True)

    assert internal not in admin.list_topics()
    assert internal in admin.list_topics(internal=True)
    with pytest.raises(TopicAuthorizationFailedError, match=internal):
        admin.delete_topics([internal])
    with pytest.raises(InvalidTopicError, match="internal topic"):
        make_producer().send(internal, b"forged", partition=0).result()
    with pytest.raises(InvalidTopicError, match="deleting records"):
        admin.delete_records({TopicPartition(internal, 0): -1})
    with pytest.raises(InvalidConfigError, match=r"cleanup\.policy"):
        admin.alter_configs(
            {ConfigResource.topic(internal): [AlterConfig("cleanup.policy", "delete")]}
        )
    with pytest.raises(TopicExistsError):
        admin.create_topics([NewTopic(internal, 1, 1)])
    assert admin.list_topics(internal=True) == {TP.topic, internal}
    _unchanged(admin)


def test_oversized_topics_are_refused_by_policy(kept: Producer, admin: Admin) -> None:
    for partitions in (1_000_000, 2**31 - 1):
        with pytest.raises(PolicyViolationError, match=r"max\.partitions\.per\.request"):
            admin.create_topics([NewTopic("huge", partitions, 1)])
    _unchanged(admin)
