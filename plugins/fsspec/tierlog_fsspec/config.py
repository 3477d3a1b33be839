"""The plugin's configuration slice: declared keys, cross-key rules, and the typed config.

Keys are relative to the slice (``plugin.fsspec.*`` or ``rsm.config.*``, prefix stripped). The
same :class:`ConfigDef` validates the slice in the host (so errors name the full key) and in
:meth:`FsspecStorageConfig.from_mapping`, so both always agree.

``storage.<option>`` keys are fsspec storage options, handed to ``fsspec.core.url_to_fs``
unchanged except for shape: dots nest (``storage.client_kwargs.endpoint_url``) and ``true`` /
``false`` / integers become Python values, because a properties file only holds strings.
This plugin never logs or shows storage option values; values of options whose names say they
are credentials (key, secret, token, password...) are also scrubbed from backend error messages
and backend log records.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import attrs
from tierlog.config import (
    HIDDEN,
    REQUIRED,
    ConfigDef,
    ConfigKey,
    ConfigRule,
    ConfigType,
    Password,
    at_least,
    between,
    one_of,
    url_has_userinfo,
)
from tierlog.errors import InvalidConfigError

KiB: Final = 1024
MiB: Final = 1024 * KiB
GiB: Final = 1024 * MiB

STORAGE_PREFIX: Final = "storage."
MIN_CHUNK_SIZE: Final = 4 * KiB
MAX_CHUNK_SIZE: Final = 1 * GiB
#: S3's smallest multipart part (every part but the last).
S3_MIN_PART_SIZE: Final = 5 * MiB
S3_PROTOCOLS: Final = ("s3", "s3a")
#: A data key is AES-256: key-encryption keys are too.
KEY_BYTES: Final = 32

COMPRESSION_NONE: Final = "none"
COMPRESSION_ZSTD: Final = "zstd"
CACHE_NONE, CACHE_MEMORY, CACHE_DISK = "none", "memory", "disk"

#: Storage options that carry credentials in the common fsspec backends; declared as PASSWORD
#: so ``tierlog config`` never prints them. Any other ``storage.*`` key is accepted too.
SECRET_STORAGE_OPTIONS: Final = (
    "key",
    "secret",
    "token",
    "password",
    "client_kwargs.aws_access_key_id",
    "client_kwargs.aws_secret_access_key",
    "client_kwargs.aws_session_token",
    "account_key",
    "sas_token",
    "connection_string",
)

_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_URL = re.compile(r"(?P<protocol>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)")
_SECRET_WORDS = (
    "key",
    "secret",
    "token",
    "password",
    "passwd",
    "credential",
    "sas",
    "auth",
    "signature",
    "connection_string",
)


def _storage_secret_keys() -> tuple[ConfigKey, ...]:
    return tuple(
        ConfigKey(
            STORAGE_PREFIX + option,
            ConfigType.PASSWORD,
            None,
            doc=f"fsspec storage option {option!r} (a credential; never shown).",
        )
        for option in SECRET_STORAGE_OPTIONS
    )


@functools.cache
def config_def() -> ConfigDef:
    """Every key of the slice, with the cross-key rules; built on demand (import-light)."""
    keys = (
        ConfigKey(
            "url",
            ConfigType.STRING,
            REQUIRED,
            doc="Where segments go: file:///path, memory://name, s3://bucket/prefix or any "
            "registered fsspec protocol; the path is the object prefix. fsspec storage options "
            "go under storage.<option>, handed over unchanged (dots nest: "
            "storage.client_kwargs.endpoint_url); they are never shown.",
        ),
        ConfigKey(
            "chunk.size",
            ConfigType.INT,
            4 * MiB,
            validator=between(MIN_CHUNK_SIZE, MAX_CHUNK_SIZE),
            doc="Segments are cut into chunks of this many bytes; each chunk is transformed and "
            "checksummed on its own, and a ranged fetch downloads only the chunks it covers.",
        ),
        ConfigKey(
            "compression",
            ConfigType.STRING,
            COMPRESSION_NONE,
            validator=one_of(COMPRESSION_NONE, COMPRESSION_ZSTD),
            doc="Chunk compression: none or zstd. A chunk that does not shrink is stored as is.",
        ),
        ConfigKey(
            "compression.level",
            ConfigType.INT,
            3,
            validator=between(1, 22),
            doc="zstd level (1 fastest ... 22 smallest).",
        ),
        ConfigKey(
            "compression.heuristic.enabled",
            ConfigType.BOOLEAN,
            True,
            doc="When the segment's first batch is already compressed by its producer, try the "
            "first chunk and skip compression for the whole segment if it saves under 5%.",
        ),
        ConfigKey(
            "encryption.keys",
            ConfigType.PASSWORD,
            None,
            doc="Key ring of AES-256 key-encryption keys: 'id:base64key,id:base64key'. Each "
            "segment gets a random data key wrapped by the active key; keep retired keys here "
            "so older segments stay readable. Null disables encryption.",
        ),
        ConfigKey(
            "encryption.active.key",
            ConfigType.STRING,
            None,
            doc="Id of the ring key that wraps new data keys (rotation: add a key, make it "
            "active). May be left out when the ring holds a single key.",
        ),
        ConfigKey(
            "cache.kind",
            ConfigType.STRING,
            CACHE_NONE,
            validator=one_of(CACHE_NONE, CACHE_MEMORY, CACHE_DISK),
            doc="Read cache of decoded chunks: none, memory or disk. Without a cache, an "
            "untransformed segment is read with byte-exact ranged reads.",
        ),
        ConfigKey(
            "cache.size.bytes",
            ConfigType.LONG,
            256 * MiB,
            validator=at_least(1),
            doc="Size bound of the chunk cache; least recently used chunks are evicted.",
        ),
        ConfigKey(
            "cache.dir",
            ConfigType.STRING,
            None,
            doc="Directory of the disk cache (a private subdirectory is created in it and "
            "removed on close); null uses a temporary directory.",
        ),
        ConfigKey(
            "prefetch.chunks",
            ConfigType.INT,
            0,
            validator=between(0, 1024),
            doc="Chunks read ahead into the cache after each fetched window; never past the "
            "end of the segment. Needs a cache.",
        ),
        ConfigKey(
            "retry.max.attempts",
            ConfigType.INT,
            3,
            validator=between(1, 100),
            doc="Attempts per storage request, the first included; only transient errors "
            "(timeouts, dropped connections, throttling) are retried.",
        ),
        ConfigKey(
            "retry.backoff.ms",
            ConfigType.LONG,
            100,
            validator=at_least(0),
            doc="Backoff before the first retry; doubles per retry, with jitter.",
        ),
        ConfigKey(
            "retry.backoff.max.ms",
            ConfigType.LONG,
            5000,
            validator=at_least(0),
            doc="Upper bound of the backoff between two attempts.",
        ),
        ConfigKey(
            "upload.part.size",
            ConfigType.INT,
            25 * MiB,
            validator=between(64 * KiB, 5 * GiB),
            doc="Multipart upload part size (at least 5 MiB on S3).",
        ),
        *_storage_secret_keys(),
    )
    rules = (
        ConfigRule("url names a known fsspec protocol", ("url",), _check_url),
        ConfigRule(
            "the active key is in the key ring",
            ("encryption.keys", "encryption.active.key"),
            _check_key_ring,
        ),
        ConfigRule(
            "the cache settings fit together",
            ("cache.kind", "cache.size.bytes", "cache.dir", "prefetch.chunks", "chunk.size"),
            _check_cache,
        ),
        ConfigRule("S3 parts are at least 5 MiB", ("url", "upload.part.size"), _check_part_size),
        ConfigRule(
            "retry backoff bounds", ("retry.backoff.ms", "retry.backoff.max.ms"), _check_backoff
        ),
        ConfigRule("storage options nest consistently", (), _check_storage_options),
    )
    return ConfigDef(keys=keys, rules=rules, raw_prefixes=(STORAGE_PREFIX,))


# --- cross-key rules ------------------------------------------------------------------------


def url_protocol(url: str) -> str:
    """The protocol of ``url`` (lower case); a URL without ``<protocol>://`` is refused."""
    match = _URL.fullmatch(url)
    if match is None:
        raise InvalidConfigError(
            f"url = {url!r}: expected <protocol>://<path>, e.g. file:///var/tierlog or "
            "s3://bucket/prefix",
            key="url",
            value=url,
        )
    return match["protocol"].lower()


def _check_url(values: Mapping[str, object]) -> None:
    url = str(values["url"])
    # Checked first, so that a URL with credentials is never echoed by a later message; stricter
    # than urllib, which misreads a password holding '/', '?' or '#' as the start of the path.
    if url_has_userinfo(url):
        raise InvalidConfigError(
            "url must not carry credentials (user:password@ before the host); give them as "
            "storage.<option> keys",
            key="url",
            value=HIDDEN,
        )
    protocol = url_protocol(url)
    import fsspec  # at configure time only: the plugin module stays import-light

    try:
        fsspec.get_filesystem_class(protocol)
    except (ValueError, ImportError) as err:
        raise InvalidConfigError(
            f"url = {url!r}: fsspec cannot open protocol {protocol!r}: {err}", key="url"
        ) from None


def parse_key_ring(raw: object) -> dict[str, bytes]:
    """``id:base64,id:base64`` → {id: 32-byte key}; errors name the key, never a key's bytes."""
    text = raw.value if isinstance(raw, Password) else str(raw)
    ring: dict[str, bytes] = {}
    for position, entry in enumerate(part.strip() for part in text.split(",")):
        if not entry:
            continue
        key_id, sep, encoded = entry.partition(":")
        key_id = key_id.strip()
        if not sep or not _KEY_ID.fullmatch(key_id):
            raise InvalidConfigError(
                f"encryption.keys: entry {position + 1} is not 'id:base64key' with an id of "
                "letters, digits, '.', '_' or '-'",
                key="encryption.keys",
            )
        try:
            material = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise InvalidConfigError(
                f"encryption.keys: key {key_id!r} is not valid base64", key="encryption.keys"
            ) from None
        if len(material) != KEY_BYTES:
            raise InvalidConfigError(
                f"encryption.keys: key {key_id!r} is {len(material)} bytes; AES-256 needs "
                f"{KEY_BYTES}",
                key="encryption.keys",
            )
        if key_id in ring:
            raise InvalidConfigError(
                f"encryption.keys: key id {key_id!r} appears twice", key="encryption.keys"
            )
        ring[key_id] = material
    return ring


def _active_key(values: Mapping[str, object], ring: Mapping[str, bytes]) -> str | None:
    active = values.get("encryption.active.key")
    if not ring:
        if active is not None:
            raise InvalidConfigError(
                "encryption.active.key is set but encryption.keys is empty",
                key="encryption.active.key",
            )
        return None
    if active is None:
        if len(ring) == 1:
            return next(iter(ring))
        raise InvalidConfigError(
            f"encryption.keys holds {len(ring)} keys; say which one wraps new data keys with "
            "encryption.active.key",
            key="encryption.active.key",
        )
    if active not in ring:
        raise InvalidConfigError(
            f"encryption.active.key = {active!r} is not in encryption.keys (ids: "
            f"{', '.join(sorted(ring))})",
            key="encryption.active.key",
        )
    return str(active)


def _check_key_ring(values: Mapping[str, object]) -> None:
    raw = values.get("encryption.keys")
    _active_key(values, parse_key_ring(raw) if raw is not None else {})


def _check_cache(values: Mapping[str, object]) -> None:
    kind = values["cache.kind"]
    prefetch = int(values["prefetch.chunks"])  # type: ignore[call-overload]
    if kind == CACHE_NONE:
        if prefetch:
            raise InvalidConfigError(
                "prefetch.chunks needs a cache to prefetch into; set cache.kind to memory or disk",
                key="prefetch.chunks",
            )
    else:
        needed = int(values["chunk.size"]) * (prefetch + 1)  # type: ignore[call-overload]
        if int(values["cache.size.bytes"]) < needed:  # type: ignore[call-overload]
            raise InvalidConfigError(
                f"cache.size.bytes = {values['cache.size.bytes']} cannot hold the chunk being "
                f"read plus {prefetch} prefetched chunks of chunk.size = {values['chunk.size']} "
                f"(needs at least {needed})",
                key="cache.size.bytes",
            )
    if values.get("cache.dir") is not None and kind != CACHE_DISK:
        raise InvalidConfigError(
            f"cache.dir is only used by the disk cache, but cache.kind = {kind!r}",
            key="cache.dir",
        )


def _check_part_size(values: Mapping[str, object]) -> None:
    part = int(values["upload.part.size"])  # type: ignore[call-overload]
    if url_protocol(str(values["url"])) in S3_PROTOCOLS and part < S3_MIN_PART_SIZE:
        raise InvalidConfigError(
            f"upload.part.size = {part} is below S3's minimum part size of {S3_MIN_PART_SIZE}",
            key="upload.part.size",
        )


def _check_backoff(values: Mapping[str, object]) -> None:
    if int(values["retry.backoff.max.ms"]) < int(values["retry.backoff.ms"]):  # type: ignore[call-overload]
        raise InvalidConfigError(
            "retry.backoff.max.ms must be at least retry.backoff.ms", key="retry.backoff.max.ms"
        )


def _check_storage_options(values: Mapping[str, object]) -> None:
    storage_options(values)


# --- storage options --------------------------------------------------------------------------


def is_secret_option(path: str) -> bool:
    """Whether a storage option's name says it holds a credential."""
    lowered = path.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def _option_value(name: str, raw: object) -> object:
    if isinstance(raw, Password):
        return raw.value
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if not is_secret_option(name) and re.fullmatch(r"[+-]?[0-9]+", text):
        return int(text)
    return text


def storage_options(values: Mapping[str, object]) -> dict[str, Any]:
    """The nested fsspec storage options from the flat ``storage.*`` keys."""
    options: dict[str, Any] = {}
    for name in sorted(values):
        if not name.startswith(STORAGE_PREFIX) or values[name] is None:
            continue
        path = name[len(STORAGE_PREFIX) :].split(".")
        if not all(path):
            raise InvalidConfigError(f"{name}: empty option name", key=name)
        node = options
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise InvalidConfigError(
                    f"{name} nests under a storage option that already has a value", key=name
                )
            node = child
        if isinstance(node.get(path[-1]), dict):
            raise InvalidConfigError(
                f"{name} has a value but other storage options nest under it", key=name
            )
        node[path[-1]] = _option_value(path[-1], values[name])
    return options


def secret_values(options: Mapping[str, Any]) -> set[str]:
    """String values of the storage options whose names say they are credentials."""
    found: set[str] = set()
    for name, value in options.items():
        if isinstance(value, Mapping):
            found |= secret_values(value)
        elif isinstance(value, str) and is_secret_option(name):
            found.add(value)
    return found


# --- the typed configuration ------------------------------------------------------------------


def _frozen_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


@attrs.frozen(kw_only=True)
class FsspecStorageConfig:
    """The validated slice. Secrets (storage options, the key ring) never show in its repr."""

    url: str
    storage_options: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_frozen_mapping, repr=False
    )
    chunk_size: int = 4 * MiB
    compression: str = COMPRESSION_NONE
    compression_level: int = 3
    compression_heuristic: bool = True
    encryption_keys: Mapping[str, bytes] = attrs.field(
        factory=dict, converter=_frozen_mapping, repr=False
    )
    active_key_id: str | None = None
    cache_kind: str = CACHE_NONE
    cache_size_bytes: int = 256 * MiB
    cache_dir: str | None = None
    prefetch_chunks: int = 0
    retry_max_attempts: int = 3
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 5000
    upload_part_size: int = 25 * MiB

    @classmethod
    def from_mapping(cls, raw: Mapping[str, object]) -> FsspecStorageConfig:
        """Parse and validate a slice (raw strings or already-parsed values).

        :raises InvalidConfigError: naming the (relative) key, for an unknown key, a bad value
            or a combination that does not work.
        """
        values = config_def().parse(raw)
        ring_raw = values["encryption.keys"]
        ring = parse_key_ring(ring_raw) if ring_raw is not None else {}
        return cls(
            url=str(values["url"]),
            storage_options=storage_options(values),
            chunk_size=int(values["chunk.size"]),  # type: ignore[call-overload]
            compression=str(values["compression"]),
            compression_level=int(values["compression.level"]),  # type: ignore[call-overload]
            compression_heuristic=bool(values["compression.heuristic.enabled"]),
            encryption_keys=ring,
            active_key_id=_active_key(values, ring),
            cache_kind=str(values["cache.kind"]),
            cache_size_bytes=int(values["cache.size.bytes"]),  # type: ignore[call-overload]
            cache_dir=None if values["cache.dir"] is None else str(values["cache.dir"]),
            prefetch_chunks=int(values["prefetch.chunks"]),  # type: ignore[call-overload]
            retry_max_attempts=int(values["retry.max.attempts"]),  # type: ignore[call-overload]
            retry_backoff_ms=int(values["retry.backoff.ms"]),  # type: ignore[call-overload]
            retry_backoff_max_ms=int(values["retry.backoff.max.ms"]),  # type: ignore[call-overload]
            upload_part_size=int(values["upload.part.size"]),  # type: ignore[call-overload]
        )

    @property
    def protocol(self) -> str:
        return url_protocol(self.url)

    @property
    def encrypted(self) -> bool:
        return self.active_key_id is not None

    @property
    def compressed(self) -> bool:
        return self.compression != COMPRESSION_NONE

    @property
    def transforms(self) -> bool:
        """Whether stored chunks differ from the segment's bytes."""
        return self.encrypted or self.compressed

    def secrets(self) -> set[str]:
        """Every string that must never be shown: storage option values and key material."""
        found = secret_values(self.storage_options)
        for key_id, material in self.encryption_keys.items():
            found.add(base64.b64encode(material).decode())
            found.add(key_id + ":" + base64.b64encode(material).decode())
        return {value for value in found if len(value) >= 4}
