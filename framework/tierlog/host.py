"""A runtime's plugins: which provider serves each role, and the lifecycle that drives them all.

The order is fixed and enforced: ``start()`` configures every plugin and then registers every
plugin's metrics (KIP-877: configure before metrics); ``broker_ready()`` broadcasts the
BrokerReadyCallback once the runtime serves requests (KIP-1197); ``close()`` closes in reverse
order and reaches every plugin even when one raises. A configure or metrics failure stops the
start-up: nothing later runs, the plugins already configured are closed, and the error names the
plugin.
"""

from __future__ import annotations

import contextlib
import enum
import logging
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .config import BrokerConfig, ConfigSlice
from .errors import (
    BackendNotFoundError,
    DuplicateProviderError,
    InvalidConfigError,
    LifecycleError,
    PluginCallError,
)
from .metrics import MetricsRegistry
from .plugins import (
    ROLE_HOOKS,
    ROLE_METADATA,
    ROLE_STORAGE,
    PluginContext,
    TierlogPluginManager,
    call_one,
    make_plugin_manager,
)
from .spi import RemoteLogMetadataManager, RemoteStorageManager

log = logging.getLogger(__name__)


class LifecycleState(enum.Enum):
    CREATED = "created"
    CONFIGURED = "configured"
    METRICS_REGISTERED = "metrics registered"
    READY = "ready"
    CLOSED = "closed"


_ROLE_KEYS = {
    ROLE_STORAGE: ("remote.log.storage.manager.name", "remote.log.storage.manager.impl.prefix"),
    ROLE_METADATA: ("remote.log.metadata.manager.name", "remote.log.metadata.manager.impl.prefix"),
}


@attrs.define(eq=False)
class PluginHost:
    """Owns a runtime's plugin manager and drives its plugins through their lifecycle."""

    config: BrokerConfig
    plugin_manager: TierlogPluginManager
    metrics: MetricsRegistry
    #: role -> chosen provider name (empty when remote storage is off).
    chosen: dict[str, str] = attrs.field(factory=dict)
    state: LifecycleState = LifecycleState.CREATED
    #: plugin name -> exception its broker-ready callback raised (logged, not fatal).
    broker_ready_errors: dict[str, BaseException] = attrs.field(factory=dict)
    _participants: list[tuple[str, object]] = attrs.field(factory=list)
    _closer: contextlib.ExitStack = attrs.field(factory=contextlib.ExitStack)
    _facades: dict[str, Any] = attrs.field(factory=dict)
    _views: dict[str, Any] = attrs.field(factory=dict)

    @classmethod
    def create(
        cls,
        config: BrokerConfig,
        *,
        metrics: MetricsRegistry | None = None,
        plugin_manager: TierlogPluginManager | None = None,
        extra_plugins: Mapping[str, object] | None = None,
    ) -> PluginHost:
        """Build the plugin manager (unless given) and choose the providers named in ``config``."""
        if plugin_manager is None:
            plugin_manager = make_plugin_manager(
                blocked=config.get_list("plugins.disabled"), extra_plugins=extra_plugins
            )
        host = cls(
            config=config, plugin_manager=plugin_manager, metrics=metrics or MetricsRegistry()
        )
        if config.get_bool("remote.log.storage.system.enable"):
            for role in (ROLE_STORAGE, ROLE_METADATA):
                host.chosen[role] = host._choose(role)
        dormant = {
            name
            for role in ROLE_HOOKS
            for name in plugin_manager.providers(role)
            if host.chosen.get(role) != name
        }
        host._participants = [
            (name, plugin)
            for name, plugin in plugin_manager.plugins_in_order()
            if name not in dormant
        ]
        return host

    def _choose(self, role: str) -> str:
        name_key, _ = _ROLE_KEYS[role]
        wanted = self.config.get(name_key)
        installed = self.plugin_manager.providers(role)
        if wanted:
            if wanted not in installed:
                listing = ", ".join(installed) or "none"
                raise BackendNotFoundError(
                    f"{name_key} = {wanted!r}, but no installed plugin of that name provides "
                    f"{role}; installed {role} plugins: {listing}"
                )
            return str(wanted)
        if len(installed) == 1:
            return installed[0]
        if not installed:
            raise BackendNotFoundError(
                f"remote.log.storage.system.enable is true but no {role} plugin is installed"
            )
        raise DuplicateProviderError(
            f"several {role} plugins are installed ({', '.join(installed)}); "
            f"choose one with {name_key}"
        )

    @property
    def participants(self) -> tuple[str, ...]:
        """Names of the plugins this host configures: every plugin but the providers not chosen."""
        return tuple(name for name, _ in self._participants)

    def __repr__(self) -> str:
        """State, roles and plugin names only: the configuration may hold secrets."""
        return (
            f"PluginHost(state={self.state.value!r}, chosen={self.chosen!r}, "
            f"plugins={list(self.participants)!r})"
        )

    # --- lifecycle ------------------------------------------------------------------------

    def check_config(self) -> None:
        """Validate every participating plugin's slice exactly as :meth:`start` does before it
        configures the plugin, without configuring or starting anything (``config --check``).

        :raises InvalidConfigError: naming the full key (``rsm.config.chunk.size``).
        """
        for name, plugin in self._participants:
            self._slice_for(name, plugin)

    def start(self) -> None:
        """Configure every plugin, then register every plugin's metrics."""
        self._require(LifecycleState.CREATED, "start")
        try:
            for name, plugin in self._participants:
                config = self._slice_for(name, plugin)
                self._run(
                    name, plugin, "configure", config=config, context=self._context(name, plugin)
                )
                self._closer.callback(self._close_one, name, plugin)
            self.state = LifecycleState.CONFIGURED
            for name, plugin in self._participants:
                view = self._views[name] = self.metrics.for_plugin(
                    name, *self.plugin_manager.roles_of(plugin)
                )
                self._run(name, plugin, "register_metrics", metrics=view)
            self.state = LifecycleState.METRICS_REGISTERED
        except BaseException:
            try:
                self.close()
            except PluginCallError as close_error:
                log.error("while stopping after a failed start: %s", close_error)
            raise

    def broker_ready(self, broker: Any) -> None:
        """Broadcast the BrokerReadyCallback; a failing callback is logged, not fatal."""
        self._require(LifecycleState.METRICS_REGISTERED, "broker_ready")
        for name, plugin in self._participants:
            try:
                self._run(name, plugin, "on_broker_ready", broker=broker)
            except PluginCallError as err:
                log.error("%s", err, exc_info=err.__cause__)
                self.broker_ready_errors[name] = err.__cause__ or err
        self.state = LifecycleState.READY

    def close(self) -> None:
        """Close every configured plugin in reverse order; idempotent."""
        if self.state is LifecycleState.CLOSED:
            return
        self.state = LifecycleState.CLOSED
        self._closer.close()

    def _close_one(self, name: str, plugin: object) -> None:
        try:
            self._run(name, plugin, "close")
        finally:
            view = self._views.pop(name, None)
            if view is not None:
                view.close()

    def _run(self, name: str, plugin: object, phase: str, **kwargs: Any) -> None:
        try:
            call_one(self.plugin_manager, plugin, f"tierlog_{phase}", **kwargs)
        except Exception as err:
            raise PluginCallError(name, phase, err) from err

    def _require(self, expected: LifecycleState, step: str) -> None:
        if self.state is not expected:
            raise LifecycleError(
                f"cannot {step}: the plugin host is {self.state.value}, not {expected.value}"
            )

    # --- configuration slices ---------------------------------------------------------------

    def _roles_of(self, name: str) -> list[str]:
        return [role for role, chosen in self.chosen.items() if chosen == name]

    def _context(self, name: str, plugin: object) -> PluginContext:
        return PluginContext(
            name=name,
            roles=self.plugin_manager.roles_of(plugin),
            broker_id=self.config.get_int("broker.id"),
            cluster_id=self.config.get_str("cluster.id"),
            log_dirs=tuple(self.config.get_list("log.dirs")),
        )

    def _slice_for(self, name: str, plugin: object) -> ConfigSlice:
        """``plugin.<name>.*`` plus the role prefix (``rsm.config.``/``rlmm.config.``) if chosen,
        validated against the plugin's declared keys when it declares them. Its repr shows only
        the declared values that are not secret."""
        sources = [f"plugin.{name}."]
        for role in self._roles_of(name):
            _, prefix_key = _ROLE_KEYS[role]
            sources.append(self.config.get_str(prefix_key) or "")
        merged: dict[str, Any] = {}
        origin: dict[str, str] = {}
        for prefix in sources:
            for key, value in self.config.plugin_slice(prefix).items():
                if key in merged and merged[key] != value:
                    raise InvalidConfigError(
                        f"plugin {name!r} gets {key!r} twice with different values: "
                        f"{origin[key]}{key} and {prefix}{key}",
                        key=prefix + key,
                    )
                merged[key], origin[key] = value, prefix
        definitions = call_one(self.plugin_manager, plugin, "tierlog_config_definitions")
        if not definitions:
            return ConfigSlice(merged)
        try:
            parsed: dict[str, Any] = definitions[0].parse(merged)
        except InvalidConfigError as err:
            relative = err.key or ""
            full_keys = [origin[relative]] if relative in origin else sources
            full = " or ".join(f"{prefix}{relative}" for prefix in full_keys)
            message = str(err).replace(relative, full, 1) if relative else str(err)
            raise InvalidConfigError(
                f"plugin {name!r}: {message}", key=f"{full_keys[0]}{relative}", value=err.value
            ) from err
        return ConfigSlice(parsed, shown=(key.name for key in definitions[0] if not key.secret))

    # --- the SPI ---------------------------------------------------------------------------

    @property
    def storage(self) -> RemoteStorageManager:
        """The chosen RemoteStorageManager (with any wrappers around it)."""
        return self._facade(ROLE_STORAGE, RemoteStorageManager)  # type: ignore[no-any-return]

    @property
    def metadata(self) -> RemoteLogMetadataManager:
        """The chosen RemoteLogMetadataManager (with any wrappers around it)."""
        return self._facade(ROLE_METADATA, RemoteLogMetadataManager)  # type: ignore[no-any-return]

    def _facade(self, role: str, factory: Callable[[str, dict[str, Any]], Any]) -> Any:
        if self.state in (LifecycleState.CREATED, LifecycleState.CLOSED):
            raise LifecycleError(
                f"the {role} is not available: the plugin host is {self.state.value}"
            )
        if role not in self.chosen:
            raise BackendNotFoundError(
                f"no {role} is in use: set remote.log.storage.system.enable = true"
            )
        if role not in self._facades:
            provider = self.chosen[role]
            pm = self.plugin_manager
            others = [
                plugin
                for name in pm.providers(role)
                if name != provider and (plugin := pm.get_plugin(name)) is not None
            ]
            callers = {}
            for hook in ROLE_HOOKS[role]:
                caller = pm.subset_hook_caller(hook, remove_plugins=others)
                if any(
                    impl.plugin_name == provider and not (impl.wrapper or impl.hookwrapper)
                    for impl in caller.get_hookimpls()
                ):
                    callers[hook] = caller
            self._facades[role] = factory(provider, callers)
        return self._facades[role]
