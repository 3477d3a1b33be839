"""DescribeConfigs and IncrementalAlterConfigs for broker and topic resources.

Values travel as Kafka renders them (``true``/``false``, lists joined with ``,``, null as
None); sensitive values are always None. ``config_source`` says which layer a value comes
from, as Kafka's does: a topic override, a dynamic broker config, the static broker file, or
the default. Changes are validated completely before any is applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum

import attrs

from ..config import BrokerConfig, ConfigKey, ConfigType, resolve_topic_config
from ..config.topic import TOPIC_CONFIG
from ..errors import InvalidConfigError, InvalidRequestError
from . import protocol as p

_TYPES = {
    ConfigType.BOOLEAN: p.ConfigType.BOOLEAN,
    ConfigType.INT: p.ConfigType.INT,
    ConfigType.LONG: p.ConfigType.LONG,
    ConfigType.DOUBLE: p.ConfigType.DOUBLE,
    ConfigType.STRING: p.ConfigType.STRING,
    ConfigType.LIST: p.ConfigType.LIST,
    ConfigType.PASSWORD: p.ConfigType.PASSWORD,
}


def wire_value(value: object) -> str | None:
    """A parsed config value as Kafka puts it on the wire."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    if isinstance(value, Enum):
        return str(value.value)
    return str(value)


def _entry(
    key: ConfigKey,
    value: object,
    source: int,
    *,
    synonyms: Iterable[p.DescribeConfigsSynonym],
    include_documentation: bool,
) -> p.DescribeConfigsResourceResult:
    sensitive = key.secret
    return p.DescribeConfigsResourceResult(
        name=key.name,
        value=None if sensitive else wire_value(value),
        read_only=False,
        is_default=source == p.ConfigSource.DEFAULT_CONFIG,
        config_source=source,
        is_sensitive=sensitive,
        synonyms=[
            s if not sensitive else p.DescribeConfigsSynonym(s.name, None, s.source)
            for s in synonyms
        ],
        config_type=_TYPES.get(key.type, p.ConfigType.UNKNOWN),
        documentation=key.doc if include_documentation else None,
    )


def _static(config: BrokerConfig) -> dict[str, object]:
    return config.definition.canonicalize(config.originals())


def describe_broker(
    config: BrokerConfig,
    dynamic: Mapping[str, str],
    names: Iterable[str] | None,
    *,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[p.DescribeConfigsResourceResult]:
    wanted = None if names is None else set(names)
    static = _static(config)
    results = []
    for key in config.definition:
        if wanted is not None and key.name not in wanted:
            continue
        layers: list[tuple[str, object, int]] = []
        if key.name in dynamic:
            layers.append((key.name, dynamic[key.name], p.ConfigSource.DYNAMIC_BROKER_CONFIG))
        if key.name in static:
            layers.append((key.name, static[key.name], p.ConfigSource.STATIC_BROKER_CONFIG))
        layers.append((key.name, key.default, p.ConfigSource.DEFAULT_CONFIG))
        synonyms = [p.DescribeConfigsSynonym(n, wire_value(v), s) for n, v, s in layers]
        result = _entry(
            key,
            config[key.name],
            layers[0][2],
            synonyms=synonyms if include_synonyms else (),
            include_documentation=include_documentation,
        )
        results.append(_read_only(result, not key.dynamic))
    return results


def _read_only(
    result: p.DescribeConfigsResourceResult, read_only: bool
) -> p.DescribeConfigsResourceResult:
    return attrs.evolve(result, read_only=read_only)


def describe_topic(
    overrides: Mapping[str, str],
    config: BrokerConfig,
    dynamic: Mapping[str, str],
    names: Iterable[str] | None,
    *,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[p.DescribeConfigsResourceResult]:
    wanted = None if names is None else set(names)
    resolved = resolve_topic_config(overrides, config)
    static = _static(config)
    results = []
    for key in TOPIC_CONFIG:
        if wanted is not None and key.name not in wanted:
            continue
        layers: list[tuple[str, object, int]] = []
        if key.name in resolved.overrides:
            layers.append((key.name, resolved.overrides[key.name], p.ConfigSource.TOPIC_CONFIG))
        parent = key.inherited_from
        if parent is not None:
            if parent in dynamic:
                layers.append((parent, dynamic[parent], p.ConfigSource.DYNAMIC_BROKER_CONFIG))
            if parent in static:
                layers.append((parent, static[parent], p.ConfigSource.STATIC_BROKER_CONFIG))
        layers.append((parent or key.name, key.default, p.ConfigSource.DEFAULT_CONFIG))
        synonyms = [p.DescribeConfigsSynonym(n, wire_value(v), s) for n, v, s in layers]
        results.append(
            _entry(
                key,
                resolved.values[key.name],
                layers[0][2],
                synonyms=synonyms if include_synonyms else (),
                include_documentation=include_documentation,
            )
        )
    return results


def topic_changes(
    overrides: Mapping[str, str], config: BrokerConfig, ops: Iterable[p.AlterableConfig]
) -> dict[str, str | None]:
    """The override changes ``ops`` ask for on a topic (None removes an override)."""
    resolved = resolve_topic_config(overrides, config)
    changes: dict[str, str | None] = {}
    for op in ops:
        key = TOPIC_CONFIG.find(op.name)
        if key is None:
            raise InvalidConfigError(f"unknown topic config {op.name!r}", key=op.name)
        current = changes.get(key.name, wire_value(resolved.values[key.name]))
        changes[key.name] = _apply(key, current, op)
    return changes


def broker_changes(config: BrokerConfig, ops: Iterable[p.AlterableConfig]) -> dict[str, str | None]:
    """The dynamic config changes ``ops`` ask for on a broker (None reverts to static)."""
    changes: dict[str, str | None] = {}
    for op in ops:
        key = config.definition.find(op.name)
        if key is None:
            raise config.definition.unknown(op.name, op.value)
        if not key.dynamic:
            raise InvalidConfigError(
                f"{key.name!r} is not dynamic; restart the broker to change it", key=key.name
            )
        current = changes.get(key.name, wire_value(config[key.name]))
        changes[key.name] = _apply(key, current, op)
    return changes


def _apply(key: ConfigKey, current: str | None, op: p.AlterableConfig) -> str | None:
    operation = op.config_operation
    if operation == p.AlterConfigOp.SET:
        if op.value is None:
            raise InvalidRequestError(f"SET {key.name} needs a value")
        return op.value
    if operation == p.AlterConfigOp.DELETE:
        return None
    if operation in (p.AlterConfigOp.APPEND, p.AlterConfigOp.SUBTRACT):
        if key.type is not ConfigType.LIST:
            raise InvalidRequestError(
                f"{key.name} is not a list; APPEND and SUBTRACT apply only to lists"
            )
        items = [i for i in (current or "").split(",") if i]
        given = [i.strip() for i in (op.value or "").split(",") if i.strip()]
        if operation == p.AlterConfigOp.APPEND:
            items.extend(i for i in given if i not in items)
        else:
            items = [i for i in items if i not in given]
        return ",".join(items)
    raise InvalidRequestError(f"unknown config operation {operation} for {key.name}")


def validated_broker_update(
    config: BrokerConfig, changes: Mapping[str, str | None]
) -> dict[str, object]:
    """The mapping to pass to ``BrokerConfig.update``: removals revert to the static value.

    Checked on a copy first, so an invalid change raises InvalidConfigError and applies nothing.
    """
    static = _static(config)
    update: dict[str, object] = {}
    for name, value in changes.items():
        if value is None:
            key = config.definition[name]
            update[name] = static.get(name, key.default)
        else:
            update[name] = value
    trial = BrokerConfig(
        values=config.snapshot(), originals=config.originals(), definition=config.definition
    )
    trial.update(update)
    return update
