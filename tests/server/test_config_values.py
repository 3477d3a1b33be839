"""How config values are rendered for DescribeConfigs: Kafka's text, secrets never shown."""

from __future__ import annotations

import attrs
from tierlog.config import BROKER_CONFIG, BrokerConfig, ConfigKey, ConfigType
from tierlog.server import protocol as p
from tierlog.server.configs import describe_broker, wire_value


def test_wire_values_are_kafkas_text() -> None:
    assert wire_value(True) == "true"
    assert wire_value(("delete", "compact")) == "delete,compact"
    assert wire_value(None) is None
    assert wire_value(500) == "500"


def test_sensitive_values_are_never_described() -> None:
    secret = ConfigKey(
        "ssl.keystore.password", ConfigType.PASSWORD, None, doc="A secret.", dynamic=True
    )
    definition = attrs.evolve(BROKER_CONFIG, keys=(*BROKER_CONFIG.keys, secret))
    config = BrokerConfig.from_mapping({"ssl.keystore.password": "hunter2"}, definition=definition)

    [entry] = describe_broker(
        config,
        {},
        ["ssl.keystore.password"],
        include_synonyms=True,
        include_documentation=True,
    )

    assert (entry.value, entry.is_sensitive) == (None, True)
    assert entry.config_source == p.ConfigSource.STATIC_BROKER_CONFIG
    assert entry.config_type == p.ConfigType.PASSWORD
    assert all(s.value is None for s in entry.synonyms)
    assert "hunter2" not in repr(entry)
