"""Producer, consumer and admin settings under Kafka's client config names and defaults.

Each class is an immutable value built with ``from_mapping({"linger.ms": 10, ...})``. Values may
be given typed or as the strings a ``.properties`` file holds. An unknown key, a bad value or a
combination Kafka refuses raises :class:`~tierlog.errors.InvalidConfigError` naming the key, so a
typo such as ``linger_ms`` fails at construction instead of being silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Self, TypeVar

import attrs

from ..config import REQUIRED, ConfigKey, ConfigType
from ..config.validators import Validator, at_least, between, one_of
from ..errors import InvalidConfigError
from ..records import Compression

_T = TypeVar("_T")
_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1

#: The field metadata key that holds a setting's Kafka name.
_KEY = "kafka_key"


def _setting(default: Any, key: str, converter: Callable[[Any], Any]) -> Any:
    """An attrs field for one setting: its Kafka name and a converter that validates."""
    return attrs.field(default=default, converter=converter, metadata={_KEY: key})


def _bad(key: str, value: object, allowed: str) -> InvalidConfigError:
    return InvalidConfigError(f"{key} must be {allowed}, not {value!r}", key=key, value=value)


def _checked(
    key: str, kind: ConfigType, validator: Validator | None = None, *, fold_case: bool = False
) -> Callable[[Any], Any]:
    """A converter that parses and validates like every other tierlog config: through a
    ``ConfigKey``, so types, ranges and error messages are the same as the broker's."""
    spec = ConfigKey(key, kind, REQUIRED, doc=key, validator=validator)

    def convert(value: Any) -> Any:
        if fold_case and isinstance(value, str):
            value = value.strip().lower()
        return spec.parse(value)

    return convert


def _int(key: str, low: int = 0, high: int = _INT64_MAX) -> Callable[[Any], int]:
    kind = ConfigType.INT if high <= _INT32_MAX else ConfigType.LONG
    limit = at_least(low) if high in (_INT32_MAX, _INT64_MAX) else between(low, high)
    return _checked(key, kind, limit)


def _bool(key: str) -> Callable[[Any], bool]:
    return _checked(key, ConfigType.BOOLEAN)


def _choice(key: str, *allowed: str) -> Callable[[Any], str]:
    """One of ``allowed``, matched case-insensitively as Kafka's clients do."""
    return _checked(key, ConfigType.STRING, one_of(*allowed), fold_case=True)


def _str(key: str) -> Callable[[Any], str]:
    return _checked(key, ConfigType.STRING)


def _acks(value: Any) -> int:
    """``all`` and ``-1`` mean the same, as in Kafka."""
    text = str(value).strip().lower() if not isinstance(value, bool) else None
    if text == "all":
        return -1
    if text in ("-1", "0", "1"):
        return int(text)
    raise _bad("acks", value, "all, -1, 0 or 1")


def _compression(value: Any) -> Compression:
    if isinstance(value, Compression):
        return value
    if not isinstance(value, str):
        raise InvalidConfigError(
            f"compression.type must be a codec name, not {value!r}",
            key="compression.type",
            value=value,
        )
    try:
        return Compression.from_name(value)
    except ValueError as err:
        raise InvalidConfigError(
            f"compression.type: {err}", key="compression.type", value=value
        ) from None


def _keys(cls: type[Any]) -> dict[str, str]:
    """Kafka name -> attribute name for every setting of ``cls``."""
    return {f.metadata[_KEY]: f.name for f in attrs.fields(cls) if _KEY in f.metadata}


class _FromMapping:
    """``from_mapping`` and ``to_mapping`` shared by the three config classes."""

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None = None) -> Self:
        """Settings from Kafka-named keys; defaults for the rest; unknown keys are refused."""
        names = _keys(cls)
        kwargs: dict[str, Any] = {}
        for key, value in (mapping or {}).items():
            if key not in names:
                known = ", ".join(sorted(names))
                raise InvalidConfigError(
                    f"unknown {cls.__name__} key {key!r}; known keys: {known}", key=key, value=value
                )
            kwargs[names[key]] = value
        return cls._build(kwargs)

    @classmethod
    def _build(cls, kwargs: dict[str, Any]) -> Self:
        return cls(**kwargs)

    def to_mapping(self) -> dict[str, Any]:
        """The settings under their Kafka names."""
        return {key: getattr(self, name) for key, name in _keys(type(self)).items()}


@attrs.frozen
class ProducerConfig(_FromMapping):
    """A producer's settings (Kafka's ``ProducerConfig`` names and defaults).

    As in Kafka, idempotence is on by default and needs ``acks=all``: setting ``acks`` to 0 or 1
    without mentioning ``enable.idempotence`` turns idempotence off, while asking for both is an
    error.
    """

    client_id: str = _setting("", "client.id", _str("client.id"))
    acks: int = _setting(-1, "acks", _acks)
    enable_idempotence: bool = _setting(True, "enable.idempotence", _bool("enable.idempotence"))
    linger_ms: int = _setting(5, "linger.ms", _int("linger.ms"))
    batch_size: int = _setting(16384, "batch.size", _int("batch.size", 0, _INT32_MAX))
    compression_type: Compression = _setting(Compression.NONE, "compression.type", _compression)  # noqa: RUF009
    retries: int = _setting(_INT32_MAX, "retries", _int("retries", 0, _INT32_MAX))
    retry_backoff_ms: int = _setting(100, "retry.backoff.ms", _int("retry.backoff.ms"))
    retry_backoff_max_ms: int = _setting(1000, "retry.backoff.max.ms", _int("retry.backoff.max.ms"))
    delivery_timeout_ms: int = _setting(
        120000, "delivery.timeout.ms", _int("delivery.timeout.ms", 0, _INT32_MAX)
    )
    request_timeout_ms: int = _setting(
        30000, "request.timeout.ms", _int("request.timeout.ms", 0, _INT32_MAX)
    )
    max_request_size: int = _setting(
        1048576, "max.request.size", _int("max.request.size", 1, _INT32_MAX)
    )
    max_block_ms: int = _setting(60000, "max.block.ms", _int("max.block.ms"))
    metadata_max_age_ms: int = _setting(300000, "metadata.max.age.ms", _int("metadata.max.age.ms"))

    @classmethod
    def _build(cls, kwargs: dict[str, Any]) -> Self:
        acks = _acks(kwargs.get("acks", -1))
        if "enable_idempotence" not in kwargs and acks != -1:
            kwargs["enable_idempotence"] = False
        config = cls(**kwargs)
        if config.enable_idempotence and config.acks != -1:
            raise InvalidConfigError(
                "enable.idempotence requires acks=all; set acks to all or disable idempotence",
                key="acks",
                value=config.acks,
            )
        if config.enable_idempotence and config.retries == 0:
            raise InvalidConfigError(
                "enable.idempotence requires retries > 0", key="retries", value=config.retries
            )
        least = config.linger_ms + config.request_timeout_ms
        if config.delivery_timeout_ms < least:
            raise InvalidConfigError(
                "delivery.timeout.ms must be at least linger.ms + request.timeout.ms "
                f"({least}), not {config.delivery_timeout_ms}",
                key="delivery.timeout.ms",
                value=config.delivery_timeout_ms,
            )
        return config


@attrs.frozen
class ConsumerConfig(_FromMapping):
    """A consumer's settings (Kafka's ``ConsumerConfig`` names and defaults)."""

    client_id: str = _setting("", "client.id", _str("client.id"))
    auto_offset_reset: str = _setting(
        "latest", "auto.offset.reset", _choice("auto.offset.reset", "earliest", "latest", "none")
    )
    isolation_level: str = _setting(
        "read_uncommitted",
        "isolation.level",
        _choice("isolation.level", "read_uncommitted", "read_committed"),
    )
    fetch_min_bytes: int = _setting(1, "fetch.min.bytes", _int("fetch.min.bytes", 0, _INT32_MAX))
    fetch_max_wait_ms: int = _setting(
        500, "fetch.max.wait.ms", _int("fetch.max.wait.ms", 0, _INT32_MAX)
    )
    fetch_max_bytes: int = _setting(
        52428800, "fetch.max.bytes", _int("fetch.max.bytes", 0, _INT32_MAX)
    )
    max_partition_fetch_bytes: int = _setting(
        1048576, "max.partition.fetch.bytes", _int("max.partition.fetch.bytes", 0, _INT32_MAX)
    )
    max_poll_records: int = _setting(
        500, "max.poll.records", _int("max.poll.records", 1, _INT32_MAX)
    )
    retry_backoff_ms: int = _setting(100, "retry.backoff.ms", _int("retry.backoff.ms"))
    retry_backoff_max_ms: int = _setting(1000, "retry.backoff.max.ms", _int("retry.backoff.max.ms"))
    request_timeout_ms: int = _setting(
        30000, "request.timeout.ms", _int("request.timeout.ms", 0, _INT32_MAX)
    )
    default_api_timeout_ms: int = _setting(
        60000, "default.api.timeout.ms", _int("default.api.timeout.ms", 0, _INT32_MAX)
    )
    check_crcs: bool = _setting(True, "check.crcs", _bool("check.crcs"))
    metadata_max_age_ms: int = _setting(300000, "metadata.max.age.ms", _int("metadata.max.age.ms"))

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"


@attrs.frozen
class AdminConfig(_FromMapping):
    """An admin client's settings (Kafka's ``AdminClientConfig`` names and defaults)."""

    client_id: str = _setting("", "client.id", _str("client.id"))
    request_timeout_ms: int = _setting(
        30000, "request.timeout.ms", _int("request.timeout.ms", 0, _INT32_MAX)
    )
    default_api_timeout_ms: int = _setting(
        60000, "default.api.timeout.ms", _int("default.api.timeout.ms", 0, _INT32_MAX)
    )
    retry_backoff_ms: int = _setting(100, "retry.backoff.ms", _int("retry.backoff.ms"))
    retry_backoff_max_ms: int = _setting(1000, "retry.backoff.max.ms", _int("retry.backoff.max.ms"))


def coerce_config(config: _T | Mapping[str, Any] | None, cls: type[_T]) -> _T:
    """``config`` as a ``cls``: a mapping goes through ``from_mapping``, None means defaults."""
    if isinstance(config, cls):
        return config
    if config is None or isinstance(config, Mapping):
        result: _T = cls.from_mapping(config)  # type: ignore[attr-defined]
        return result
    raise TypeError(f"expected {cls.__name__} or a mapping, not {type(config).__name__}")
