"""DescribeConfigs and IncrementalAlterConfigs for broker and topic resources.

Values travel as Kafka renders them (``true``/``false``, lists joined with ``,``, null as
None); sensitive values are always None. ``config_source`` says which layer a value comes
from, as Kafka's does: a topic override, a dynamic broker config, the static broker file, or
the default. Changes are validated completely before any is applied.

Each resource is answered on its own, with Kafka's codes (``ConfigAdminManager``,
``ConfigurationControlManager``, ``ControllerConfigurationValidator``): a resource named twice
in one request, a config named twice for one resource, a null value for anything but DELETE,
an unknown operation or resource type, an empty topic name, a broker other than this one:
INVALID_REQUEST; an illegal topic name: INVALID_TOPIC_EXCEPTION; an unknown topic:
UNKNOWN_TOPIC_OR_PARTITION; an unknown key, a bad value, APPEND or SUBTRACT on a key that is
not a list, or a change to a config an internal topic depends on: INVALID_CONFIG.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import TYPE_CHECKING

import attrs

from ..config import BrokerConfig, ConfigKey, ConfigType, resolve_topic_config
from ..config.topic import TOPIC_CONFIG
from ..errors import (
    InvalidConfigError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
    error_code_of,
)
from . import protocol as p
from .internal_topics import check_client_config_changes
from .topics import validate_topic_name

if TYPE_CHECKING:
    from .controller_view import ControllerView

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
    if operation == p.AlterConfigOp.DELETE:
        return None
    if operation not in (p.AlterConfigOp.SET, p.AlterConfigOp.APPEND, p.AlterConfigOp.SUBTRACT):
        raise InvalidRequestError(f"unknown config operation {operation} for {key.name}")
    if op.value is None:
        raise InvalidRequestError(f"{p.AlterConfigOp(operation).name} {key.name} needs a value")
    if operation == p.AlterConfigOp.SET:
        return op.value
    if key.type is not ConfigType.LIST:
        raise InvalidConfigError(
            f"{key.name} is not a list; APPEND and SUBTRACT apply only to lists", key=key.name
        )
    items = [i for i in (current or "").split(",") if i]
    given = [i.strip() for i in op.value.split(",") if i.strip()]
    if operation == p.AlterConfigOp.APPEND:
        items.extend(i for i in given if i not in items)
    else:
        items = [i for i in items if i not in given]
    return ",".join(items)


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


# --- the requests ---------------------------------------------------------------------------


def describe_configs(
    request: p.DescribeConfigsRequest,
    broker_id: int,
    config: BrokerConfig,
    controller: ControllerView,
) -> p.DescribeConfigsResponse:
    """DescribeConfigs on one broker: its own configs and any topic's."""
    image = controller.image()
    results = []
    for resource in request.resources:
        try:
            if resource.resource_type == p.ResourceType.TOPIC:
                validate_topic_name(resource.resource_name, internal_allowed=True)
                topic = image.topic(resource.resource_name)
                if topic is None:
                    raise UnknownTopicOrPartitionError(f"unknown topic {resource.resource_name!r}")
                entries = describe_topic(
                    topic.configs,
                    config,
                    controller.broker_configs(broker_id),
                    resource.configuration_keys,
                    include_synonyms=request.include_synonyms,
                    include_documentation=request.include_documentation,
                )
            elif resource.resource_type == p.ResourceType.BROKER:
                _check_broker_resource(resource.resource_name, broker_id)
                entries = describe_broker(
                    config,
                    controller.broker_configs(broker_id),
                    resource.configuration_keys,
                    include_synonyms=request.include_synonyms,
                    include_documentation=request.include_documentation,
                )
            else:
                raise InvalidRequestError(f"unsupported resource type {resource.resource_type}")
            results.append(
                p.DescribeConfigsResult(
                    resource.resource_type, resource.resource_name, configs=entries
                )
            )
        except Exception as err:
            results.append(
                p.DescribeConfigsResult(
                    resource.resource_type,
                    resource.resource_name,
                    error_code=error_code_of(err),
                    error_message=str(err) or type(err).__name__,
                )
            )
    return p.DescribeConfigsResponse(results)


def alter_configs(
    request: p.IncrementalAlterConfigsRequest,
    broker_id: int,
    config: BrokerConfig,
    controller: ControllerView,
) -> p.IncrementalAlterConfigsResponse:
    """IncrementalAlterConfigs on one broker: its own dynamic configs and any topic's."""
    named = Counter((r.resource_type, r.resource_name) for r in request.resources)
    results = []
    for resource in request.resources:
        try:
            if named[(resource.resource_type, resource.resource_name)] > 1:
                raise InvalidRequestError("each resource must appear at most once")
            names = [c.name for c in resource.configs]
            if len(set(names)) != len(names):
                raise InvalidRequestError("a config name appears twice for one resource")
            if resource.resource_type == p.ResourceType.TOPIC:
                _alter_topic(resource, config, controller, validate_only=request.validate_only)
            elif resource.resource_type == p.ResourceType.BROKER:
                _check_broker_resource(resource.resource_name, broker_id)
                changes = broker_changes(config, resource.configs)
                update = validated_broker_update(config, changes)
                if not request.validate_only:
                    config.update(update)
                    controller.record_broker_configs(resource.resource_name, changes)
            else:
                raise InvalidRequestError(f"unsupported resource type {resource.resource_type}")
            results.append(
                p.AlterConfigsResourceResponse(resource.resource_type, resource.resource_name)
            )
        except Exception as err:
            results.append(
                p.AlterConfigsResourceResponse(
                    resource.resource_type,
                    resource.resource_name,
                    error_code=error_code_of(err),
                    error_message=str(err) or type(err).__name__,
                )
            )
    return p.IncrementalAlterConfigsResponse(results)


def _alter_topic(
    resource: p.AlterConfigsResource,
    config: BrokerConfig,
    controller: ControllerView,
    *,
    validate_only: bool,
) -> None:
    if not resource.resource_name:
        raise InvalidRequestError("default topic resources are not allowed")
    validate_topic_name(resource.resource_name, internal_allowed=True)
    topic = controller.image().topic(resource.resource_name)
    if topic is None:
        raise UnknownTopicOrPartitionError(f"unknown topic {resource.resource_name!r}")
    changes = topic_changes(topic.configs, config, resource.configs)
    check_client_config_changes(topic.name, changes)
    controller.alter_topic_configs(topic.name, changes, validate_only=validate_only)


def _check_broker_resource(name: str, broker_id: int) -> None:
    if name != str(broker_id):
        raise InvalidRequestError(
            f"broker resource {name!r} must name this broker ({broker_id}); send requests "
            f"about another broker to that broker"
        )
