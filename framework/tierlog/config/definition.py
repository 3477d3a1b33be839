"""Declarative configuration definitions: what each key is and how raw values become typed ones.

A :class:`ConfigKey` describes one key (type, default, validator, importance, doc, dynamic or not,
synonyms). A :class:`ConfigDef` is an immutable collection of keys plus cross-key rules; its
:meth:`ConfigDef.parse` turns raw values (strings from files and the environment, TOML scalars,
Python objects) into a complete, validated ``dict``. Static loading and dynamic updates both go
through ``parse``, so a value accepted at startup is exactly a value accepted at runtime.
"""

from __future__ import annotations

import difflib
import enum
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Final

import attrs

from ..errors import InvalidConfigError
from .secrets import HIDDEN, Password, is_secret_name, show_value
from .validators import Validator

INT_MIN: Final = -(2**31)
INT_MAX: Final = 2**31 - 1
LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1


class ConfigType(enum.Enum):
    """The value type of a key; Kafka's names, so a Kafka operator reads them the same way."""

    BOOLEAN = "boolean"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"
    PASSWORD = "password"


class Importance(enum.Enum):
    """How likely an operator is to need the key; orders documentation, nothing else."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class _Required(enum.Enum):
    REQUIRED = "REQUIRED"

    def __repr__(self) -> str:
        return "REQUIRED"


#: Default of a key that has no default: the key must be given.
REQUIRED: Final = _Required.REQUIRED


class _Rejected(Exception):
    """A raw value that cannot be converted; carries the reason for the message."""


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _to_bool(raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        text = raw.strip().lower()
        if text in ("true", "false"):
            return text == "true"
    raise _Rejected("expected a boolean (true or false)")


def _integer_converter(low: int, high: int, what: str) -> Callable[[object], int]:
    def convert(raw: object) -> int:
        if isinstance(raw, int) and not isinstance(raw, bool):
            value = raw
        elif isinstance(raw, str) and _INTEGER.fullmatch(raw.strip()):
            value = int(raw.strip())
        else:
            raise _Rejected("expected an integer")
        if not low <= value <= high:
            raise _Rejected(f"expected {what} (between {low} and {high})")
        return value

    return convert


def _to_double(raw: object) -> float:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            pass
    raise _Rejected("expected a number")


def _to_string(raw: object) -> str:
    if isinstance(raw, str):
        return raw.strip()
    raise _Rejected("expected a string")


def _list_item(raw: object) -> str:
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (str, int, float)):
        return str(raw).strip()
    raise _Rejected("expected a list of strings (comma-separated, or an array)")


def _to_list(raw: object) -> tuple[str, ...]:
    if isinstance(raw, str):
        items = raw.split(",")
    elif isinstance(raw, (list, tuple)):
        items = [_list_item(item) for item in raw]
    else:
        raise _Rejected("expected a list of strings (comma-separated, or an array)")
    return tuple(item.strip() for item in items if item.strip())


def _to_password(raw: object) -> Password:
    if isinstance(raw, Password):
        return raw
    if isinstance(raw, str):
        return Password(raw.strip())
    raise _Rejected("expected a string")


_CONVERTERS: Final[dict[ConfigType, Callable[[object], object]]] = {
    ConfigType.BOOLEAN: _to_bool,
    ConfigType.INT: _integer_converter(INT_MIN, INT_MAX, "a 32-bit integer"),
    ConfigType.LONG: _integer_converter(LONG_MIN, LONG_MAX, "a 64-bit integer"),
    ConfigType.DOUBLE: _to_double,
    ConfigType.STRING: _to_string,
    ConfigType.LIST: _to_list,
    ConfigType.PASSWORD: _to_password,
}

_NULLS: Final = ("", "null")


@attrs.frozen
class ConfigKey:
    """One configuration key.

    A key whose default is ``None`` is nullable: ``null``, an empty string or ``None`` give
    ``None``. A key whose default is :data:`REQUIRED` must be set. ``inherited_from`` names the
    broker key whose value is the default of a topic key (Kafka's "server default property").
    """

    name: str
    type: ConfigType
    default: object
    doc: str = attrs.field(kw_only=True)
    importance: Importance = attrs.field(default=Importance.MEDIUM, kw_only=True)
    validator: Validator | None = attrs.field(default=None, kw_only=True)
    dynamic: bool = attrs.field(default=False, kw_only=True)
    synonyms: tuple[str, ...] = attrs.field(default=(), kw_only=True)
    inherited_from: str | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.default is not None and self.default is not REQUIRED:
            self.parse(self.default)

    def __repr__(self) -> str:
        """attrs' repr, except that a secret key's default is ``[hidden]``."""
        shown = []
        for field in attrs.fields(type(self)):
            value = getattr(self, field.name)
            hide = field.name == "default" and self.secret and value not in (None, REQUIRED)
            shown.append(f"{field.name}={HIDDEN if hide else repr(value)}")
        return f"ConfigKey({', '.join(shown)})"

    @property
    def nullable(self) -> bool:
        return self.default is None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def secret(self) -> bool:
        """Whether values of this key must never be shown."""
        return self.type is ConfigType.PASSWORD or is_secret_name(self.name)

    def parse(self, raw: object) -> object:
        """Convert ``raw`` to this key's type and validate it; raise ``InvalidConfigError``."""
        if raw is None or (
            self.nullable and isinstance(raw, str) and raw.strip().lower() in _NULLS
        ):
            if self.nullable:
                return None
            raise self.invalid(raw, "must not be null")
        try:
            value = _CONVERTERS[self.type](raw)
        except _Rejected as rejected:
            raise self.invalid(raw, str(rejected)) from None
        if self.validator is not None and not self.validator.accepts(value):
            raise self.invalid(raw, f"must be {self.validator.description}")
        return value

    def show(self, value: object) -> str:
        """Render a value of this key for people, hiding secrets."""
        return HIDDEN if self.secret else show_value(value)

    def invalid(self, raw: object, reason: str) -> InvalidConfigError:
        """The error for a bad value of this key, naming key, value (unless secret) and reason."""
        return InvalidConfigError(
            f"{self.name} = {self.show(raw)}: {reason}",
            key=self.name,
            value=HIDDEN if self.secret else raw,
        )


@attrs.frozen
class ConfigRule:
    """A constraint across several keys, checked on the complete parsed configuration.

    ``check`` receives every parsed value and raises ``InvalidConfigError`` naming the key
    at fault.
    """

    description: str
    keys: tuple[str, ...]
    check: Callable[[Mapping[str, object]], None]


@attrs.frozen
class ConfigDef:
    """An immutable set of keys, their synonyms and cross-key rules.

    Keys that start with one of ``raw_prefixes``, or with the value of one of ``prefix_keys``
    (for the broker: ``remote.log.storage.manager.impl.prefix``...), belong to a plugin: they are
    not unknown, and are kept as raw strings for that plugin to validate.
    """

    keys: tuple[ConfigKey, ...]
    rules: tuple[ConfigRule, ...] = ()
    raw_prefixes: tuple[str, ...] = ()
    prefix_keys: tuple[str, ...] = ()
    _by_name: dict[str, ConfigKey] = attrs.field(init=False, eq=False, repr=False)
    _canonical: dict[str, str] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        by_name: dict[str, ConfigKey] = {}
        canonical: dict[str, str] = {}
        for key in self.keys:
            for alias in (key.name, *key.synonyms):
                if alias in canonical:
                    raise ValueError(f"configuration key {alias!r} is defined twice")
                canonical[alias] = key.name
            by_name[key.name] = key
        for name in self.prefix_keys:
            if by_name.get(name) is None or by_name[name].type is not ConfigType.STRING:
                raise ValueError(f"prefix key {name!r} must be a defined string key")
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_canonical", canonical)

    def __iter__(self) -> Iterator[ConfigKey]:
        return iter(self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is a key or a synonym of one."""
        return isinstance(name, str) and name in self._canonical

    def __getitem__(self, name: str) -> ConfigKey:
        """The key called ``name`` or having it as a synonym; else ``InvalidConfigError``."""
        key = self.find(name)
        if key is None:
            raise self.unknown(name)
        return key

    @property
    def names(self) -> tuple[str, ...]:
        """Canonical names, in definition order."""
        return tuple(self._by_name)

    def find(self, name: str) -> ConfigKey | None:
        """The key called ``name`` or having it as a synonym, else ``None``."""
        canonical = self._canonical.get(name)
        return None if canonical is None else self._by_name[canonical]

    def suggest(self, name: str, *, cutoff: float = 0.6) -> str | None:
        """The canonical name closest to a misspelled one, if any is close enough."""
        matches = difflib.get_close_matches(name, self._canonical, n=1, cutoff=cutoff)
        return self._canonical[matches[0]] if matches else None

    def unknown(self, name: str, value: object = None) -> InvalidConfigError:
        """The error for an unknown key, with a suggestion when one is close."""
        suggestion = self.suggest(name)
        hint = f" (did you mean {suggestion!r}?)" if suggestion else ""
        return InvalidConfigError(
            f"unknown configuration key {name!r}{hint}",
            key=name,
            value=HIDDEN if is_secret_name(name) else value,
        )

    def defaults(self) -> dict[str, object]:
        """Every key's built-in default (required keys are left out)."""
        return {key.name: key.default for key in self.keys if not key.required}

    def canonicalize(self, raw: Mapping[str, object]) -> dict[str, object]:
        """Rename synonyms to canonical names; other names (unknown or plugin keys) are kept.

        Setting a key twice in one mapping, once under a synonym, is an error: which one was
        meant is ambiguous.
        """
        result: dict[str, object] = {}
        given_as: dict[str, str] = {}
        for name, value in raw.items():
            canonical = self._canonical.get(name, name)
            if canonical in given_as:
                raise InvalidConfigError(
                    f"{canonical} is set twice, as {given_as[canonical]!r} and as {name!r}",
                    key=canonical,
                )
            given_as[canonical] = name
            result[canonical] = value
        return result

    def plugin_prefixes(self, values: Mapping[str, object]) -> tuple[str, ...]:
        """Prefixes whose keys belong to plugins, given (partial) raw or parsed values."""
        found = list(self.raw_prefixes)
        for name in self.prefix_keys:
            key = self._by_name[name]
            prefix = key.parse(values[name]) if name in values else key.default
            if isinstance(prefix, str) and prefix:
                found.append(prefix)
        return tuple(found)

    def is_plugin_key(self, name: str, prefixes: tuple[str, ...]) -> bool:
        """Whether ``name`` is a plugin's key under one of ``prefixes`` (and not a core key)."""
        return name not in self._canonical and any(
            name.startswith(prefix) and len(name) > len(prefix) for prefix in prefixes
        )

    def parse(
        self, raw: Mapping[str, object], *, defaults: Mapping[str, object] | None = None
    ) -> dict[str, object]:
        """Turn raw values into a complete, validated configuration.

        Synonyms resolve, unknown keys are rejected (with a suggestion), every value is
        converted and validated, missing keys take ``defaults`` (else the built-in default),
        plugin keys are kept as strings, and finally the cross-key rules run on the result.
        """
        given = self.canonicalize(raw)
        prefixes = self.plugin_prefixes(given)
        parsed: dict[str, object] = {}
        plugin_values: dict[str, object] = {}
        for name, value in given.items():
            key = self._by_name.get(name)
            if key is not None:
                parsed[name] = key.parse(value)
            elif self.is_plugin_key(name, prefixes):
                plugin_values[name] = raw_string(value)
            else:
                raise self.unknown(name, value)
        values: dict[str, object] = {}
        for key in self.keys:
            if key.name in parsed:
                values[key.name] = parsed[key.name]
            elif defaults is not None and key.name in defaults:
                values[key.name] = key.parse(defaults[key.name])
            elif key.required:
                raise InvalidConfigError(
                    f"missing required configuration key {key.name!r}", key=key.name
                )
            else:
                values[key.name] = key.default
        values.update(plugin_values)
        self.check(values)
        return values

    def check(self, values: Mapping[str, object]) -> None:
        """Run every cross-key rule on a complete parsed configuration."""
        for rule in self.rules:
            rule.check(values)


def raw_string(value: object) -> str:
    """A plugin key's value as the string a properties file would have held."""
    if isinstance(value, Password):
        return value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(raw_string(item) for item in value)
    if value is None:
        return ""
    return str(value).strip()
