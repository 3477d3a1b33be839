"""Finding plugins: a fresh plugin manager per runtime, entry points, built-ins, and the switches.

Switches, read from the environment (and the ``plugins.disabled`` config key):

* ``TIERLOG_DISABLED_PLUGINS=a,b`` — block plugins by name; they are never imported.
* ``TIERLOG_DISABLE_PLUGIN_AUTOLOAD=1`` — load no third-party entry point except those named in
  ``TIERLOG_PLUGINS=a,b``. Built-ins still load.
* ``TIERLOG_TRACE_PLUGINS=1`` — print every hook call with its arguments and result to stderr.

An entry point may name a module or a class; a class is instantiated once per plugin manager, so
every runtime (every broker of an embedded cluster) has its own plugin state.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import pluggy

from . import ENTRY_POINT_GROUP, PROJECT_NAME, hookspecs
from .errors import DuplicateProviderError, PluginError, PluginLoadError

ENV_DISABLED = "TIERLOG_DISABLED_PLUGINS"
ENV_DISABLE_AUTOLOAD = "TIERLOG_DISABLE_PLUGIN_AUTOLOAD"
ENV_PLUGINS = "TIERLOG_PLUGINS"
ENV_TRACE = "TIERLOG_TRACE_PLUGINS"

#: Built-in plugins, registered like any other plugin (name -> "module:attribute").
BUILTIN_PLUGINS: dict[str, str] = {
    "memory": "tierlog.metadata.memory:InMemoryRemoteLogMetadataManager",
    "topic": "tierlog.metadata.topic_based:TopicBasedRemoteLogMetadataManager",
}

ROLE_STORAGE = "RemoteStorageManager"
ROLE_METADATA = "RemoteLogMetadataManager"
ROLE_BROKER_READY = "BrokerReadyCallback"
ROLE_HOOKS: dict[str, tuple[str, ...]] = {
    ROLE_STORAGE: hookspecs.REMOTE_STORAGE_MANAGER_HOOKS
    + hookspecs.REMOTE_STORAGE_MANAGER_OPTIONAL_HOOKS,
    ROLE_METADATA: hookspecs.REMOTE_LOG_METADATA_MANAGER_HOOKS
    + hookspecs.REMOTE_LOG_METADATA_MANAGER_OPTIONAL_HOOKS,
}
REQUIRED_ROLE_HOOKS: dict[str, tuple[str, ...]] = {
    ROLE_STORAGE: hookspecs.REMOTE_STORAGE_MANAGER_HOOKS,
    ROLE_METADATA: hookspecs.REMOTE_LOG_METADATA_MANAGER_HOOKS,
}


@attrs.frozen
class PluginSource:
    """Where a registered plugin came from."""

    name: str
    value: str
    distribution: str | None = None
    version: str | None = None
    builtin: bool = False


@attrs.frozen
class PluginContext:
    """Who runs a plugin, handed to ``tierlog_configure``."""

    name: str
    roles: tuple[str, ...]
    broker_id: int
    cluster_id: str | None
    log_dirs: tuple[str, ...]


@attrs.frozen
class PluginInfo:
    """One registered plugin as ``tierlog plugins`` shows it."""

    name: str
    distribution: str | None
    version: str | None
    builtin: bool
    roles: tuple[str, ...]
    hooks: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(
            self, value_serializer=lambda _i, _a, v: list(v) if isinstance(v, tuple) else v
        )


class TierlogPluginManager(pluggy.PluginManager):
    """pluggy's manager plus where each plugin came from and which roles it provides."""

    def __init__(self) -> None:
        super().__init__(PROJECT_NAME)
        self.add_hookspecs(hookspecs)
        self.sources: dict[str, PluginSource] = {}

    def register_plugin(self, plugin: object, source: PluginSource) -> None:
        if self.get_plugin(source.name) is not None:
            other = self.sources.get(source.name)
            raise DuplicateProviderError(
                f"two plugins are named {source.name!r}: {_origin(other)} and {_origin(source)}"
            )
        self.register(plugin, name=source.name)
        self.sources[source.name] = source

    def plugins_in_order(self) -> list[tuple[str, object]]:
        """Registered (not blocked) plugins in registration order."""
        return [(name, plugin) for name, plugin in self.list_name_plugin() if plugin is not None]

    def implemented_hooks(self, plugin: object) -> dict[str, bool]:
        """Hook name -> whether the plugin's implementation is a wrapper."""
        found: dict[str, bool] = {}
        for caller in self.get_hookcallers(plugin) or ():
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin:
                    found[caller.name] = impl.wrapper or impl.hookwrapper
        return found

    def roles_of(self, plugin: object) -> tuple[str, ...]:
        hooks = self.implemented_hooks(plugin)
        roles = [
            role
            for role, names in ROLE_HOOKS.items()
            if any(name in hooks and not hooks[name] for name in names)
        ]
        if "tierlog_on_broker_ready" in hooks:
            roles.append(ROLE_BROKER_READY)
        return tuple(roles)

    def providers(self, role: str) -> list[str]:
        """Names of the plugins that provide ``role``, in registration order."""
        return [name for name, plugin in self.plugins_in_order() if role in self.roles_of(plugin)]

    def info(self) -> list[PluginInfo]:
        rows = []
        for name, plugin in self.plugins_in_order():
            source = self.sources.get(name, PluginSource(name=name, value=repr(plugin)))
            rows.append(
                PluginInfo(
                    name=name,
                    distribution=source.distribution,
                    version=source.version,
                    builtin=source.builtin,
                    roles=self.roles_of(plugin),
                    hooks=tuple(sorted(self.implemented_hooks(plugin))),
                )
            )
        return rows


def _origin(source: PluginSource | None) -> str:
    if source is None:
        return "a plugin registered by code"
    if source.builtin:
        return f"the built-in {source.value}"
    return f"distribution {source.distribution!r} ({source.value})"


def _split(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _instantiate(obj: object) -> object:
    """A class becomes one instance per plugin manager; a module is used as it is."""
    return obj() if isinstance(obj, type) else obj


def make_plugin_manager(
    *,
    blocked: Iterable[str] = (),
    load_entry_points: bool = True,
    extra_plugins: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> TierlogPluginManager:
    """Build a fresh plugin manager: built-ins, entry points, then ``extra_plugins`` (for tests and
    embedding), honouring the block list, the autoload switch and tracing. Fails loudly on an
    unknown hook name or a provider missing required hooks."""
    env = os.environ if environ is None else environ
    pm = TierlogPluginManager()
    for name in [*blocked, *_split(env.get(ENV_DISABLED))]:
        pm.set_blocked(name)

    for name, target in BUILTIN_PLUGINS.items():
        if pm.is_blocked(name):
            continue
        module_name, _, attribute = target.partition(":")
        obj: object = importlib.import_module(module_name)
        if attribute:
            obj = getattr(obj, attribute)
        pm.register_plugin(_instantiate(obj), PluginSource(name=name, value=target, builtin=True))

    if load_entry_points:
        autoload = not env.get(ENV_DISABLE_AUTOLOAD)
        wanted = set(_split(env.get(ENV_PLUGINS)))
        _load_entry_points(pm, lambda name: autoload or name in wanted)

    for name, plugin in (extra_plugins or {}).items():
        if not pm.is_blocked(name):
            # A class, as from an entry point, gives each runtime (each broker) its own instance.
            pm.register_plugin(_instantiate(plugin), PluginSource(name=name, value=repr(plugin)))

    pm.check_pending()
    _check_roles_complete(pm)
    if env.get(ENV_TRACE):
        pm.trace.root.setwriter(sys.stderr.write)
        pm.enable_tracing()
    return pm


def _load_entry_points(pm: TierlogPluginManager, wanted: Any) -> None:
    seen: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        dist_name = dist.metadata["Name"] or "?"
        for ep in dist.entry_points:
            if ep.group != ENTRY_POINT_GROUP or pm.is_blocked(ep.name) or not wanted(ep.name):
                continue
            if ep.name in seen:
                if seen[ep.name] == f"{dist_name}:{ep.value}":
                    continue  # the same distribution seen twice on sys.path
                raise DuplicateProviderError(
                    f"two distributions register the tierlog plugin {ep.name!r}: "
                    f"{seen[ep.name]} and {dist_name}:{ep.value}"
                )
            seen[ep.name] = f"{dist_name}:{ep.value}"
            try:
                plugin = _instantiate(ep.load())
            except Exception as err:
                raise PluginLoadError(ep.name, dist_name, err) from err
            pm.register_plugin(
                plugin,
                PluginSource(
                    name=ep.name, value=ep.value, distribution=dist_name, version=dist.version
                ),
            )


def _check_roles_complete(pm: TierlogPluginManager) -> None:
    for name, plugin in pm.plugins_in_order():
        hooks = pm.implemented_hooks(plugin)
        for role in pm.roles_of(plugin):
            missing = [hook for hook in REQUIRED_ROLE_HOOKS.get(role, ()) if hook not in hooks]
            if missing:
                raise PluginError(
                    f"plugin {name!r} provides {role} but does not implement: {', '.join(missing)}"
                )


@attrs.frozen
class ConfigSection:
    """A plugin's declared configuration keys, for ``tierlog config``."""

    plugin: str
    prefix: str
    definition: Any


def plugin_config_sections(pm: TierlogPluginManager | None = None) -> list[ConfigSection]:
    """Every installed plugin that declares configuration keys, with the prefix they live under."""
    pm = pm or make_plugin_manager()
    sections = []
    for name, plugin in pm.plugins_in_order():
        definition = call_one(pm, plugin, "tierlog_config_definitions")
        if definition:
            sections.append(
                ConfigSection(plugin=name, prefix=f"plugin.{name}.", definition=definition[0])
            )
    return sections


def call_one(pm: pluggy.PluginManager, plugin: object, hook_name: str, **kwargs: Any) -> list[Any]:
    """Call one plugin's implementation of a 1:N hook (plus nothing else), keeping tracing on.

    Lifecycle phases go plugin by plugin so one failure can be attributed and cannot skip the
    others; returns [] when the plugin does not implement the hook.
    """
    caller = getattr(pm.hook, hook_name)
    if not any(impl.plugin is plugin for impl in caller.get_hookimpls()):
        return []
    others = [p for _, p in pm.list_name_plugin() if p is not None and p is not plugin]
    result: list[Any] = pm.subset_hook_caller(hook_name, remove_plugins=others)(**kwargs)
    return result
