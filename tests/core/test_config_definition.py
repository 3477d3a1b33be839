"""Key definitions: type conversion, validation, synonyms, unknown keys, secrets, Kafka defaults."""

from __future__ import annotations

import re

import pytest
from tierlog.config import (
    BROKER_CONFIG,
    HIDDEN,
    REQUIRED,
    BrokerConfig,
    ConfigDef,
    ConfigKey,
    ConfigType,
    Password,
    any_of,
    at_least,
    at_most,
    between,
    is_secret_name,
    list_of,
    non_empty,
    one_of,
)
from tierlog.errors import InvalidConfigError

LONG_MAX = 2**63 - 1

# Kafka's defaults and dynamic flags for the tiered-storage broker keys (reference §7.1).
KAFKA_REMOTE_DEFAULTS = [
    ("remote.log.storage.system.enable", False, False),
    ("remote.log.storage.manager.impl.prefix", "rsm.config.", False),
    ("remote.log.metadata.manager.impl.prefix", "rlmm.config.", False),
    ("remote.log.metadata.manager.listener.name", None, False),
    ("remote.log.metadata.custom.metadata.max.bytes", 128, False),
    ("remote.log.index.file.cache.total.size.bytes", 1073741824, True),
    ("remote.log.manager.thread.pool.size", 10, False),
    ("remote.log.manager.copier.thread.pool.size", -1, False),
    ("remote.log.manager.expiration.thread.pool.size", -1, False),
    ("remote.log.manager.task.interval.ms", 30000, False),
    ("remote.log.manager.task.retry.backoff.ms", 500, False),
    ("remote.log.manager.task.retry.backoff.max.ms", 30000, False),
    ("remote.log.manager.task.retry.jitter", 0.2, False),
    ("remote.log.reader.threads", 10, False),
    ("remote.log.reader.max.pending.tasks", 100, False),
    ("log.local.retention.ms", -2, False),
    ("log.local.retention.bytes", -2, False),
    ("remote.log.manager.copy.max.bytes.per.second", LONG_MAX, True),
    ("remote.log.manager.copy.quota.window.num", 11, False),
    ("remote.log.manager.copy.quota.window.size.seconds", 1, False),
    ("remote.log.manager.fetch.max.bytes.per.second", LONG_MAX, True),
    ("remote.log.manager.fetch.quota.window.num", 11, False),
    ("remote.log.manager.fetch.quota.window.size.seconds", 1, False),
    ("remote.fetch.max.wait.ms", 500, True),
    ("remote.list.offsets.request.timeout.ms", 30000, True),
    ("remote.log.storage.manager.name", None, False),
    ("remote.log.metadata.manager.name", "topic", False),
]

# Kafka's defaults and dynamic flags of the log cleaner's keys (``CleanerConfig``).
KAFKA_CLEANER_DEFAULTS = [
    ("log.cleaner.enable", True, False),
    ("log.cleaner.threads", 1, True),
    ("log.cleaner.io.max.bytes.per.second", 1.7976931348623157e308, True),
    ("log.cleaner.dedupe.buffer.size", 134217728, True),
    ("log.cleaner.io.buffer.load.factor", 0.9, True),
    ("log.cleaner.io.buffer.size", 524288, True),
    ("log.cleaner.backoff.ms", 15000, True),
    ("log.cleaner.min.cleanable.ratio", 0.5, False),
    ("log.cleaner.delete.retention.ms", 86400000, False),
    ("log.cleaner.min.compaction.lag.ms", 0, False),
    ("log.cleaner.max.compaction.lag.ms", LONG_MAX, False),
]

KAFKA_GENERAL_DEFAULTS = [
    ("broker.id", 0),
    ("cluster.id", None),
    ("log.dirs", ("/tmp/tierlog-logs",)),
    ("request.timeout.ms", 30000),
    ("num.partitions", 1),
    ("default.replication.factor", 1),
    ("min.insync.replicas", 1),
    ("num.replica.fetchers", 1),
    ("replica.lag.time.max.ms", 30000),
    ("replica.fetch.wait.max.ms", 500),
    ("replica.fetch.max.bytes", 1048576),
    ("replica.fetch.response.max.bytes", 10485760),
    ("replica.fetch.backoff.ms", 1000),
    ("unclean.leader.election.enable", False),
    ("auto.create.topics.enable", True),
    ("message.max.bytes", 1048588),
    ("log.segment.bytes", 1073741824),
    ("log.roll.ms", None),
    ("log.roll.hours", 168),
    ("log.retention.ms", None),
    ("log.retention.minutes", None),
    ("log.retention.hours", 168),
    ("log.retention.bytes", -1),
    ("log.index.interval.bytes", 4096),
    ("log.index.size.max.bytes", 10485760),
    ("log.flush.interval.messages", LONG_MAX),
    ("log.flush.interval.ms", None),
    ("log.retention.check.interval.ms", 300000),
    ("log.segment.delete.delay.ms", 60000),
    ("log.cleanup.policy", ("delete",)),
    ("log.message.timestamp.type", "CreateTime"),
    ("compression.type", "producer"),
    ("plugins.disabled", ()),
]


@pytest.mark.parametrize(("name", "default", "dynamic"), KAFKA_REMOTE_DEFAULTS)
def test_remote_log_keys_have_kafka_defaults_and_dynamic_flags(
    name: str, default: object, dynamic: bool
) -> None:
    config = BrokerConfig.from_mapping({})
    assert config[name] == default
    assert type(config[name]) is type(default)
    assert BROKER_CONFIG[name].dynamic is dynamic


@pytest.mark.parametrize(("name", "default"), KAFKA_GENERAL_DEFAULTS)
def test_general_broker_keys_have_kafka_defaults(name: str, default: object) -> None:
    assert BrokerConfig.from_mapping({})[name] == default


@pytest.mark.parametrize(("name", "default", "dynamic"), KAFKA_CLEANER_DEFAULTS)
def test_cleaner_keys_have_kafka_defaults(name: str, default: object, dynamic: bool) -> None:
    assert BrokerConfig.from_mapping({})[name] == default
    assert BROKER_CONFIG[name].dynamic is dynamic


def test_only_the_documented_broker_keys_are_dynamic() -> None:
    dynamic = {key.name for key in BROKER_CONFIG if key.dynamic}
    documented = KAFKA_REMOTE_DEFAULTS + KAFKA_CLEANER_DEFAULTS
    assert dynamic == {name for name, _, is_dynamic in documented if is_dynamic}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), ("TRUE", True), (" False ", False), ("fAlSe", False), (True, True)],
)
def test_booleans_accept_true_and_false_in_any_case(raw: object, expected: bool) -> None:
    config = BrokerConfig.from_mapping({"remote.log.storage.system.enable": raw})
    assert config["remote.log.storage.system.enable"] is expected


@pytest.mark.parametrize("raw", ["yes", "1", 1, 0, "on", ""])
def test_booleans_reject_anything_else(raw: object) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape("expected a boolean")) as caught:
        BrokerConfig.from_mapping({"auto.create.topics.enable": raw})
    assert caught.value.key == "auto.create.topics.enable"


def test_integers_parse_from_strings_and_toml_ints() -> None:
    config = BrokerConfig.from_mapping({"num.partitions": " 12 ", "broker.id": 3})
    assert config["num.partitions"] == 12
    assert config["broker.id"] == 3


def test_wrong_type_names_key_value_and_expected_type() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        BrokerConfig.from_mapping({"remote.fetch.max.wait.ms": "abc"})
    assert str(caught.value) == "remote.fetch.max.wait.ms = 'abc': expected an integer"
    assert caught.value.key == "remote.fetch.max.wait.ms"
    assert caught.value.value == "abc"


@pytest.mark.parametrize("raw", [1.5, "1.5", True, "1e3", [1]])
def test_integers_reject_non_integers(raw: object) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape("expected an integer")):
        BrokerConfig.from_mapping({"num.partitions": raw})


def test_int_keys_are_32_bit_and_long_keys_64_bit() -> None:
    with pytest.raises(InvalidConfigError, match=re.escape("expected a 32-bit integer")):
        BrokerConfig.from_mapping({"num.partitions": 2**31})
    config = BrokerConfig.from_mapping({"log.retention.bytes": str(2**40)})
    assert config["log.retention.bytes"] == 2**40
    with pytest.raises(InvalidConfigError, match=re.escape("expected a 64-bit integer")):
        BrokerConfig.from_mapping({"log.retention.bytes": 2**63})


def test_out_of_range_names_the_allowed_range() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        BrokerConfig.from_mapping({"remote.fetch.max.wait.ms": 0})
    assert str(caught.value) == "remote.fetch.max.wait.ms = 0: must be at least 1"


def test_doubles_and_their_range() -> None:
    config = BrokerConfig.from_mapping({"remote.log.manager.task.retry.jitter": "0.5"})
    assert config["remote.log.manager.task.retry.jitter"] == 0.5
    with pytest.raises(
        InvalidConfigError, match=re.escape("must be between 0.0 and 0.5 inclusive")
    ):
        BrokerConfig.from_mapping({"remote.log.manager.task.retry.jitter": 0.6})


def test_lists_from_comma_separated_strings_and_arrays() -> None:
    from_string = BrokerConfig.from_mapping({"log.dirs": " /a, /b,,/c "})
    from_array = BrokerConfig.from_mapping({"log.dirs": ["/a", "/b", "/c"]})
    assert from_string["log.dirs"] == from_array["log.dirs"] == ("/a", "/b", "/c")


def test_list_items_are_validated() -> None:
    config = BrokerConfig.from_mapping({"log.cleanup.policy": "compact,delete"})
    assert config["log.cleanup.policy"] == ("compact", "delete")
    with pytest.raises(InvalidConfigError, match=re.escape("each one of 'compact', 'delete'")):
        BrokerConfig.from_mapping({"log.cleanup.policy": "delete,shred"})
    with pytest.raises(InvalidConfigError, match=re.escape("log.dirs = '': must be non-empty")):
        BrokerConfig.from_mapping({"log.dirs": ""})


@pytest.mark.parametrize("raw", ["null", "NULL", "", None])
def test_nullable_keys_accept_null(raw: object) -> None:
    config = BrokerConfig.from_mapping({"log.retention.ms": raw, "cluster.id": raw})
    assert config["log.retention.ms"] is None
    assert config["cluster.id"] is None


def test_non_nullable_keys_reject_null() -> None:
    with pytest.raises(
        InvalidConfigError, match=re.escape("num.partitions = null: must not be null")
    ):
        BrokerConfig.from_mapping({"num.partitions": None})
    with pytest.raises(InvalidConfigError, match=re.escape("expected an integer")):
        BrokerConfig.from_mapping({"num.partitions": "null"})


def test_one_of_is_exact() -> None:
    config = BrokerConfig.from_mapping({"log.message.timestamp.type": "LogAppendTime"})
    assert config["log.message.timestamp.type"] == "LogAppendTime"
    with pytest.raises(InvalidConfigError, match=re.escape("one of 'CreateTime', 'LogAppendTime'")):
        BrokerConfig.from_mapping({"log.message.timestamp.type": "createtime"})


def test_minus_one_or_at_least_one() -> None:
    config = BrokerConfig.from_mapping({"remote.log.manager.copier.thread.pool.size": 4})
    assert config["remote.log.manager.copier.thread.pool.size"] == 4
    with pytest.raises(InvalidConfigError, match=re.escape("must be -1 or at least 1")):
        BrokerConfig.from_mapping({"remote.log.manager.copier.thread.pool.size": 0})


def test_unknown_key_suggests_the_closest_one() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        BrokerConfig.from_mapping({"remote.fetch.max.wiat.ms": 100})
    assert str(caught.value) == (
        "unknown configuration key 'remote.fetch.max.wiat.ms' "
        "(did you mean 'remote.fetch.max.wait.ms'?)"
    )
    assert caught.value.key == "remote.fetch.max.wiat.ms"


def test_unknown_key_without_a_close_one_has_no_suggestion() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        BrokerConfig.from_mapping({"zzz": 1})
    assert str(caught.value) == "unknown configuration key 'zzz'"


def test_synonyms_resolve_to_the_canonical_name() -> None:
    config = BrokerConfig.from_mapping(
        {
            "fetch.remote.max.wait.ms": "700",
            "remote.log.storage.manager.class.name": "fsspec",
            "log.dir": "/data",
        }
    )
    assert config["remote.fetch.max.wait.ms"] == config["fetch.remote.max.wait.ms"] == 700
    assert config["remote.log.storage.manager.name"] == "fsspec"
    assert config["log.dirs"] == ("/data",)
    assert "fetch.remote.max.wait.ms" not in dict(config.snapshot())
    assert BROKER_CONFIG["fetch.remote.max.wait.ms"].name == "remote.fetch.max.wait.ms"


def test_a_key_and_its_synonym_in_one_source_is_ambiguous() -> None:
    with pytest.raises(InvalidConfigError, match=re.escape("set twice")) as caught:
        BrokerConfig.from_mapping(
            {"remote.fetch.max.wait.ms": 100, "fetch.remote.max.wait.ms": 200}
        )
    assert caught.value.key == "remote.fetch.max.wait.ms"


def test_plugin_keys_are_kept_raw_and_sliced() -> None:
    config = BrokerConfig.from_mapping(
        {
            "rsm.config.bucket": "logs",
            "rsm.config.retries": 3,
            "rsm.config.enabled": True,
            "rlmm.config.remote.log.metadata.topic.num.partitions": "50",
            "plugin.fsspec.root": "memory://x",
        }
    )
    assert config.plugin_slice("rsm.config.") == {
        "bucket": "logs",
        "retries": "3",
        "enabled": "true",
    }
    assert config.plugin_slice("rlmm.config.") == {"remote.log.metadata.topic.num.partitions": "50"}
    assert config.plugin_slice("plugin.fsspec.") == {"root": "memory://x"}
    assert config["plugin.fsspec.root"] == "memory://x"


def test_plugin_prefixes_follow_the_configured_prefix_keys() -> None:
    config = BrokerConfig.from_mapping(
        {"remote.log.storage.manager.impl.prefix": "storage.", "storage.bucket": "b"}
    )
    assert config.plugin_slice("storage.") == {"bucket": "b"}
    with pytest.raises(
        InvalidConfigError, match=re.escape("unknown configuration key 'rsm.config.bucket'")
    ):
        BrokerConfig.from_mapping(
            {"remote.log.storage.manager.impl.prefix": "storage.", "rsm.config.bucket": "b"}
        )


def test_storage_and_metadata_prefixes_must_differ() -> None:
    with pytest.raises(InvalidConfigError, match=re.escape("must differ")) as caught:
        BrokerConfig.from_mapping({"remote.log.metadata.manager.impl.prefix": "rsm.config."})
    assert caught.value.key == "remote.log.metadata.manager.impl.prefix"


def test_remote_fetch_wait_must_be_below_request_timeout() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        BrokerConfig.from_mapping({"remote.fetch.max.wait.ms": 40000})
    assert str(caught.value) == (
        "remote.fetch.max.wait.ms = 40000 must be below request.timeout.ms (30000)"
    )
    assert caught.value.key == "remote.fetch.max.wait.ms"
    with pytest.raises(InvalidConfigError, match=re.escape("below request.timeout.ms (30000)")):
        BrokerConfig.from_mapping({"remote.fetch.max.wait.ms": 30000})
    raised = BrokerConfig.from_mapping(
        {"remote.fetch.max.wait.ms": 40000, "request.timeout.ms": 60000}
    )
    assert raised["remote.fetch.max.wait.ms"] == 40000


def test_replica_fetch_wait_must_not_exceed_lag_time() -> None:
    with pytest.raises(InvalidConfigError, match=re.escape("replica.lag.time.max.ms")):
        BrokerConfig.from_mapping(
            {"replica.fetch.wait.max.ms": 2000, "replica.lag.time.max.ms": 1000}
        )


def test_broker_local_retention_within_total() -> None:
    with pytest.raises(
        InvalidConfigError, match=re.escape("must not be above log.retention.ms (3600000)")
    ):
        BrokerConfig.from_mapping({"log.retention.hours": 1, "log.local.retention.ms": 3600001})
    with pytest.raises(
        InvalidConfigError, match=re.escape("only allowed when log.retention.bytes is -1")
    ):
        BrokerConfig.from_mapping({"log.retention.bytes": 100, "log.local.retention.bytes": -1})
    unlimited = BrokerConfig.from_mapping({"log.retention.ms": -1, "log.local.retention.ms": -1})
    assert unlimited["log.local.retention.ms"] == -1


def test_secret_values_never_show() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        BrokerConfig.from_mapping({"rsm.config.bucket": "b", "ssl.key.password": "hunter2"})
    assert "hunter2" not in str(caught.value)
    assert caught.value.value == HIDDEN
    config = BrokerConfig.from_mapping(
        {
            "rsm.config.aws.secret.access.key": "hunter2",
            "plugin.s3.session.token": "tok-123",
            "plugin.s3.region": "eu-west-1",
        }
    )
    text = repr(config) + str(config)
    assert "hunter2" not in text
    assert "tok-123" not in text
    assert "rsm.config.aws.secret.access.key=[hidden]" in text
    assert "plugin.s3.region='eu-west-1'" in text
    assert config.plugin_slice("rsm.config.") == {"aws.secret.access.key": "hunter2"}


def test_password_keys_hide_their_value_in_errors_and_reprs() -> None:
    definition = ConfigDef(
        keys=(
            ConfigKey("access", ConfigType.PASSWORD, None, doc="Access."),
            ConfigKey("api.token.ttl", ConfigType.INT, 5, doc="Named like a secret."),
        )
    )
    parsed = definition.parse({"access": " s3cr3t "})
    assert isinstance(parsed["access"], Password)
    assert parsed["access"].value == "s3cr3t"
    assert "s3cr3t" not in repr(parsed) + str(parsed["access"])
    with pytest.raises(InvalidConfigError) as caught:
        definition.parse({"access": 12345})
    assert "12345" not in str(caught.value)
    assert str(caught.value) == "access = [hidden]: expected a string"
    with pytest.raises(InvalidConfigError) as caught:
        definition.parse({"api.token.ttl": "sixty"})
    assert "sixty" not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("ssl.keystore.password", True),
        ("aws.SECRET.access", True),
        ("oauth.token.endpoint", True),
        ("gcs.credentials.file", True),
        ("s3.access.key", True),
        ("rsm.config.encryption.keys", True),
        ("sasl.jaas.config", True),
        ("ssl.keystore.certificate.chain", True),
        ("rsm.config.storage.client_kwargs.aws_access_key_id", True),
        ("plugin.x.apikey", True),
        ("s3.region", False),
        ("keystore.type", False),
        ("remote.fetch.max.wait.ms", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_a_secret_default_never_shows_in_the_key_or_definition_repr() -> None:
    key = ConfigKey("api.secret", ConfigType.PASSWORD, "default-s3cr3t", doc="API secret.")
    named = ConfigKey("encryption.keys", ConfigType.STRING, "k1:cmluZw==", doc="Key ring.")
    text = repr(key) + str(key) + repr(named) + repr(ConfigDef(keys=(key, named)))
    assert "default-s3cr3t" not in text and "cmluZw" not in text
    assert "default=[hidden]" in repr(key)
    assert "default=5" in repr(ConfigKey("n", ConfigType.INT, 5, doc="N."))


def test_required_keys_must_be_given() -> None:
    definition = ConfigDef(keys=(ConfigKey("bucket", ConfigType.STRING, REQUIRED, doc="Bucket."),))
    assert definition.parse({"bucket": "b"}) == {"bucket": "b"}
    with pytest.raises(
        InvalidConfigError, match=re.escape("missing required configuration key 'bucket'")
    ):
        definition.parse({})


def test_a_default_that_breaks_its_own_validator_is_a_definition_bug() -> None:
    with pytest.raises(InvalidConfigError, match=re.escape("must be at least 1")):
        ConfigKey("x", ConfigType.INT, 0, validator=at_least(1), doc="X.")


def test_duplicate_names_are_a_definition_bug() -> None:
    key = ConfigKey("a", ConfigType.INT, 1, doc="A.")
    other = ConfigKey("b", ConfigType.INT, 1, synonyms=("a",), doc="B.")
    with pytest.raises(ValueError, match=re.escape("defined twice")):
        ConfigDef(keys=(key, other))


def test_validator_descriptions_read_as_documentation() -> None:
    assert at_least(1).description == "at least 1"
    assert at_most(5).description == "at most 5"
    assert between(0, 0.5).description == "between 0 and 0.5 inclusive"
    assert one_of("a", "b").description == "one of 'a', 'b'"
    assert list_of(one_of("x")).description == "a list whose items are each 'x'"
    assert non_empty().description == "non-empty"
    assert any_of(one_of(-1), at_least(1)).description == "-1 or at least 1"
    assert not at_least(1).accepts(True)
    assert not one_of(1).accepts(True)


def test_every_key_is_documented() -> None:
    for key in BROKER_CONFIG:
        assert key.doc.strip(), key.name
