"""tierlog configuration: Kafka's keys and defaults, declared once, loaded from anywhere.

Precedence, lowest to highest:

1. built-in defaults (:data:`BROKER_CONFIG`);
2. the configuration file, TOML (``.toml``) or Kafka-style ``.properties``;
3. the environment: ``TIERLOG_`` + the key upper-cased with ``.`` -> ``_``, ``_`` -> ``__``,
   ``-`` -> ``___`` (``TIERLOG_REMOTE_FETCH_MAX_WAIT_MS=1000``);
4. explicit overrides, a mapping passed by code or the command line.

Synonyms (Kafka's older names, e.g. ``fetch.remote.max.wait.ms`` for
``remote.fetch.max.wait.ms``) resolve to the canonical name in every layer before merging, and
in lookups and updates. Keys under a plugin prefix (``rsm.config.``, ``rlmm.config.``,
``plugin.<name>.``) are kept as raw strings for the plugin; :meth:`BrokerConfig.plugin_slice`
hands a plugin its slice. Bad keys and values raise :class:`~tierlog.errors.InvalidConfigError`
naming the key, the value (never a secret one) and what is allowed.

Typical use::

    config = BrokerConfig.from_sources(file="server.toml")
    config["remote.fetch.max.wait.ms"]                 # 500
    config.add_listener("remote.fetch.max.wait.ms", on_change)
    config.update({"remote.fetch.max.wait.ms": 1000})  # validated, then listeners run
    topic = resolve_topic_config({"retention.ms": 86400000}, config)
"""

from __future__ import annotations

from .broker import (
    BROKER_CONFIG,
    effective_copier_thread_pool_size,
    effective_expiration_thread_pool_size,
    effective_log_flush_interval_ms,
    effective_log_retention_ms,
    effective_log_roll_ms,
)
from .definition import (
    REQUIRED,
    ConfigDef,
    ConfigKey,
    ConfigRule,
    ConfigType,
    Importance,
)
from .live import BrokerConfig, ConfigListener
from .secrets import HIDDEN, ConfigSlice, Password, is_secret_name, url_has_userinfo
from .sources import (
    ENV_PREFIX,
    env_var_name,
    load_sources,
    read_file,
    read_properties,
    read_toml,
)
from .topic import TOPIC_CONFIG, TopicConfig, resolve_topic_config, topic_defaults
from .validators import (
    Validator,
    any_of,
    at_least,
    at_most,
    between,
    list_of,
    non_empty,
    one_of,
)

__all__ = [
    "BROKER_CONFIG",
    "ENV_PREFIX",
    "HIDDEN",
    "REQUIRED",
    "TOPIC_CONFIG",
    "BrokerConfig",
    "ConfigDef",
    "ConfigKey",
    "ConfigListener",
    "ConfigRule",
    "ConfigSlice",
    "ConfigType",
    "Importance",
    "Password",
    "TopicConfig",
    "Validator",
    "any_of",
    "at_least",
    "at_most",
    "between",
    "effective_copier_thread_pool_size",
    "effective_expiration_thread_pool_size",
    "effective_log_flush_interval_ms",
    "effective_log_retention_ms",
    "effective_log_roll_ms",
    "env_var_name",
    "is_secret_name",
    "list_of",
    "load_sources",
    "non_empty",
    "one_of",
    "read_file",
    "read_properties",
    "read_toml",
    "resolve_topic_config",
    "topic_defaults",
    "url_has_userinfo",
]
