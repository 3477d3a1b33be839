"""Raw configuration sources: TOML files, ``.properties`` files, the environment, code.

Every reader returns flat ``{dotted.key: raw value}`` mappings; types are applied later by the
definition (:meth:`ConfigDef.parse`), so a value means the same whichever source it came from.

* TOML: nested tables flatten to dotted keys, so ``[remote.log]`` + ``storage.system.enable =
  true`` is ``remote.log.storage.system.enable``; a flat table with quoted dotted keys works too.
* ``.properties``: Kafka's ``server.properties`` format, read as UTF-8 (a superset of the ASCII
  such files hold), with the usual comments, separators, continuations and escapes.
* Environment: ``TIERLOG_`` + the key upper-cased with ``.`` -> ``_``, ``_`` -> ``__`` and
  ``-`` -> ``___`` (the convention of Confluent's Kafka images), e.g.
  ``TIERLOG_REMOTE_FETCH_MAX_WAIT_MS=1000``. Plugin keys work the same way
  (``TIERLOG_RSM_CONFIG_BUCKET``), but only lower-case plugin keys can be written so.
  ``TIERLOG_*`` variables that name no key are left alone, because the runtime has switches of
  its own under that prefix (``TIERLOG_TRACE_PLUGINS``...); one that is very close to a real
  key is taken for a typo and rejected.

A file that cannot be used at all (missing, a directory, unreadable, not UTF-8 text, control
characters, invalid syntax, tables or values nested too deep) raises
:class:`~tierlog.errors.ConfigFileError`, whose one-line message names the file and the problem
and never quotes a value from it.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import jproperties  # type: ignore[import-untyped]

from ..errors import ConfigFileError, InvalidConfigError
from .broker import BROKER_CONFIG
from .definition import ConfigDef

#: Environment variables starting with this set configuration keys.
ENV_PREFIX: Final = "TIERLOG_"

_ENV_SEPARATORS: Final = re.compile(r"___|__|_")
_ENV_DECODE: Final = {"___": "-", "__": "_", "_": "."}
#: How close an unknown variable must be to a key to count as its typo. Stricter than for files,
#: because runtime switches (``TIERLOG_PLUGINS``...) share the prefix and must not be rejected.
_ENV_TYPO_CUTOFF: Final = 0.8

StrPath = str | os.PathLike[str]

#: Far larger than any configuration file; a larger file is refused rather than read into memory.
MAX_FILE_BYTES: Final = 16 * 1024 * 1024
#: Deeper than any configuration needs; ``[a.b.c]`` is three deep.
MAX_TOML_DEPTH: Final = 32
#: C0 controls (but tab, line feed, form feed and carriage return) and DEL: never in a text file.
_CONTROL_CHARACTER: Final = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def _position(text: str, index: int) -> str:
    """Line and column (both from 1) of ``index`` in ``text``, for messages."""
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line}, column {column}"


def _read_text(path: StrPath) -> str:
    """The file's text, or ``ConfigFileError`` saying in one line why there is none."""
    name = os.fspath(path)
    try:
        with open(path, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise ConfigFileError(name, "is not a regular file")
            data = file.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigFileError(name, "does not exist") from None
    except IsADirectoryError:
        raise ConfigFileError(name, "is a directory, not a file") from None
    except NotADirectoryError:
        raise ConfigFileError(name, "does not exist (a parent is not a directory)") from None
    except PermissionError:
        raise ConfigFileError(name, "cannot be read: permission denied") from None
    except OSError as err:
        raise ConfigFileError(name, f"cannot be read: {err.strerror or err}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigFileError(
            name, f"is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB: not a configuration file"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        before = data[: err.start].decode("utf-8", errors="replace")
        raise ConfigFileError(
            name,
            f"is not UTF-8 text (byte 0x{data[err.start]:02x} at {_position(before, len(before))})",
        ) from None
    text = text.removeprefix("\ufeff")
    control = _CONTROL_CHARACTER.search(text)
    if control is not None:
        raise ConfigFileError(
            name,
            f"is not a text file (control character U+{ord(control.group()):04X} at "
            f"{_position(text, control.start())})",
        )
    return text


def read_toml(path: StrPath) -> dict[str, object]:
    """Read a TOML file into flat dotted keys."""
    name = os.fspath(path)
    text = _read_text(path)
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigFileError(name, f"invalid TOML: {err}") from err
    except RecursionError:
        raise ConfigFileError(name, "invalid TOML: values nested too deep") from None
    flat: dict[str, object] = {}
    _flatten(document, "", flat, name, 0)
    return flat


def _flatten(
    table: Mapping[str, object], prefix: str, out: dict[str, object], path: str, depth: int
) -> None:
    if depth > MAX_TOML_DEPTH:
        raise ConfigFileError(
            path, f"tables nested more than {MAX_TOML_DEPTH} deep: not a configuration file"
        )
    for name, value in table.items():
        dotted = prefix + name
        if isinstance(value, dict):
            _flatten(value, dotted + ".", out, path, depth + 1)
            continue
        if isinstance(value, list) and any(isinstance(item, dict) for item in value):
            raise ConfigFileError(
                path,
                f"{dotted} is an array of tables, which is not a configuration value",
                key=dotted,
            )
        if dotted in out:
            raise ConfigFileError(path, f"{dotted} is set twice", key=dotted)
        out[dotted] = value


def read_properties(path: StrPath) -> dict[str, str]:
    """Read a Java ``.properties`` file (Kafka's ``server.properties`` format)."""
    name = os.fspath(path)
    text = _read_text(path)
    properties = jproperties.Properties()
    try:
        properties.load(text)
    except jproperties.ParseError as err:
        # Every parse error of the format is a broken \uXXXX escape; its own message may quote
        # part of the value, which may be a secret, so it is not repeated.
        raise ConfigFileError(
            name, f"invalid properties file: malformed \\uXXXX escape at line {err.line_number}"
        ) from None
    except (jproperties.PropertyError, ValueError, EOFError) as err:
        raise ConfigFileError(name, f"invalid properties file: {type(err).__name__}") from None
    return {str(key): str(value) for key, value in properties.properties.items()}


def read_file(path: StrPath) -> dict[str, object]:
    """Read a configuration file, choosing the format by suffix (``.toml`` or ``.properties``)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".toml":
        return read_toml(path)
    if suffix == ".properties":
        return dict(read_properties(path))
    raise ConfigFileError(
        os.fspath(path),
        f"unsupported configuration file type {suffix or '(none)'!r}; use .toml or .properties",
    )


def env_var_name(key: str) -> str:
    """The environment variable that sets ``key``."""
    encoded = key.replace("_", "__").replace("-", "___").replace(".", "_")
    return ENV_PREFIX + encoded.upper()


def key_from_env_var(name: str) -> str | None:
    """The key an environment variable sets, or ``None`` if it lacks the prefix."""
    if not name.startswith(ENV_PREFIX) or name == ENV_PREFIX:
        return None
    encoded = name[len(ENV_PREFIX) :].lower()
    return _ENV_SEPARATORS.sub(lambda match: _ENV_DECODE[match.group()], encoded)


def load_sources(
    file: StrPath | None = None,
    environ: Mapping[str, str] = os.environ,
    overrides: Mapping[str, object] | None = None,
    *,
    definition: ConfigDef = BROKER_CONFIG,
) -> dict[str, object]:
    """Merge raw values: config file < environment < explicit ``overrides``.

    Built-in defaults, the lowest layer, are applied by ``definition.parse``. Synonyms are
    renamed to canonical names within each layer first, so a higher layer wins whichever name
    each layer used. The result is raw (unparsed); unknown keys from the file or the overrides
    are kept so that parsing reports them.
    """
    file_layer = definition.canonicalize(read_file(file)) if file is not None else {}
    override_layer = definition.canonicalize(overrides or {})

    variables: dict[str, str] = {}
    decoded: dict[str, str] = {}
    for variable, text in environ.items():
        key = key_from_env_var(variable)
        if key is not None:
            variables[key] = variable
            decoded[key] = text
    env_candidates = definition.canonicalize(decoded)
    known = {name: value for name, value in env_candidates.items() if name in definition}
    prefixes = definition.plugin_prefixes({**file_layer, **known, **override_layer})

    env_layer: dict[str, object] = {}
    for name, value in env_candidates.items():
        if name in definition or definition.is_plugin_key(name, prefixes):
            env_layer[name] = value
            continue
        suggestion = definition.suggest(name, cutoff=_ENV_TYPO_CUTOFF)
        if suggestion is not None:
            variable = variables.get(name, env_var_name(name))
            raise InvalidConfigError(
                f"environment variable {variable} sets unknown configuration key {name!r} "
                f"(did you mean {suggestion!r}, set by {env_var_name(suggestion)}?)",
                key=name,
            )
    return {**file_layer, **env_layer, **override_layer}
