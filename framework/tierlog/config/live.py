"""The live broker configuration: read from anywhere, updated at runtime, observed by listeners.

Reads never block: the current values are an immutable mapping that an update replaces in one
assignment, so a reader sees either all of an update or none of it. Updates are serialized by a
lock, validated exactly like startup loading (the merged result goes through the same
``ConfigDef.parse``, cross-key rules included), and applied all-or-nothing. Listeners run after
the new values are in place, in registration order, still under the update lock so that two
updates are never reported out of order; keep them short. A listener that raises is logged and
does not stop the others.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType

import attrs

from ..errors import InvalidConfigError
from .broker import BROKER_CONFIG
from .definition import ConfigDef
from .secrets import Password, redact
from .sources import StrPath, load_sources

logger = logging.getLogger(__name__)

#: Called as ``listener(key, old_value, new_value)`` for each changed key it listens to.
ConfigListener = Callable[[str, object, object], None]


def _not_dynamic(name: str) -> InvalidConfigError:
    return InvalidConfigError(f"{name!r} is not dynamic; restart to change it", key=name)


@attrs.define(eq=False, repr=False)
class BrokerConfig:
    """A broker's configuration, safe to share between threads.

    Build it with :meth:`from_sources`, :meth:`from_file` or :meth:`from_mapping`. Look values
    up by canonical name or synonym (``config["remote.fetch.max.wait.ms"]``); plugin keys keep
    their full prefixed name and their raw string value (see :meth:`plugin_slice`).
    """

    _values: Mapping[str, object]
    _originals: Mapping[str, object]
    definition: ConfigDef = BROKER_CONFIG
    _lock: threading.RLock = attrs.field(factory=threading.RLock, init=False)
    _listeners: list[tuple[frozenset[str], ConfigListener]] = attrs.field(factory=list, init=False)

    @classmethod
    def from_sources(
        cls,
        file: StrPath | None = None,
        environ: Mapping[str, str] = os.environ,
        overrides: Mapping[str, object] | None = None,
        *,
        definition: ConfigDef = BROKER_CONFIG,
    ) -> BrokerConfig:
        """Defaults < ``file`` (TOML or .properties) < ``environ`` < ``overrides``."""
        raw = load_sources(file, environ, overrides, definition=definition)
        return cls._from_raw(raw, definition)

    @classmethod
    def from_file(cls, path: StrPath, *, definition: ConfigDef = BROKER_CONFIG) -> BrokerConfig:
        """Defaults < the file only; the environment is not read."""
        return cls.from_sources(path, {}, None, definition=definition)

    @classmethod
    def from_mapping(
        cls, mapping: Mapping[str, object], *, definition: ConfigDef = BROKER_CONFIG
    ) -> BrokerConfig:
        """Defaults < ``mapping``; the environment is not read."""
        return cls.from_sources(None, {}, mapping, definition=definition)

    @classmethod
    def _from_raw(cls, raw: Mapping[str, object], definition: ConfigDef) -> BrokerConfig:
        values = definition.parse(raw)
        return cls(
            values=MappingProxyType(values),
            originals=MappingProxyType(dict(raw)),
            definition=definition,
        )

    # --- reading -------------------------------------------------------------------------------

    def __getitem__(self, name: str) -> object:
        """The value of a key or synonym, or of a plugin key; ``KeyError`` for anything else."""
        values = self._values
        key = self.definition.find(name)
        if key is not None:
            return values[key.name]
        if name in values:
            return values[name]
        suggestion = self.definition.suggest(name)
        hint = f" (did you mean {suggestion!r}?)" if suggestion else ""
        raise KeyError(f"unknown configuration key {name!r}{hint}")

    def get(self, name: str, default: object = None) -> object:
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self.definition or name in self._values)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def snapshot(self) -> Mapping[str, object]:
        """Every current value (canonical names), as an immutable, consistent view."""
        return self._values

    def originals(self) -> dict[str, object]:
        """The raw values the configuration was built from, before defaults and parsing."""
        return dict(self._originals)

    def plugin_slice(self, prefix: str) -> dict[str, str]:
        """Plugin keys under ``prefix``, prefix stripped: ``plugin_slice("rsm.config.")``.

        Values are the raw strings; the plugin validates them against its own definition.
        """
        values = self._values
        return {
            name[len(prefix) :]: value
            for name, value in values.items()
            if isinstance(value, str)
            and name.startswith(prefix)
            and len(name) > len(prefix)
            and name not in self.definition
        }

    def get_int(self, name: str) -> int:
        """An INT or LONG value; ``TypeError`` if it is null or of another type."""
        value = self[name]
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeError(f"{name} is {redact(name, value)}, not an integer")

    def get_float(self, name: str) -> float:
        value = self[name]
        if isinstance(value, float):
            return value
        raise TypeError(f"{name} is {redact(name, value)}, not a number")

    def get_bool(self, name: str) -> bool:
        value = self[name]
        if isinstance(value, bool):
            return value
        raise TypeError(f"{name} is {redact(name, value)}, not a boolean")

    def get_str(self, name: str) -> str | None:
        """A STRING value, or ``None`` for a nullable key that is not set."""
        value = self[name]
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} is {redact(name, value)}, not a string")
        return value

    def get_list(self, name: str) -> tuple[str, ...]:
        value = self[name]
        if isinstance(value, tuple):
            return value
        raise TypeError(f"{name} is {redact(name, value)}, not a list")

    def get_password(self, name: str) -> Password | None:
        value = self[name]
        if value is not None and not isinstance(value, Password):
            raise TypeError(f"{name} is not a password")
        return value

    def __repr__(self) -> str:
        defaults = self.definition.defaults()
        changed = {
            name: value
            for name, value in self._values.items()
            if name not in defaults or defaults[name] != value
        }
        shown = ", ".join(f"{name}={redact(name, value)}" for name, value in changed.items())
        return f"BrokerConfig({shown})"

    __str__ = __repr__

    # --- updating ------------------------------------------------------------------------------

    def add_listener(
        self, keys: str | Iterable[str], callback: ConfigListener
    ) -> Callable[[], None]:
        """Call ``callback(key, old, new)`` whenever one of the dynamic ``keys`` changes.

        Synonyms resolve. Listening to a static key is refused, since it would never fire.
        Returns a function that removes the listener.
        """
        names = [keys] if isinstance(keys, str) else list(keys)
        canonical = []
        for name in names:
            key = self.definition[name]
            if not key.dynamic:
                raise _not_dynamic(key.name)
            canonical.append(key.name)
        entry = (frozenset(canonical), callback)
        with self._lock:
            self._listeners.append(entry)

        def remove() -> None:
            with self._lock:
                if entry in self._listeners:
                    self._listeners.remove(entry)

        return remove

    def update(self, changes: Mapping[str, object]) -> dict[str, tuple[object, object]]:
        """Apply dynamic ``changes`` all-or-nothing, then notify listeners.

        Raises ``InvalidConfigError`` (leaving the configuration untouched) for unknown or static
        keys, bad values, or a merged result that breaks a cross-key rule. Returns
        ``{key: (old, new)}`` for the keys whose value actually changed.
        """
        with self._lock:
            requested = self.definition.canonicalize(changes)
            prefixes = self.definition.plugin_prefixes(self._values)
            for name in requested:
                key = self.definition.find(name)
                if key is None:
                    if self.definition.is_plugin_key(name, prefixes):
                        raise _not_dynamic(name)
                    raise self.definition.unknown(name, requested[name])
                if not key.dynamic:
                    raise _not_dynamic(name)
            old = self._values
            new = MappingProxyType(self.definition.parse({**old, **requested}))
            changed = {name: (old[name], new[name]) for name in requested if old[name] != new[name]}
            self._values = new
            self._notify(changed)
            return changed

    def _notify(self, changed: Mapping[str, tuple[object, object]]) -> None:
        for keys, callback in list(self._listeners):
            for name, (old, new) in changed.items():
                if name not in keys:
                    continue
                try:
                    callback(name, old, new)
                except Exception:
                    logger.exception(
                        "configuration listener %r failed on %s change", callback, name
                    )
