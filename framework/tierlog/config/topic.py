"""Topic configuration: per-topic overrides resolved against the broker's defaults.

As in Kafka, most topic keys have a broker-level counterpart that supplies their default
(``retention.ms`` <- ``log.retention.ms``, ``segment.bytes`` <- ``log.segment.bytes``,
``local.retention.ms`` <- ``log.local.retention.ms``...); :func:`resolve_topic_config` merges a
topic's own overrides over those. Every topic key is dynamic.

Cross-key rules (Kafka's ``LogConfig`` validation):

* ``min.compaction.lag.ms`` may not exceed ``max.compaction.lag.ms``;
* ``remote.storage.enable`` needs ``remote.log.storage.system.enable`` on the broker, is refused
  for a ``compact`` cleanup policy, and can only be turned off again together with
  ``remote.log.delete.on.disable=true`` (which deletes the remote data);
* with remote storage on, ``local.retention.ms``/``.bytes`` must be -2 (inherit the total) or at
  most ``retention.ms``/``.bytes``, and -1 only when the total is -1 too;
* with ``remote.log.copy.disable=true`` the local retentions must equal the totals (or be -2),
  since data that is no longer copied is only kept locally.

The retention rules only apply when remote storage is enabled, because local retention means
nothing otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Final

import attrs

from ..errors import InvalidConfigError
from .broker import (
    BOOLEAN,
    BROKER_CONFIG,
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    DOUBLE,
    INT,
    LIST,
    LONG,
    MIN_SEGMENT_BYTES,
    STRING,
    TIMESTAMP_TYPES,
    check_local_retention,
    effective_log_flush_interval_ms,
    effective_log_retention_ms,
    effective_log_roll_ms,
)
from .definition import LONG_MAX, ConfigDef, ConfigKey, ConfigRule, Importance
from .live import BrokerConfig
from .validators import at_least, between, list_of, one_of

_WEEK_MS: Final = 7 * 24 * 3_600_000
_HIGH: Final = Importance.HIGH

_TOPIC_KEYS: Final = (
    ConfigKey(
        "cleanup.policy",
        LIST,
        ("delete",),
        validator=list_of(one_of(*CLEANUP_POLICIES)),
        dynamic=True,
        importance=_HIGH,
        inherited_from="log.cleanup.policy",
        doc="delete: old segments are deleted; compact: only the latest record per key is kept.",
    ),
    ConfigKey(
        "delete.retention.ms",
        LONG,
        86400000,
        validator=at_least(0),
        dynamic=True,
        inherited_from="log.cleaner.delete.retention.ms",
        doc="How long a compacted topic keeps a tombstone (and an emptied transaction's marker) "
        "after the cleaner first passes it, so readers see the delete.",
    ),
    ConfigKey(
        "min.cleanable.dirty.ratio",
        DOUBLE,
        0.5,
        validator=between(0.0, 1.0),
        dynamic=True,
        inherited_from="log.cleaner.min.cleanable.ratio",
        doc="Share of a compacted log not yet cleaned above which the cleaner cleans it.",
    ),
    ConfigKey(
        "min.compaction.lag.ms",
        LONG,
        0,
        validator=at_least(0),
        dynamic=True,
        inherited_from="log.cleaner.min.compaction.lag.ms",
        doc="How long a record stays uncompacted at least.",
    ),
    ConfigKey(
        "max.compaction.lag.ms",
        LONG,
        LONG_MAX,
        validator=at_least(1),
        dynamic=True,
        inherited_from="log.cleaner.max.compaction.lag.ms",
        doc="How long a record may stay uncompacted at most: a log holding an older dirty "
        "segment is cleaned whatever its dirty ratio.",
    ),
    ConfigKey(
        "retention.ms",
        LONG,
        _WEEK_MS,
        validator=at_least(-1),
        dynamic=True,
        importance=_HIGH,
        inherited_from="log.retention.ms",
        doc="How long data is kept, local plus remote; -1 keeps it forever.",
    ),
    ConfigKey(
        "retention.bytes",
        LONG,
        -1,
        validator=at_least(-1),
        dynamic=True,
        importance=_HIGH,
        inherited_from="log.retention.bytes",
        doc="Size a partition may reach, local plus remote, before old segments go; -1 = no limit.",
    ),
    ConfigKey(
        "segment.bytes",
        INT,
        1073741824,
        validator=at_least(MIN_SEGMENT_BYTES),
        dynamic=True,
        inherited_from="log.segment.bytes",
        doc="Size at which the active segment is rolled.",
    ),
    ConfigKey(
        "segment.ms",
        LONG,
        _WEEK_MS,
        validator=at_least(1),
        dynamic=True,
        inherited_from="log.roll.ms",
        doc="Age at which the active segment is rolled, even if not full.",
    ),
    ConfigKey(
        "segment.index.bytes",
        INT,
        10485760,
        validator=at_least(4),
        dynamic=True,
        inherited_from="log.index.size.max.bytes",
        doc="Largest offset or time index of a segment.",
    ),
    ConfigKey(
        "index.interval.bytes",
        INT,
        4096,
        validator=at_least(0),
        dynamic=True,
        inherited_from="log.index.interval.bytes",
        doc="Bytes of records between two offset-index entries.",
    ),
    ConfigKey(
        "max.message.bytes",
        INT,
        1048588,
        validator=at_least(0),
        dynamic=True,
        inherited_from="message.max.bytes",
        doc="Largest record batch accepted for this topic.",
    ),
    ConfigKey(
        "message.timestamp.type",
        STRING,
        "CreateTime",
        validator=one_of(*TIMESTAMP_TYPES),
        dynamic=True,
        inherited_from="log.message.timestamp.type",
        doc="Whether record timestamps are the producer's or the broker's append time.",
    ),
    ConfigKey(
        "message.timestamp.before.max.ms",
        LONG,
        LONG_MAX,
        validator=at_least(0),
        dynamic=True,
        inherited_from="log.message.timestamp.before.max.ms",
        doc="How far in the past a produced record's CreateTime may be.",
    ),
    ConfigKey(
        "message.timestamp.after.max.ms",
        LONG,
        3_600_000,
        validator=at_least(0),
        dynamic=True,
        inherited_from="log.message.timestamp.after.max.ms",
        doc="How far in the future a produced record's CreateTime may be.",
    ),
    ConfigKey(
        "min.insync.replicas",
        INT,
        1,
        validator=at_least(1),
        dynamic=True,
        importance=_HIGH,
        inherited_from="min.insync.replicas",
        doc="Replicas that must acknowledge an acks=all write for it to succeed.",
    ),
    ConfigKey(
        "flush.messages",
        LONG,
        LONG_MAX,
        validator=at_least(1),
        dynamic=True,
        inherited_from="log.flush.interval.messages",
        doc="Records appended before the log is forced to disk.",
    ),
    ConfigKey(
        "flush.ms",
        LONG,
        LONG_MAX,
        validator=at_least(0),
        dynamic=True,
        inherited_from="log.flush.interval.ms",
        doc="Longest time a record stays unflushed.",
    ),
    ConfigKey(
        "compression.type",
        STRING,
        "producer",
        validator=one_of(*COMPRESSION_TYPES),
        dynamic=True,
        inherited_from="compression.type",
        doc="Codec of stored batches; 'producer' keeps whatever the producer used.",
    ),
    ConfigKey(
        "unclean.leader.election.enable",
        BOOLEAN,
        False,
        dynamic=True,
        inherited_from="unclean.leader.election.enable",
        doc="Let an out-of-sync replica become leader when no in-sync one is left (loses data).",
    ),
    ConfigKey(
        "file.delete.delay.ms",
        LONG,
        60000,
        validator=at_least(0),
        dynamic=True,
        inherited_from="log.segment.delete.delay.ms",
        doc="Delay between marking a local segment deleted and removing its files.",
    ),
    ConfigKey(
        "remote.storage.enable",
        BOOLEAN,
        False,
        dynamic=True,
        importance=_HIGH,
        doc="Tier this topic's rolled segments to remote storage.",
    ),
    ConfigKey(
        "local.retention.ms",
        LONG,
        -2,
        validator=at_least(-2),
        dynamic=True,
        inherited_from="log.local.retention.ms",
        doc="How long tiered data is also kept locally; -2 means retention.ms.",
    ),
    ConfigKey(
        "local.retention.bytes",
        LONG,
        -2,
        validator=at_least(-2),
        dynamic=True,
        inherited_from="log.local.retention.bytes",
        doc="Local size of a tiered partition before local segments go; -2 means retention.bytes.",
    ),
    ConfigKey(
        "remote.log.copy.disable",
        BOOLEAN,
        False,
        dynamic=True,
        doc="Stop copying segments; remote data stays readable and expires (KIP-950).",
    ),
    ConfigKey(
        "remote.log.delete.on.disable",
        BOOLEAN,
        False,
        dynamic=True,
        doc="Must be true to turn remote.storage.enable off; the remote data is then deleted.",
    ),
)

#: Broker values that are derived from several keys rather than copied from one.
_DERIVED_DEFAULTS: Final[dict[str, Callable[[Mapping[str, object]], object]]] = {
    "retention.ms": effective_log_retention_ms,
    "segment.ms": effective_log_roll_ms,
    "flush.ms": effective_log_flush_interval_ms,
}


def _int(values: Mapping[str, object], name: str) -> int:
    value = values[name]
    if not isinstance(value, int):
        raise TypeError(f"{name} is {value!r}, not an integer")
    return value


def _no_remote_storage_when_compacted(values: Mapping[str, object]) -> None:
    policy = values["cleanup.policy"]
    if values["remote.storage.enable"] and isinstance(policy, tuple) and "compact" in policy:
        raise InvalidConfigError(
            f"remote.storage.enable = true is not allowed with cleanup.policy "
            f"{','.join(policy)!r}: compacted topics cannot be tiered",
            key="remote.storage.enable",
            value=True,
        )


def _compaction_lags_in_order(values: Mapping[str, object]) -> None:
    low, high = _int(values, "min.compaction.lag.ms"), _int(values, "max.compaction.lag.ms")
    if low > high:
        raise InvalidConfigError(
            f"min.compaction.lag.ms = {low} is more than max.compaction.lag.ms = {high}: "
            "a record cannot have to stay uncompacted longer than it may",
            key="min.compaction.lag.ms",
            value=low,
        )


def _local_retention_within_total(values: Mapping[str, object]) -> None:
    if not values["remote.storage.enable"]:
        return
    for local_key, total_key in _LOCAL_TOTAL:
        check_local_retention(
            local_key, _int(values, local_key), total_key, _int(values, total_key)
        )


def _copy_disabled_keeps_everything_local(values: Mapping[str, object]) -> None:
    if not (values["remote.storage.enable"] and values["remote.log.copy.disable"]):
        return
    for local_key, total_key in _LOCAL_TOTAL:
        local, total = _int(values, local_key), _int(values, total_key)
        if local not in (-2, total):
            raise InvalidConfigError(
                f"{local_key} = {local} must be -2 or equal {total_key} ({total}) when "
                "remote.log.copy.disable is true",
                key=local_key,
                value=local,
            )


_LOCAL_TOTAL: Final = (
    ("local.retention.ms", "retention.ms"),
    ("local.retention.bytes", "retention.bytes"),
)

TOPIC_RULES: Final = (
    ConfigRule(
        "min.compaction.lag.ms is at most max.compaction.lag.ms",
        ("min.compaction.lag.ms", "max.compaction.lag.ms"),
        _compaction_lags_in_order,
    ),
    ConfigRule(
        "remote.storage.enable is not allowed with cleanup.policy compact",
        ("remote.storage.enable", "cleanup.policy"),
        _no_remote_storage_when_compacted,
    ),
    ConfigRule(
        "with remote storage, local.retention.* is -2 or at most retention.* "
        "(-1 only if that is -1)",
        ("local.retention.ms", "retention.ms", "local.retention.bytes", "retention.bytes"),
        _local_retention_within_total,
    ),
    ConfigRule(
        "with remote.log.copy.disable, local.retention.* is -2 or equals retention.*",
        ("remote.log.copy.disable", "local.retention.ms", "local.retention.bytes"),
        _copy_disabled_keeps_everything_local,
    ),
)

#: Every topic key; all of them are dynamic.
TOPIC_CONFIG: Final = ConfigDef(keys=_TOPIC_KEYS, rules=TOPIC_RULES)


def topic_defaults(broker: Mapping[str, object]) -> dict[str, object]:
    """Default of every topic key, taken from the parsed broker configuration."""
    defaults: dict[str, object] = {}
    for key in TOPIC_CONFIG:
        derive = _DERIVED_DEFAULTS.get(key.name)
        if derive is not None:
            defaults[key.name] = derive(broker)
        elif key.inherited_from is not None:
            defaults[key.name] = broker[key.inherited_from]
        else:
            defaults[key.name] = key.default
    return defaults


def _sorted_items(mapping: Mapping[str, object]) -> tuple[tuple[str, object], ...]:
    return tuple(sorted(mapping.items()))


def _frozen(mapping: Mapping[str, object]) -> Mapping[str, object]:
    return MappingProxyType(dict(mapping))


@attrs.frozen
class TopicConfig:
    """The effective configuration of one topic (an immutable value).

    ``overrides`` holds the parsed keys set on the topic itself; ``values`` holds every topic
    key, with the broker's defaults filled in. Build it with :func:`resolve_topic_config` and
    change it with :meth:`with_changes`.
    """

    overrides: Mapping[str, object] = attrs.field(converter=_frozen, eq=_sorted_items)
    values: Mapping[str, object] = attrs.field(converter=_frozen, eq=_sorted_items)

    def __getitem__(self, name: str) -> object:
        """The value of a topic key; unknown names raise ``InvalidConfigError``."""
        return self.values[TOPIC_CONFIG[name].name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __contains__(self, name: object) -> bool:
        return name in TOPIC_CONFIG

    def get(self, name: str, default: object = None) -> object:
        key = TOPIC_CONFIG.find(name)
        return default if key is None else self.values[key.name]

    def with_changes(
        self, changes: Mapping[str, object], broker: BrokerConfig | Mapping[str, object]
    ) -> TopicConfig:
        """A new config with ``changes`` applied (``None`` removes an override).

        Validation is the same as for a new topic, plus the rules about a transition: remote
        storage is only turned off with ``remote.log.delete.on.disable=true``.
        """
        merged = dict(self.overrides)
        for name, value in TOPIC_CONFIG.canonicalize(changes).items():
            key = TOPIC_CONFIG[name]
            if value is None:
                merged.pop(key.name, None)
            else:
                merged[key.name] = value
        updated = resolve_topic_config(merged, broker)
        if (
            self.values["remote.storage.enable"]
            and not updated.values["remote.storage.enable"]
            and not updated.values["remote.log.delete.on.disable"]
        ):
            raise InvalidConfigError(
                "remote.storage.enable = false: turning remote storage off deletes the remote "
                "data and needs remote.log.delete.on.disable=true; to keep the data read-only "
                "set remote.log.copy.disable=true instead",
                key="remote.storage.enable",
                value=False,
            )
        return updated


def resolve_topic_config(
    overrides: Mapping[str, object], broker: BrokerConfig | Mapping[str, object]
) -> TopicConfig:
    """A topic's effective config: its ``overrides`` over the defaults of ``broker``.

    ``broker`` is a live :class:`BrokerConfig` or a raw broker mapping (parsed with the broker
    definition). Raises ``InvalidConfigError`` naming the offending key.
    """
    if isinstance(broker, BrokerConfig):
        broker_values: Mapping[str, object] = broker.snapshot()
    else:
        broker_values = BROKER_CONFIG.parse(broker)
    given = TOPIC_CONFIG.canonicalize(overrides)
    values = TOPIC_CONFIG.parse(given, defaults=topic_defaults(broker_values))
    if values["remote.storage.enable"] and not broker_values["remote.log.storage.system.enable"]:
        raise InvalidConfigError(
            "remote.storage.enable = true needs remote.log.storage.system.enable=true "
            "on the broker",
            key="remote.storage.enable",
            value=True,
        )
    return TopicConfig(overrides={name: values[name] for name in given}, values=values)
