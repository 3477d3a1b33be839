"""Client settings: Kafka's names and defaults, and clear errors for unknown keys and bad values."""

from __future__ import annotations

import pytest
from tierlog.client.config import AdminConfig, ConsumerConfig, ProducerConfig
from tierlog.errors import InvalidConfigError
from tierlog.records import Compression


def test_producer_defaults_are_kafkas() -> None:
    config = ProducerConfig.from_mapping({})
    assert config.to_mapping() == {
        "client.id": "",
        "acks": -1,
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.size": 16384,
        "compression.type": Compression.NONE,
        "retries": 2147483647,
        "retry.backoff.ms": 100,
        "retry.backoff.max.ms": 1000,
        "delivery.timeout.ms": 120000,
        "request.timeout.ms": 30000,
        "max.request.size": 1048576,
        "max.block.ms": 60000,
        "metadata.max.age.ms": 300000,
    }


def test_consumer_defaults_are_kafkas() -> None:
    config = ConsumerConfig.from_mapping(None)
    assert config.auto_offset_reset == "latest"
    assert config.isolation_level == "read_uncommitted"
    assert not config.read_committed
    assert (config.fetch_min_bytes, config.fetch_max_wait_ms) == (1, 500)
    assert (config.fetch_max_bytes, config.max_partition_fetch_bytes) == (52428800, 1048576)
    assert config.max_poll_records == 500


def test_values_from_a_properties_file_are_strings() -> None:
    config = ProducerConfig.from_mapping(
        {"linger.ms": "20", "compression.type": "ZSTD", "enable.idempotence": "false"}
    )
    assert (config.linger_ms, config.compression_type) == (20, Compression.ZSTD)
    assert config.enable_idempotence is False
    assert ConsumerConfig.from_mapping({"isolation.level": "read_committed"}).read_committed


@pytest.mark.parametrize("cls", [ProducerConfig, ConsumerConfig, AdminConfig])
def test_unknown_key_is_named(cls: type[ProducerConfig]) -> None:
    with pytest.raises(InvalidConfigError, match="'linger_ms'") as caught:
        cls.from_mapping({"linger_ms": 5})
    assert caught.value.key == "linger_ms"


@pytest.mark.parametrize(
    ("mapping", "key"),
    [
        ({"acks": "2"}, "acks"),
        ({"linger.ms": -1}, "linger.ms"),
        ({"batch.size": "big"}, "batch.size"),
        ({"batch.size": True}, "batch.size"),
        ({"compression.type": "brotli"}, "compression.type"),
        ({"enable.idempotence": "yes"}, "enable.idempotence"),
        ({"delivery.timeout.ms": 1000}, "delivery.timeout.ms"),
    ],
)
def test_bad_producer_values_name_the_key(mapping: dict[str, object], key: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        ProducerConfig.from_mapping(mapping)
    assert caught.value.key == key
    assert key in str(caught.value)


@pytest.mark.parametrize(
    ("mapping", "key"),
    [
        ({"auto.offset.reset": "smallest"}, "auto.offset.reset"),
        ({"isolation.level": "serializable"}, "isolation.level"),
        ({"max.poll.records": 0}, "max.poll.records"),
    ],
)
def test_bad_consumer_values_name_the_key(mapping: dict[str, object], key: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        ConsumerConfig.from_mapping(mapping)
    assert caught.value.key == key


def test_acks_all_and_minus_one_are_the_same() -> None:
    assert ProducerConfig.from_mapping({"acks": "all"}) == ProducerConfig.from_mapping({"acks": -1})


def test_weaker_acks_turn_default_idempotence_off() -> None:
    config = ProducerConfig.from_mapping({"acks": 1})
    assert (config.acks, config.enable_idempotence) == (1, False)


def test_idempotence_with_weaker_acks_is_refused() -> None:
    with pytest.raises(InvalidConfigError, match="acks=all") as caught:
        ProducerConfig.from_mapping({"acks": "0", "enable.idempotence": True})
    assert caught.value.key == "acks"


def test_idempotence_needs_retries() -> None:
    with pytest.raises(InvalidConfigError, match="retries"):
        ProducerConfig.from_mapping({"retries": 0})
    assert ProducerConfig.from_mapping({"retries": 0, "enable.idempotence": False}).retries == 0
